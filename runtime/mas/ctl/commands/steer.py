"""``mas-ctl steer``: steer a session of a serving agent over its control endpoint."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from mas.ctl.session.control import ControlClient
from mas.runtime.boundary.control import STEER_MODES


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "steer",
        help="preempt, replace or queue ahead in a session of a serving agent",
        description="preempt: keep the prefix, replace the rest; replace: discard the prefix "
        "and start over; wait: queue at the front until the current generation finishes.",
    )
    parser.add_argument("--agent", required=True, metavar="ID", help="the serving agent")
    parser.add_argument("--session", required=True, metavar="S", help="the session id")
    parser.add_argument(
        "--pid", type=int, default=None, metavar="N", help="the serving process, when several"
    )
    parser.add_argument("--mode", required=True, choices=STEER_MODES)
    parser.add_argument(
        "--follow", action="store_true", help="wait for the steered turn and print its answer"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="with --follow"
    )
    parser.add_argument("text", metavar="TEXT", help="the steer text")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Send the steer; print what it did (and, with --follow, the answer)."""
    client = ControlClient.from_directory(args.agent, pid=args.pid)
    reply = asyncio.run(
        client.steer(args.session, args.text, args.mode, follow=args.follow, timeout=args.timeout)
    )
    print(f"{reply['applied']}: turn {reply['turn_id']} of session {args.session!r}")
    if args.follow:
        print(reply.get("text", ""))
        if reply.get("status") != "completed":
            print(f"the steered turn ended {reply.get('status')}: {reply.get('message', '')}")
            return 1
    return 0

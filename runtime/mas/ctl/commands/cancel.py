"""``mas-ctl cancel``: interrupt the in-flight turn of a session (``cancel_inflight``)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from mas.ctl.session.control import ControlClient


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "cancel", help="interrupt the running turn of a session of a serving agent"
    )
    parser.add_argument("--agent", required=True, metavar="ID", help="the serving agent")
    parser.add_argument("--session", required=True, metavar="S", help="the session id")
    parser.add_argument(
        "--pid", type=int, default=None, metavar="N", help="the serving process, when several"
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Cancel; say whether a turn was running."""
    client = ControlClient.from_directory(args.agent, pid=args.pid)
    if asyncio.run(client.cancel(args.session)):
        print(f"canceled the running turn of session {args.session!r} of agent {args.agent!r}")
    else:
        print(f"no turn was running in session {args.session!r} of agent {args.agent!r}")
    return 0

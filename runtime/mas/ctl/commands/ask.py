"""``mas-ctl ask``: one turn with an A2A agent, ours or any other.

::

    mas-ctl ask TARGET -m TEXT [--context ID] [-o text|json] [--save DIR]
                [--transport jsonrpc|rest|grpc] [-H 'Name: value'] [--token-file PATH]
                [--cacert PATH] [-n NS] [--kube-context NAME] [--kubeconfig PATH]

The agent's text streams to stdout as it arrives (when its card declares streaming; else
the reply is printed when the blocking send returns); delegations and tool calls it reports
go to stderr; artifacts are printed (text), shown as JSON (data) or written under
``--save DIR`` (files). ``--context ID`` continues a conversation; the context id is
printed on stderr, so a script can continue it.

Exit codes: 0 the turn completed; 1 it failed or was canceled, or the call failed (one line
on stderr); 2 a bad TARGET or option; 4 the agent asks for input (the question is printed:
answer with ``mas-ctl ask TARGET --context ID -m ANSWER``); 130 Ctrl-C, after
``CancelTask`` was sent for the running task.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

from mas.ctl.client.connection import Connection
from mas.ctl.client.errors import EXIT_FAILED, EXIT_INPUT_REQUIRED
from mas.ctl.client.exchange import TurnIds, cancel_turn, send_turn, waiting_task
from mas.ctl.client.options import add_client_options, add_context_option
from mas.ctl.client.output import one_line
from mas.ctl.client.running import interruptible, run_client
from mas.ctl.client.turn_output import TurnOutput


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "ask", help="send one message to an A2A agent and print its answer"
    )
    add_client_options(parser)
    parser.add_argument("-m", "--message", required=True, metavar="TEXT", help="what to say")
    add_context_option(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    parser.add_argument(
        "--save", type=Path, default=None, metavar="DIR", help="write file artifacts under DIR"
    )
    parser.set_defaults(handler=handle)


async def ask(conn: Connection, args: argparse.Namespace) -> int:
    """Send the message; print the turn; the exit code."""
    context_id = args.context_id or str(uuid.uuid4())
    resumes = await waiting_task(conn, context_id) if args.context_id else None
    ids = TurnIds(context_id)
    output = TurnOutput(sys.stdout, sys.stderr, as_json=args.output == "json", save=args.save)

    async def turn() -> None:
        async for event in send_turn(conn, args.message, ids, resumes):
            output.event(event)

    async def on_interrupt() -> None:
        await cancel_running(conn, ids)

    await interruptible(turn(), on_interrupt)
    if args.output == "json":
        output.summary(context_id, ids.task_id, ids.metadata)
    ended = output.ended
    if ended is None:
        return EXIT_FAILED
    if ended.status == "input_required":
        print(
            f"· {one_line(conn.name, 80)} asks for input; answer with: mas-ctl ask TARGET "
            f"--context {context_id} -m ANSWER",
            file=sys.stderr,
        )
        return EXIT_INPUT_REQUIRED
    if ended.status != "completed":
        print(
            f"error: the agent's turn {ended.status}: {one_line(ended.message or '(no message)')}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    output.tokens(ids.metadata)
    if not args.context_id:
        print(f"· context {context_id}", file=sys.stderr)
    return 0


async def cancel_running(conn: Connection, ids: TurnIds) -> None:
    """Ctrl-C: cancel the turn's task and say so on stderr; the exit code is the caller's."""
    outcomes = await cancel_turn(conn, ids)
    if not outcomes:
        print("interrupted: no task of this turn was running", file=sys.stderr)
    for task_id, outcome in outcomes:
        print(f"interrupted: task {task_id}: {outcome}", file=sys.stderr)


def handle(args: argparse.Namespace) -> int:
    """Run the turn."""
    return run_client(args, lambda conn: ask(conn, args))

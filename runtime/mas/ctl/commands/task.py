"""``mas-ctl task``: one task of an A2A agent (``GetTask``), or follow it (``SubscribeToTask``).

::

    mas-ctl task TARGET ID [--follow] [-o text|json] [--save DIR] [connection options]

Without ``--follow``: its state, then its reply and artifacts as ``ask`` prints them (the
reply once it has ended). ``--follow``: its text streams as it arrives until it ends
(subscribed when the agent streams, else read with ``GetTask`` at a growing interval).
Exit codes: as ``ask`` (0 completed, 1 failed/canceled or the call failed, 4 it waits for
input); a task id the agent does not know is exit 1, naming the id; Ctrl-C stops following
(130) without canceling the task.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from a2a.types import GetTaskRequest

from mas.ctl.client.connection import Connection
from mas.ctl.client.errors import EXIT_FAILED, EXIT_INPUT_REQUIRED
from mas.ctl.client.exchange import TurnIds, follow_task
from mas.ctl.client.options import add_client_options
from mas.ctl.client.output import one_line
from mas.ctl.client.running import interruptible, run_client
from mas.ctl.client.turn_output import TurnOutput
from mas.ctl.commands.tasks import state_name


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "task", help="show one task of an A2A agent, or follow it to its end"
    )
    add_client_options(parser)
    parser.add_argument("task_id", metavar="ID", help="the task id")
    parser.add_argument(
        "--follow", action="store_true", help="stream the task until it ends (SubscribeToTask)"
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    parser.add_argument(
        "--save", type=Path, default=None, metavar="DIR", help="write file artifacts under DIR"
    )
    parser.set_defaults(handler=handle)


async def show(conn: Connection, args: argparse.Namespace) -> int:
    """Print (or follow) the task; the exit code."""
    try:
        task = await conn.client.get_task(GetTaskRequest(id=args.task_id), context=conn.context())
    except Exception as exc:
        raise conn.failure(exc, "GetTask", args.task_id) from None
    as_json = args.output == "json"
    if not as_json:
        print(
            f"· task {one_line(task.id, 80)} (context {one_line(task.context_id, 80)}): "
            f"{state_name(task.status.state)}",
            file=sys.stderr,
        )
    output = TurnOutput(sys.stdout, sys.stderr, as_json=as_json, save=args.save)
    ids = TurnIds(context_id=task.context_id, task_id=task.id)

    async def follow() -> None:
        async for event in follow_task(conn, args.task_id, wait=args.follow, ids=ids):
            output.event(event)

    async def stop() -> None:
        print("interrupted: stopped following (the task goes on)", file=sys.stderr)

    await interruptible(follow(), stop)
    if as_json:
        output.summary(task.context_id, task.id, ids.metadata)
    output.close()
    ended = output.ended
    if ended is None:
        return 0  # still running, not followed
    if ended.status == "input_required":
        return EXIT_INPUT_REQUIRED
    return 0 if ended.status == "completed" else EXIT_FAILED


def handle(args: argparse.Namespace) -> int:
    """Read or follow the task."""
    return run_client(args, lambda conn: show(conn, args))

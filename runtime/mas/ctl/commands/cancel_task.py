"""``mas-ctl cancel-task``: cancel one task of an A2A agent (``CancelTask``).

::

    mas-ctl cancel-task TARGET ID [connection options]

Prints the state the agent answered (``canceled``). Exit codes: 0 canceled; 1 the agent
refused (a task that has ended cannot be canceled), knows no such task, or the call failed
(one line on stderr, naming the id); 2 a bad TARGET or option. (``mas-ctl cancel`` is
another thing: it interrupts a session's running turn over the local control endpoint.)
"""

from __future__ import annotations

import argparse
from typing import Any

from a2a.types import TaskState

from mas.ctl.client.connection import Connection
from mas.ctl.client.errors import EXIT_FAILED
from mas.ctl.client.exchange import cancel
from mas.ctl.client.options import add_client_options
from mas.ctl.client.output import one_line
from mas.ctl.client.running import run_client
from mas.ctl.commands.tasks import state_name


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "cancel-task", help="cancel a task of an A2A agent (CancelTask)"
    )
    add_client_options(parser)
    parser.add_argument("task_id", metavar="ID", help="the task id")
    parser.set_defaults(handler=handle)


async def cancel_one(conn: Connection, args: argparse.Namespace) -> int:
    """Cancel; print the state answered."""
    task = await cancel(conn, args.task_id)
    print(f"task {one_line(task.id or args.task_id, 80)}: {state_name(task.status.state)}")
    return 0 if task.status.state == TaskState.TASK_STATE_CANCELED else EXIT_FAILED


def handle(args: argparse.Namespace) -> int:
    """Cancel the task."""
    return run_client(args, lambda conn: cancel_one(conn, args))

"""``mas-ctl tasks``: the tasks an A2A agent holds (``ListTasks``).

::

    mas-ctl tasks TARGET [--context ID] [--state S] [-o table|json] [connection options]

One row per task: id, context, state, when its status last changed. ``--state`` takes the
A2A states (``working``, ``input-required``, ``completed``...). Under ``a2a.auth`` our
agents list only the caller's own tasks. Exit codes: 0; 1 the call failed (one line on
stderr); 2 a bad TARGET, state or option.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from a2a.types import ListTasksRequest, TaskState
from google.protobuf.json_format import MessageToDict

from mas.ctl.client.connection import Connection
from mas.ctl.client.options import add_client_options, add_context_option
from mas.ctl.client.output import one_line
from mas.ctl.client.running import run_client

PAGE = 100
STATES = {
    TaskState.Name(s).removeprefix("TASK_STATE_").lower().replace("_", "-"): s
    for s in TaskState.values()
    if s != TaskState.TASK_STATE_UNSPECIFIED
}


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "tasks", help="list an A2A agent's tasks (ListTasks)"
    )
    add_client_options(parser)
    add_context_option(parser)
    parser.add_argument("--state", choices=tuple(STATES), default=None, help="only this state")
    parser.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="output format"
    )
    parser.set_defaults(handler=handle)


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` as ``input-required``."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


async def listing(conn: Connection, args: argparse.Namespace) -> int:
    """Every page of the listing, printed."""
    rows: list[dict[str, Any]] = []
    token = ""
    while True:
        request = ListTasksRequest(page_size=PAGE, page_token=token)
        if args.context_id:
            request.context_id = args.context_id
        if args.state:
            request.status = STATES[args.state]
        try:
            page = await conn.client.list_tasks(request, context=conn.context())
        except Exception as exc:
            raise conn.failure(exc, "ListTasks") from None
        for task in page.tasks:
            rows.append(
                {
                    "id": task.id,
                    "context_id": task.context_id,
                    "state": state_name(task.status.state),
                    "updated": MessageToDict(task.status).get("timestamp", ""),
                }
            )
        token = page.next_page_token
        if not token or not page.tasks:
            break
    if args.output == "json":
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    if not rows:
        print("no tasks", file=sys.stderr)
        return 0
    print(f"{'TASK':<38} {'CONTEXT':<38} {'STATE':<15} UPDATED")
    for row in rows:
        print(
            f"{one_line(row['id'], 60):<38} {one_line(row['context_id'], 60):<38} "
            f"{row['state']:<15} {one_line(row['updated'], 40)}"
        )
    return 0


def handle(args: argparse.Namespace) -> int:
    """List."""
    return run_client(args, lambda conn: listing(conn, args))

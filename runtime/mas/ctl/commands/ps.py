"""``mas-ctl ps``: the advertised control endpoints (stale ones are dropped)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mas.ctl.session.control import control_directory, list_endpoints

COLUMNS = ("AGENT", "PID", "ADDRESS")


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "ps", help="list serving agents with a control endpoint"
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Print one row per live endpoint (tokens are never printed)."""
    endpoints = list_endpoints()
    if args.output == "json":
        rows = [{"agent": e.agent, "pid": e.pid, "address": e.address} for e in endpoints]
        print(json.dumps(rows, indent=2))
        return 0
    if not endpoints:
        print(f"no control endpoints in {control_directory()}")
        return 0
    table = [COLUMNS, *((e.agent, str(e.pid), e.address) for e in endpoints)]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0

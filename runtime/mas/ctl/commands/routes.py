"""``mas-ctl routes``: the wiring table (from, to, local/remote, protocol, url)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from mas.ctl.documents import add_document_options, load_for_cluster, load_wired
from mas.infra.routes import Routes

COLUMNS = ("FROM", "TO", "KIND", "PROTOCOL", "URL")


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser("routes", help="print the delegation wiring")
    add_document_options(parser)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="the routes as the operator's pods see them: deployed agents at their Services",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="with --cluster: the Services' namespace (default: metadata.namespace or default)",
    )
    parser.set_defaults(handler=handle)


def as_rows(routes: Routes) -> list[tuple[str, str, str, str, str]]:
    """One row per route, in document order."""
    return [(r.source, r.target, r.kind, r.protocol, r.url or "-") for r in routes.routes]


def as_json(routes: Routes) -> dict[str, Any]:
    """The wiring as a JSON-ready mapping (header values from Secrets are never resolved)."""
    return {
        "agent_comm": {"name": routes.agent_comm.name, "source": routes.agent_comm.source},
        "routes": [
            {
                "from": r.source,
                "to": r.target,
                "kind": r.kind,
                "protocol": r.protocol,
                "url": r.url,
                "timeout": r.timeout,
            }
            for r in routes.routes
        ],
        "listeners": [
            {
                "agent": item.agent,
                "protocol": item.protocol,
                "url": item.url,
                "grpc_port": item.grpc_port,
            }
            for item in routes.listeners
        ],
        "runtimes": {k: list(v) for k, v in routes.runtimes.items()},
    }


def render_table(rows: Sequence[Sequence[str]], columns: Sequence[str] = COLUMNS) -> str:
    """A plain aligned table."""
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *rows, strict=False)]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in [columns, *rows]
    ]
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    """Print the table or the JSON document (with --cluster, the url warnings on stderr)."""
    if args.namespace is not None and not args.cluster:
        print("error: --namespace needs --cluster", file=sys.stderr)
        return 2
    wired, notes = load_for_cluster(args) if args.cluster else (load_wired(args), ())
    routes = wired.routes
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(as_json(routes), indent=2))
    else:
        print(render_table(as_rows(routes)) if routes.routes else "no delegation routes")
    return 0

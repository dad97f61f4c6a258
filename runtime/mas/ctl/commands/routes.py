"""``mas-ctl routes``: the wiring table (from, to, local/remote/tools, protocol, url).

Delegation routes come first, in document order, then one ``tools`` row per tool server an
agent may use (``spec.tools``), its tool filter after the url when it has one.
"""

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
    """One row per route, in document order, then one per tool server grant."""
    rows: list[tuple[str, str, str, str, str]] = [
        (r.source, r.target, r.kind, r.protocol, r.url or "-") for r in routes.routes
    ]
    for tool in routes.tools:
        only = f" (tools: {', '.join(tool.names)})" if tool.names is not None else ""
        rows.append((tool.source, tool.server, "tools", tool.protocol, (tool.url or "-") + only))
    return rows


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
        "tools": [
            {
                "from": t.source,
                "server": t.server,
                "protocol": t.protocol,
                "url": t.url,
                "timeout": t.timeout,
                "names": list(t.names) if t.names is not None else None,
            }
            for t in routes.tools
        ],
        "listeners": [
            {
                "agent": item.agent,
                "endpoint": item.endpoint,
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
        rows = as_rows(routes)
        print(render_table(rows) if rows else "no delegation routes and no tool servers")
    return 0

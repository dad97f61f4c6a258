"""``mas-ctl validate``: check a document, its edits and its wiring; every problem at once."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mas.ctl.documents import add_document_options, load_for_cluster, load_wired


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate", help="check an Application document (exit 1 listing every problem)"
    )
    add_document_options(parser)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="check as the operator does: an omitted or pod-local (loopback) url of a deployed "
        "agent becomes its Service's; a warning names each url the cluster does not use as "
        "written",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="with --cluster: the namespace the Services are in (default: metadata.namespace "
        "or default)",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Print a one-line summary of a valid document (and, with --cluster, its url warnings)."""
    if args.namespace is not None and not args.cluster:
        print("error: --namespace needs --cluster", file=sys.stderr)
        return 2
    wired, notes = load_for_cluster(args) if args.cluster else (load_wired(args), ())
    app, routes = wired.app, wired.routes
    remote = sum(1 for r in routes.routes if r.kind == "remote")
    print(
        f"{args.file}: Application {app.metadata.name!r} is valid: "
        f"{len(app.spec.agency.agents)} agents (entry {app.spec.agency.entry_agent()!r}), "
        f"{len(app.spec.endpoints)} endpoints, {len(routes.listeners)} deployed, "
        f"{len(routes.routes)} routes ({remote} remote), agent_comm {routes.agent_comm.name!r}"
    )
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    return 0

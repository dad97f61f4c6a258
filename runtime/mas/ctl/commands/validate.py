"""``mas-ctl validate``: check a document, its edits and its wiring; every problem at once."""

from __future__ import annotations

import argparse
from typing import Any

from mas.ctl.documents import add_document_options, load_wired


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate", help="check an Application document (exit 1 listing every problem)"
    )
    add_document_options(parser)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="check as the operator does: a deployed agent's url may be left to the Service name",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Print a one-line summary of a valid document."""
    wired = load_wired(args, require_urls=not args.cluster)
    app, routes = wired.app, wired.routes
    remote = sum(1 for r in routes.routes if r.kind == "remote")
    print(
        f"{args.file}: Application {app.metadata.name!r} is valid: "
        f"{len(app.spec.agency.agents)} agents (entry {app.spec.agency.entry_agent()!r}), "
        f"{len(app.spec.endpoints)} endpoints, {len(routes.listeners)} deployed, "
        f"{len(routes.routes)} routes ({remote} remote), agent_comm {routes.agent_comm.name!r}"
    )
    return 0

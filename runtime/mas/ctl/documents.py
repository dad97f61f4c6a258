"""The document options every mas-ctl command shares: -f, --infra-ref, --override, --bind."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from mas.infra.documents import Override, bind_overrides, load_document, parse_override
from mas.infra.incluster import UrlNote, cluster_document, through_services
from mas.infra.wiring import Wired, wire
from mas.runtime.registry import default_registry


class _EditAction(argparse.Action):
    """Keeps --override and --bind in one list, in command-line order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        edits = list(getattr(namespace, "edits", None) or [])
        edits.append((self.dest, str(values)))
        namespace.edits = edits


def add_document_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add the Application file (``required``: unless the command has another form) and the
    edits of it."""
    parser.add_argument(
        "-f", "--file", required=required, metavar="FILE", help="the Application document (YAML)"
    )
    parser.add_argument(
        "--infra-ref",
        action="append",
        default=[],
        metavar="FILE",
        help="merge an infra document (endpoints, agent_comm, defaults, runtime) over FILE",
    )
    parser.add_argument(
        "--override",
        action=_EditAction,
        metavar="infra:PATH=VALUE",
        help="set one field of the merged document, e.g. infra:spec.endpoints[w].timeout=5",
    )
    parser.add_argument(
        "--bind",
        action=_EditAction,
        metavar="NAME=a2a://HOST:PORT",
        help="shortcut for a usage: use endpoint row (never opens a listener)",
    )
    parser.set_defaults(edits=[])


def edits_from_args(args: argparse.Namespace) -> list[Override]:
    """The parsed edits in command-line order."""
    out: list[Override] = []
    for kind, text in args.edits:
        out.extend(bind_overrides(text) if kind == "bind" else [parse_override(text)])
    return out


def load_wired(args: argparse.Namespace, *, require_urls: bool = True) -> Wired:
    """The merged, validated and wired Application named by the arguments."""
    document = load_document(args.file, infra_refs=args.infra_ref, edits=edits_from_args(args))
    return wire(document, default_registry().known_plugins(), require_urls=require_urls)


def load_for_cluster(args: argparse.Namespace) -> tuple[Wired, tuple[UrlNote, ...]]:
    """The document wired as the operator wires it (``mas.infra.incluster``: Service urls in
    namespace ``args.namespace``, else ``metadata.namespace``, else ``default``), and the
    notes on each url the cluster does not use as written."""
    document = load_document(args.file, infra_refs=args.infra_ref, edits=edits_from_args(args))
    metadata = document.get("metadata")
    namespace = args.namespace or (
        metadata.get("namespace") if isinstance(metadata, dict) else None
    )
    urls = cluster_document(document, str(namespace or "default"))
    known = default_registry().known_plugins()
    wired = wire(urls.document, known, require_urls=False)
    routes = through_services(wired.routes.routes, urls.services)  # as in the pods
    return Wired(wired.app, dataclasses.replace(wired.routes, routes=routes)), urls.notes

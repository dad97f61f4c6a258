"""The a2a-sdk's optional extras in one process: loaded only when the document uses them.

The SDK probes its extras the first time its packages are imported, and keeps whatever it
finds for the life of the process: ``a2a.server.tasks`` and ``a2a.server.cluster`` load
SQLAlchemy for their database stores, ``a2a.server.request_handlers`` loads gRPC for its
``GrpcHandler``, ``a2a.client`` loads ``grpc.aio`` for its gRPC transports, and httpx (under
the client) loads its command line (``rich``, ``click``, ``pygments``) when installed. The
image installs the SQL and gRPC extras, so without this every agent pod paid for all of them.

:func:`load_sdk` imports those packages once with the probes of the extras a document does
not use made to fail (``sys.modules[name] = None``: the import system's own marker of an
absent module, which turns an import of it into ``ModuleNotFoundError``), so the SDK takes
the placeholder it has for a missing extra, exactly as in an install without that extra.
The markers are removed again afterwards: the modules themselves stay importable, and code
that needs one imports it by its own path (the SQL stores import
``a2a.server.tasks.database_task_store``, the gRPC listener
``a2a.server.request_handlers.grpc_handler``).

:func:`load_client` does the same for a client that has chosen its transport (``mas-ctl
ask`` and the other client commands, once they have read the agent's card): it imports
httpx and ``a2a.client`` with httpx's command line left out, and gRPC too unless the
transport is gRPC. :func:`load_http` imports httpx alone that way, for the card's request.

Rules:

- it acts only on the first import of the SDK's packages: call it before anything imports
  ``a2a.client`` or ``a2a.server`` (``mas-ctl serve`` calls it once it has read the
  document); once they are loaded it changes nothing, and a process that never calls it
  loads every installed extra, as before;
- :func:`load_client` likewise acts only on the first import of ``a2a.client``: it returns
  whether that client has its gRPC transports, which a process that loaded the client
  without gRPC earlier has not (a command runs in a process of its own, so only code that
  runs several clients in one process can meet that);
- after it, the SDK's package namespaces keep their placeholders for the extras left out
  (``a2a.server.tasks.DatabaseTaskStore``, ``a2a.client.optionals.Channel``, the client
  factory's gRPC transports): :func:`extras_used` must therefore count every use a document
  can make of an extra (a gRPC port or URL on a served endpoint, a remote peer the agents
  reach, which may answer over gRPC; a ``sql`` task store on a served endpoint).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only annotations: the client side does not load the Application models
    from mas.infra.wiring import Wired

# The modules whose import is the SDK's probe of an extra (a2a-sdk 1.3).
SQL_PROBES = (
    "a2a.server.tasks.database_task_store",
    "a2a.server.tasks.database_push_notification_config_store",
    "a2a.server.cluster.database_event_stream",
    "a2a.server.cluster.database_task_store",
)
GRPC_PROBES = ("grpc", "a2a.server.request_handlers.grpc_handler")
CLI_PROBES = ("httpx._main",)  # httpx's command line: never used by a server
CLIENT_PACKAGES = ("httpx", "a2a.client")  # what a client loads, in that order
# The packages that probe, in the order the SDK needs (a2a.client first:
# library_ioa.plugins.a2a's docstring).
PROBING_PACKAGES = (
    "httpx",
    "a2a.client",
    "a2a.server.tasks",
    "a2a.server.cluster",
    "a2a.server.request_handlers",
    "a2a.server.routes",
)


@dataclass(frozen=True)
class Extras:
    """Which of the SDK's optional extras a process needs."""

    grpc: bool
    sql: bool


def extras_used(wired: Wired, agents: Sequence[str]) -> Extras:
    """The extras serving ``agents`` can use: gRPC for a served gRPC port or URL, for any
    remote peer the hosted agents reach (``A2AAgentComm`` speaks gRPC to a peer whose card
    offers it; another comm plugin may use the SDK's client too) and for an in-process comm
    variant other than ``local``; SQL for a ``sql`` task store on a served endpoint."""
    routes = wired.routes
    served = [item for item in routes.listeners if item.agent in agents]
    hosted = routes.hosted_with(tuple(agents))
    # Any remote peer, whatever its comm plugin (a third-party one may use the SDK's client).
    peers = any(route.kind == "remote" for agent in hosted for route in routes.from_agent(agent))
    grpc = (
        peers
        or routes.agent_comm.name != "local"
        or any(item.grpc_port is not None or item.grpc_url is not None for item in served)
    )
    endpoints = wired.app.spec.endpoints
    sql = any(
        item.protocol == "a2a"
        and item.endpoint in endpoints
        and endpoints[item.endpoint].a2a.task_store.type == "sql"
        for item in served
    )
    return Extras(grpc=grpc, sql=sql)


def load_sdk(extras: Extras) -> None:
    """Import the SDK's probing packages with the probes of unused extras failing."""
    absent = [*CLI_PROBES]
    absent += () if extras.grpc else GRPC_PROBES
    absent += () if extras.sql else SQL_PROBES
    _import_without(absent, PROBING_PACKAGES)


def load_http() -> None:
    """Import httpx without its command line (:data:`CLI_PROBES`)."""
    _import_without(CLI_PROBES, CLIENT_PACKAGES[:1])


def load_client(*, grpc: bool) -> bool:
    """Import the SDK's client with httpx's command line left out, and gRPC unless ``grpc``;
    whether the client has its gRPC transports (see the module docstring)."""
    _import_without([*CLI_PROBES, *(() if grpc else GRPC_PROBES)], CLIENT_PACKAGES)
    factory = importlib.import_module("a2a.client.client_factory")
    return factory.GrpcTransport is not None


def _import_without(absent: Sequence[str], packages: Sequence[str]) -> None:
    """Import ``packages`` with the modules ``absent`` failing to import meanwhile."""
    marked = [name for name in absent if name not in sys.modules]
    for name in marked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        for package in packages:
            importlib.import_module(package)
    finally:
        for name in marked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]

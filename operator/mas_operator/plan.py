"""From an Application document to a plan: what the operator runs for each deployed agent.

:func:`plan_application` applies the in-cluster URL model (:mod:`mas.infra.incluster`: an
omitted or pod-local url of a deployed agent becomes its Service url, with a note for each
url mapped or unusable) *before* validating and wiring the document, routes every delegation
to a deployed agent of the Application through that agent's Service, and describes each
runtime: its ports, the agents it hosts in-process, whom it reaches and which Secret keys it
needs. It is pure: no API calls; the builders turn a plan into manifests.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from mas.infra.addresses import (
    AddressError,
    normalize_url,
    parse_advertised_url,
    parse_grpc_address,
    parse_tool_server_url,
)
from mas.infra.errors import ApplicationInvalid, Problem
from mas.infra.incluster import (
    UrlNote,
    cluster_document,
    pod_local_kind,
    service_url,
    through_services,
)
from mas.infra.model_choice import model_choice
from mas.infra.models import Application, Endpoint, SecretKeyRef, TaskStoreOptions
from mas.infra.plugins import installed_plugins
from mas.infra.routes import Route, agent_auth
from mas.infra.wiring import Wired, wire
from mas_operator.names import (
    CARD_PATH,
    DEFAULT_HTTP_PORT,
    METRICS_PORT,
    child_name,
)
from mas_operator.sqlite_files import sqlite_problems

_T = TypeVar("_T")

# The plugin names a document may use: the entry points are read once per process (reading
# them scans every installed distribution, most of a plan's time), as the packages of a
# running operator do not change.
_installed_plugins = functools.cache(installed_plugins)


@dataclass(frozen=True)
class Peer:
    """Where a runtime's outbound traffic goes: an agent of this Application or an address."""

    port: int
    agent: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class AgentPlan:
    """One deployed agent: its runtime pod, Service and policy."""

    agent: str
    name: str
    url: str
    card_url: str
    http_port: int
    grpc_port: int | None
    hosted: tuple[str, ...]
    routes: tuple[Route, ...]
    peers: tuple[Peer, ...]
    secrets: tuple[SecretKeyRef, ...]
    mcp_port: int | None = None  # an MCP door beside the agent's own endpoint
    metrics_url: str | None = None  # the runtime's /metrics through the agent's Service


@dataclass(frozen=True)
class ApiServer:
    """The API server as a pod's traffic reaches it (after the ``kubernetes`` Service's
    translation): its endpoints' addresses and ports. An agent reads its caller check's keys
    there, so its NetworkPolicy lets it out to them. The chart reads them at install
    (``mas-operator run --api-server-cidr/--api-server-port``); without addresses any address
    is allowed on these ports."""

    cidrs: tuple[str, ...] = ()
    ports: tuple[int, ...] = (443, 6443)


@dataclass(frozen=True)
class Plan:
    """Everything the builders need for one Application."""

    name: str
    namespace: str
    generation: int | None
    document: Mapping[str, Any]
    wired: Wired
    agents: tuple[AgentPlan, ...] = field(default=())
    services: Mapping[str, str] = field(default_factory=dict)  # deployed agent -> Service url
    notes: tuple[UrlNote, ...] = ()  # urls the cluster cannot use as written
    console: str | None = None  # the install's console subject, admitted by every agent
    api_server: ApiServer = field(default_factory=ApiServer)  # where agents read keys
    uid: str | None = None  # the Application's, when read from the API server
    denial_events: bool = True  # False: the install turned the agents' denial Events off

    @property
    def app(self) -> Application:
        """The validated model (with default urls filled in)."""
        return self.wired.app

    def agent(self, agent: str) -> AgentPlan:
        """The plan of one deployed agent."""
        return next(a for a in self.agents if a.agent == agent)


def default_url(application: str, agent: str, namespace: str, port: int = DEFAULT_HTTP_PORT) -> str:
    """The in-cluster advertised url of a deployed agent whose endpoint has no url."""
    return service_url(application, agent, namespace, port)


def _url_peer(url: str) -> Peer | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    default = 443 if parts.scheme == "https" else 80
    return Peer(port if port is not None else default, host=parts.hostname)


def _model_peer(params: Mapping[str, Any], model_type: str) -> Peer | None:
    for key in ("base_url", "url", "endpoint"):
        url = params.get(key)
        if isinstance(url, str):
            return _url_peer(url)
    if model_type in {"openai", "anthropic"}:  # their public APIs, over HTTPS
        return Peer(443)
    return None


POSTGRES_PORT = 5432  # a PostgreSQL URL without a port, or one the operator cannot read


def _store_peer(store: TaskStoreOptions) -> Peer | None:
    """Where a ``sql`` task store's database is: its URL's host and port, when not a file.

    A URL from a Secret is not read by the operator (it holds the password): its host is
    unknown, so PostgreSQL's port to any address is allowed. SQLite is a file in the pod.
    """
    if store.type != "sql":
        return None
    if store.url is None:
        return Peer(POSTGRES_PORT) if store.url_secret_key_ref is not None else None
    parts = urlsplit(store.url)
    if not parts.scheme.startswith("postgresql"):
        return None
    try:
        port = parts.port
    except ValueError:
        return None  # validation has refused the document before a plan is made
    if parts.hostname is None or pod_local_kind(parts.hostname) is not None:
        return None  # a socket or an address of the pod itself: no policy applies
        return None
    return Peer(port if port is not None else POSTGRES_PORT, host=parts.hostname)


def grpc_listener_port(endpoint: Endpoint) -> int | None:
    """The port the runtime's gRPC listener binds: ``a2a.grpc_url``'s, else ``grpc_port``."""
    if endpoint.a2a.grpc_url is not None:
        try:
            return parse_grpc_address(endpoint.a2a.grpc_url).port
        except AddressError:
            return None  # validation has refused the document before a plan is made
    return endpoint.a2a.grpc_port


def _unique(items: list[_T]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


def _agent_plan(
    app: Application, wired: Wired, agent: str, namespace: str, services: Mapping[str, str]
) -> AgentPlan:
    spec = app.spec
    doors = [item for item in wired.routes.listeners if item.agent == agent]
    endpoint = spec.endpoints[doors[0].endpoint]  # its own endpoint first, in document order
    mcp_door = next((d for d in doors[1:] if d.protocol == "mcp" and d.url), None)
    url = normalize_url(endpoint.url or default_url(app.metadata.name, agent, namespace))
    http_port = parse_advertised_url(url).port
    hosted = wired.routes.runtimes[agent]
    routes = through_services(
        (r for source in hosted for r in wired.routes.from_agent(source)), services
    )
    peers: list[Peer] = []
    secrets: list[SecretKeyRef] = []
    for route in routes:
        if route.kind != "remote":
            continue
        target = spec.endpoints[route.target]
        if target.deployed and route.target in spec.agency.agents:
            peer_url = target.url or default_url(app.metadata.name, route.target, namespace)
            port = parse_advertised_url(peer_url).port
            peers.append(Peer(port, agent=route.target))
            grpc_port = grpc_listener_port(target)
            if grpc_port is not None:
                peers.append(Peer(grpc_port, agent=route.target))
        elif route.url is not None:
            address = parse_advertised_url(route.url)
            if pod_local_kind(address.host) is None:  # the pod itself: no policy applies
                peers.append(Peer(address.port, host=address.host))
        secrets += [h.secret_key_ref for h in route.headers.values() if h.secret_key_ref]
    for source in hosted:
        for tool in wired.routes.tools_of(source):  # MCP tool servers: egress and headers
            if tool.url is not None:
                address = parse_tool_server_url(tool.url)
                if pod_local_kind(address.host) is None:  # the pod itself: no policy applies
                    peers.append(Peer(address.port, host=address.host))
            secrets += [h.secret_key_ref for h in tool.headers.values() if h.secret_key_ref]
        choice = model_choice(spec, source)
        if choice.key is not None:  # a named model's API key
            secrets.append(choice.key)
        peer = _model_peer(choice.params, choice.plugin)
        if peer is not None:
            peers.append(peer)
    auth = agent_auth(spec.endpoints, agent)  # inbound credentials, whichever door declares them
    if auth is not None:  # read by the runtime at start, enforced on every door
        secrets += [s.secret_key_ref for s in auth.schemes if s.secret_key_ref]
        for scheme in auth.schemes:  # an OIDC issuer's discovery document and JWKS
            issuer = _url_peer(scheme.oidc.issuer) if scheme.oidc is not None else None
            if issuer is not None:
                peers.append(issuer)
    store = endpoint.a2a.task_store  # the task store's URL and push key, when from Secrets
    secrets += [r for r in (store.url_secret_key_ref, store.push_config_key_secret_key_ref) if r]
    store_peer = _store_peer(store)
    if store_peer is not None:
        peers.append(store_peer)
    unique_secrets = {(ref.name, ref.key): ref for ref in secrets}
    return AgentPlan(
        agent=agent,
        name=child_name(app.metadata.name, agent),
        url=url,
        card_url=url + CARD_PATH,
        http_port=http_port,
        grpc_port=grpc_listener_port(endpoint),
        hosted=hosted,
        routes=routes,
        peers=_unique(peers),
        secrets=tuple(unique_secrets.values()),
        mcp_port=parse_advertised_url(mcp_door.url).port if mcp_door and mcp_door.url else None,
        metrics_url=service_url(app.metadata.name, agent, namespace, METRICS_PORT) + "/metrics",
    )


def _port_problems(app: Application) -> list[Problem]:
    problems = []
    for agent, endpoint in app.spec.endpoints.items():
        if not endpoint.deployed:
            continue
        where = f"spec.endpoints.{agent}"
        if endpoint.url is not None and parse_advertised_url(endpoint.url).port == METRICS_PORT:
            problems.append(
                Problem(
                    f"{where}.url",
                    f"port {METRICS_PORT} is the runtime's metrics port; "
                    "choose another port for the A2A listener",
                )
            )
        if grpc_listener_port(endpoint) == METRICS_PORT:
            field_name = "grpc_url" if endpoint.a2a.grpc_url is not None else "grpc_port"
            problems.append(
                Problem(
                    f"{where}.a2a.{field_name}",
                    f"{METRICS_PORT} is the runtime's metrics port; choose another port for gRPC",
                )
            )
    return problems


def plan_application(
    document: Mapping[str, Any],
    namespace: str | None = None,
    console: str | None = None,
    api_server: ApiServer | None = None,
    *,
    denial_events: bool = True,
) -> Plan:
    """Validate and wire ``document`` as the operator does; describe each deployed agent.
    ``console``: the ServiceAccount subject of the install's console, which every agent is
    to admit (``mas-operator run --console-principal``), or None. ``api_server``: where the
    agents' pods reach the API server (:class:`ApiServer`). ``denial_events`` False: the
    install turned the agents' denial Events off (``mas-operator run --no-denial-events``).

    Raises :class:`~mas.infra.errors.WiringError` when delegation targets are missing and
    :class:`~mas.infra.errors.ApplicationInvalid` for any other problem (all listed).
    """
    metadata = document.get("metadata") or {}
    ns = namespace or metadata.get("namespace") or "default"
    urls = cluster_document(document, ns)
    filled = urls.document
    wired = wire(filled, _installed_plugins(), require_urls=False)
    problems = _port_problems(wired.app) + sqlite_problems(wired.app)
    if problems:
        raise ApplicationInvalid(problems)
    served = dict.fromkeys(listener.agent for listener in wired.routes.listeners)
    agents = tuple(_agent_plan(wired.app, wired, agent, ns, urls.services) for agent in served)
    kept = {"apiVersion": filled.get("apiVersion"), "kind": filled.get("kind")}
    kept["metadata"] = {"name": wired.app.metadata.name, "namespace": ns}
    kept["spec"] = filled.get("spec")
    generation = metadata.get("generation")
    uid = metadata.get("uid")
    return Plan(
        name=wired.app.metadata.name,
        namespace=ns,
        generation=generation if isinstance(generation, int) else None,
        document=kept,
        wired=wired,
        agents=agents,
        services=urls.services,
        notes=urls.notes,
        console=console,
        api_server=api_server or ApiServer(),
        uid=uid if isinstance(uid, str) and uid else None,
        denial_events=denial_events,
    )

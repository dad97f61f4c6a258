"""What a source says of an Application: nodes, edges, conditions and Events. Plain data.

Both sources fill the same :class:`ApplicationView`; the pages never ask where it came from.
:func:`structure` derives the nodes (and, for a laptop, the edges) from a wired document,
so the two sources draw one document alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from mas.infra.models import Application
from mas.infra.routes import Routes

READY = "Ready"
PENDING = "Pending"
UNREACHABLE = "Unreachable"
UNKNOWN = "Unknown"
EDGE_STATES = (READY, PENDING, UNREACHABLE, UNKNOWN)
IN_PROCESS = "in-process"


@dataclass
class AgentNode:
    """An agent of the agency: ``deployed`` has a runtime (and a url) of its own; the others
    run in-process in the runtimes of ``hosts``."""

    id: str
    name: str
    description: str = ""
    entry: bool = False
    deployed: bool = False
    url: str | None = None
    metrics_url: str | None = None  # its runtime's /metrics (mas.console.badges)
    hosts: tuple[str, ...] = ()
    replicas: int | None = None
    ready_replicas: int | None = None
    reachable: bool | None = None  # laptop: its card answered
    conformant: str | None = None  # "True" / "False" / None (not checked)
    conformance_message: str = ""


@dataclass
class ExternalNode:
    """An endpoint the agency only uses: an external A2A agent or an MCP tool server."""

    id: str
    protocol: str
    url: str | None = None

    @property
    def kind(self) -> str:
        return "tool server" if self.protocol == "mcp" else "external agent"


@dataclass
class EdgeView:
    """One edge, ``source`` reaches ``target`` ``via`` a transport, and its state."""

    source: str
    target: str
    via: str
    state: str = UNKNOWN
    reason: str = ""
    message: str = ""
    url: str | None = None

    @property
    def key(self) -> str:
        return f"{self.source}|{self.target}|{self.via}"


@dataclass
class ConditionView:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass
class EventView:
    type: str  # Normal / Warning
    reason: str
    message: str
    time: str = ""
    count: int = 1


@dataclass
class ApplicationView:
    """One Application as the console shows it."""

    name: str
    namespace: str
    ready: str = "Unknown"  # the Ready condition's status
    phase: str = ""
    entry: str | None = None
    agents: list[AgentNode] = field(default_factory=list)
    externals: list[ExternalNode] = field(default_factory=list)
    edges: list[EdgeView] = field(default_factory=list)
    conditions: list[ConditionView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why parts of it cannot be shown
    version: int = 0  # bumped by the source on every change

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def deployed(self) -> list[AgentNode]:
        return [a for a in self.agents if a.deployed]

    def agent(self, agent_id: str) -> AgentNode | None:
        return next((a for a in self.agents if a.id == agent_id), None)

    @property
    def agents_ready(self) -> str:
        deployed = self.deployed
        ready = sum(1 for a in deployed if _agent_ready(a))
        return f"{ready}/{len(deployed)}"

    @property
    def edges_ready(self) -> str:
        ready = sum(1 for e in self.edges if e.state == READY)
        return f"{ready}/{len(self.edges)}"

    @property
    def conformant(self) -> str:
        found = next((c for c in self.conditions if c.type == "Conformant"), None)
        return found.status if found is not None else ""

    def summary(self) -> dict[str, str]:
        """A row of the Applications list (what the list page's live updates carry)."""
        return {
            "key": self.key,
            "name": self.name,
            "namespace": self.namespace,
            "ready": self.ready,
            "phase": self.phase,
            "agents": self.agents_ready,
            "edges": self.edges_ready,
            "conformant": self.conformant,
        }


def _agent_ready(agent: AgentNode) -> bool:
    if agent.ready_replicas is not None:
        return agent.ready_replicas > 0
    return bool(agent.reachable)


def structure(app: Application, routes: Routes) -> tuple[list[AgentNode], list[ExternalNode]]:
    """The nodes of a wired document: its agents (entry marked, deployed or hosted where),
    then the endpoints it only uses (external agents, tool servers) that an edge reaches."""
    endpoints = app.spec.endpoints
    deployed: dict[str, str | None] = {}
    for key, endpoint in endpoints.items():
        if endpoint.deployed and endpoint.protocol == "a2a":
            agent = endpoint.served_agent(key)
            deployed.setdefault(agent, endpoint.url)
        elif endpoint.deployed:
            deployed.setdefault(endpoint.served_agent(key), None)
    hosts: dict[str, list[str]] = {}
    for root, hosted in routes.runtimes.items():
        for agent in hosted:
            if agent != root:
                hosts.setdefault(agent, []).append(root)
    agents = []
    for agent_id, manifest in app.spec.agency.agents.items():
        agents.append(
            AgentNode(
                id=agent_id,
                name=manifest.metadata.name or agent_id,
                description=manifest.spec.description or manifest.metadata.description or "",
                entry=agent_id == app.spec.agency.entry,
                deployed=agent_id in deployed,
                url=deployed.get(agent_id),
                metrics_url=metrics_url_of(deployed.get(agent_id)),
                hosts=tuple(hosts.get(agent_id, ())),
            )
        )
    local = set(app.spec.agency.agents)
    externals = []
    targets = [r.target for r in routes.routes if r.kind == "remote"]
    targets += [t.server for t in routes.tools]
    for key, endpoint in endpoints.items():
        if key in local or key not in targets or endpoint.deployed:
            continue
        externals.append(ExternalNode(key, endpoint.protocol, endpoint.url))
    return agents, externals


def metrics_url_of(url: str | None) -> str | None:
    """Where ``mas-ctl serve`` answers ``/metrics`` for an agent at ``url``: the root of its
    A2A listener (without ``--metrics-port``)."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def planned_edges(app: Application, routes: Routes) -> list[EdgeView]:
    """Every edge of a wired document, in agency order, state Unknown: delegations
    (``in-process`` or the endpoint's protocol, ``grpc`` where the target serves gRPC), then
    tool-server grants."""
    edges = []
    for route in routes.routes:
        if route.kind == "local":
            edges.append(EdgeView(route.source, route.target, IN_PROCESS))
            continue
        endpoint = app.spec.endpoints.get(route.target)
        grpc = endpoint is not None and endpoint.deployed and bool(endpoint.a2a.grpc_port)
        via = "grpc" if grpc and route.protocol == "a2a" else route.protocol
        edges.append(EdgeView(route.source, route.target, via, url=route.url))
    for tool in routes.tools:
        edges.append(EdgeView(tool.source, tool.server, tool.protocol, url=tool.url))
    return edges

"""The route builder: resolve every ``delegates_to`` target, and say what is hosted where.

Resolution order for a target ``T`` of agent ``A`` (the spec's "Registry and routing"):

1. an endpoint ``T`` with usage ``use`` or ``use-and-deploy`` gives a *remote* route through
   the implementation its ``protocol`` selects, with the endpoint's url, headers and timeout
   (this is also how an overlay deliberately routes a local agent remotely);
2. otherwise a local agent ``T`` gives an *in-process* route through the MAS-wide comm
   variant (``spec.agent_comm``, then ``spec.defaults.agent_comm``, then the library default);
3. otherwise wiring fails: :class:`~mas.infra.errors.WiringError` lists every missing target
   and who delegates to it.

Tools: each ``spec.tools`` grant of an agent gives a :class:`ToolRoute` to that tool server
endpoint (its protocol selects the ``tool_source`` plugin; url, headers and timeout as for a
remote route). Validation has already refused a grant naming no tool server; such a grant
gives no route here.

Hosting: an agent with a deployed endpoint gets a runtime of its own; the agents it reaches
through in-process routes (private workers, transitively) run inside that runtime. One agent
may have several deployed endpoints (doors), one per protocol: an endpoint with ``agent:``
serves that agent under a key of its own.

Auth: an agent has one inbound auth, the ``a2a.auth`` of its deployed doors
(:func:`agent_auth`); every door of the agent enforces it, whichever row declares it.
Validation refuses doors of one agent that declare different ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mas.infra.errors import MissingTarget, WiringError
from mas.infra.models import A2AAuth, Application, Endpoint, HeaderValue

LIBRARY_DEFAULT_AGENT_COMM = "local"

RouteKind = Literal["local", "remote"]


def doors_of(endpoints: Mapping[str, Endpoint], agent: str) -> list[tuple[str, Endpoint]]:
    """The deployed endpoints (doors) serving ``agent``, keyed, in document order."""
    return [(k, e) for k, e in endpoints.items() if e.deployed and e.served_agent(k) == agent]


def agent_auth(endpoints: Mapping[str, Endpoint], agent: str) -> A2AAuth | None:
    """The inbound auth every door of ``agent`` enforces: the first ``a2a.auth`` its doors
    declare (validation has refused doors that declare different ones), else ``None``."""
    return next((e.a2a.auth for _, e in doors_of(endpoints, agent) if e.a2a.auth), None)


@dataclass(frozen=True)
class CommChoice:
    """The in-process comm variant and where it came from."""

    name: str
    params: Mapping[str, Any]
    source: Literal["spec.agent_comm", "spec.defaults.agent_comm", "library default"]


@dataclass(frozen=True)
class Route:
    """How ``source`` reaches ``target`` when it delegates."""

    source: str
    target: str
    kind: RouteKind
    protocol: str
    url: str | None = None
    headers: Mapping[str, HeaderValue] = field(default_factory=dict)
    timeout: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolRoute:
    """A tool server ``source`` may use, and which of its tools (``None``: all)."""

    source: str
    server: str
    protocol: str
    url: str | None
    headers: Mapping[str, HeaderValue] = field(default_factory=dict)
    timeout: float | None = None
    names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Listener:
    """A deployed endpoint: the process hosting ``agent`` binds it."""

    agent: str
    protocol: str
    url: str | None
    grpc_port: int | None
    grpc_url: str | None
    endpoint: str = ""  # the endpoint's key: the agent id, or a door's own name


@dataclass(frozen=True)
class Routes:
    """The wiring of a whole Application."""

    routes: tuple[Route, ...]
    listeners: tuple[Listener, ...]
    runtimes: Mapping[str, tuple[str, ...]]
    agent_comm: CommChoice
    tools: tuple[ToolRoute, ...] = ()

    def from_agent(self, source: str) -> tuple[Route, ...]:
        """The routes of one delegating agent, in ``delegates_to`` order."""
        return tuple(r for r in self.routes if r.source == source)

    def tools_of(self, source: str) -> tuple[ToolRoute, ...]:
        """The tool servers of one agent, in ``spec.tools`` order."""
        return tuple(t for t in self.tools if t.source == source)

    def listener(self, agent: str, protocol: str | None = None) -> Listener | None:
        """The (first) deployed endpoint of ``agent``, of ``protocol`` when given."""
        return next(
            (
                item
                for item in self.listeners
                if item.agent == agent and (protocol is None or item.protocol == protocol)
            ),
            None,
        )

    def hosted_with(self, roots: tuple[str, ...]) -> tuple[str, ...]:
        """``roots`` and every agent they reach through in-process routes, transitively."""
        seen: list[str] = []
        stack = list(reversed(roots))
        while stack:
            agent = stack.pop()
            if agent in seen:
                continue
            seen.append(agent)
            stack.extend(r.target for r in reversed(self.from_agent(agent)) if r.kind == "local")
        return tuple(seen)


def choose_agent_comm(app: Application) -> CommChoice:
    """The MAS-wide in-process comm variant (not chosen by delegation, not hardcoded by ctl)."""
    spec = app.spec
    if spec.agent_comm is not None and spec.agent_comm.name is not None:
        return CommChoice(spec.agent_comm.name, spec.agent_comm.params, "spec.agent_comm")
    default = spec.defaults.agent_comm
    if default is not None and default.name is not None:
        return CommChoice(default.name, default.params, "spec.defaults.agent_comm")
    return CommChoice(LIBRARY_DEFAULT_AGENT_COMM, {}, "library default")


def build_routes(app: Application) -> Routes:
    """Resolve every ``delegates_to`` target of every local agent; raise on any missing one."""
    spec = app.spec
    comm = choose_agent_comm(app)
    routes: list[Route] = []
    missing: list[MissingTarget] = []
    for source, manifest in spec.agency.agents.items():
        for index, target in enumerate(manifest.spec.delegates_to):
            endpoint = spec.endpoints.get(target)
            if endpoint is not None and endpoint.used:
                routes.append(
                    Route(
                        source,
                        target,
                        "remote",
                        endpoint.protocol,
                        endpoint.url,
                        endpoint.headers,
                        endpoint.timeout,
                    )
                )
            elif target in spec.agency.agents:
                routes.append(Route(source, target, "local", comm.name, params=comm.params))
            else:
                hint = ""
                if endpoint is not None:
                    usage = endpoint.effective_usage
                    hint = f"endpoint {target!r} has usage: {usage}, which is not a route"
                missing.append(MissingTarget(source, target, index, hint))
    if missing:
        raise WiringError(missing)
    listeners = tuple(
        Listener(ep.served_agent(key), ep.protocol, ep.url, ep.a2a.grpc_port, ep.a2a.grpc_url, key)
        for key, ep in spec.endpoints.items()
        if ep.deployed and ep.served_agent(key) in spec.agency.agents
    )
    tools = tuple(_tool_routes(app))
    partial = Routes(tuple(routes), listeners, {}, comm, tools)
    runtimes = {item.agent: partial.hosted_with((item.agent,)) for item in listeners}
    return Routes(tuple(routes), listeners, runtimes, comm, tools)


def _tool_routes(app: Application) -> list[ToolRoute]:
    out: list[ToolRoute] = []
    for source, manifest in app.spec.agency.agents.items():
        for grant in manifest.spec.tools:
            endpoint = app.spec.endpoints.get(grant.server)
            if endpoint is None or not endpoint.used:
                continue
            names = tuple(grant.names) if grant.names is not None else None
            out.append(
                ToolRoute(
                    source,
                    grant.server,
                    endpoint.protocol,
                    endpoint.url,
                    endpoint.headers,
                    endpoint.timeout,
                    names,
                )
            )
    return out

"""The exposure helper shared by ``mas-ctl serve``, ``chat``, ``tui`` and ``run-mas``.

Given a wired Application and the :class:`~mas.ctl.session.host.RuntimeHost` of this
process, :func:`bind_listeners` binds the listeners of the hosted agents whose endpoint is
deployed (``usage: deploy`` or ``use-and-deploy``); ``usage: use`` rows are client routes
only and never open a listener. Listen URLs come from the Application endpoints; the bind
host may differ (``0.0.0.0`` in a pod). The ingress adapter is chosen through the registry
(category ``agent_expose``, by the endpoint's ``protocol``: ``a2a``, or ``mcp`` for an MCP
door). One agent may have several doors, one per protocol (:func:`bind_listeners`), and
every door enforces the agent's one inbound auth (:func:`mas.infra.routes.agent_auth`),
whichever of its rows declares it.

Only ``mas-ctl serve`` passes ``grpc=True``: it is the only path that starts the gRPC
listener. Without it, the adapter gets the endpoint without ``a2a.grpc_port``/``grpc_url``,
so the AgentCard advertises only the interfaces this process serves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from mas.ctl.session.host import RuntimeHost
from mas.infra.models import A2AAuth, Endpoint
from mas.infra.routes import agent_auth
from mas.infra.wiring import Wired
from mas.runtime.errors import RuntimeFailure
from mas.runtime.registry import Registry, default_registry

logger = logging.getLogger(__name__)

EXPOSE_CATEGORY = "agent_expose"


class ExposureError(RuntimeFailure):
    """A listener cannot be planned or bound; the message names the agent and the address."""


class Exposure(Protocol):
    """What the helper needs of an ingress adapter (``A2AExposure`` is one)."""

    url: str

    @property
    def port(self) -> int: ...

    @property
    def grpc_address(self) -> str | None: ...

    async def start(self) -> None: ...

    def stop_accepting(self) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Bound:
    """One bound listener."""

    agent: str
    protocol: str
    exposure: Exposure


class Listeners:
    """The bound listeners of this process; close them with :meth:`aclose`."""

    def __init__(self, bound: Sequence[Bound]) -> None:
        self.bound = tuple(bound)

    def get(self, agent: str) -> Bound:
        """The (first) listener of ``agent``."""
        for item in self.bound:
            if item.agent == agent:
                return item
        raise ExposureError(f"agent {agent!r} has no listener in this process")

    def of(self, agent: str) -> tuple[Bound, ...]:
        """Every listener (door) of ``agent``, in document order."""
        return tuple(item for item in self.bound if item.agent == agent)

    def stop_accepting(self) -> None:
        """Readiness false, no new connections; in-flight requests go on."""
        for item in self.bound:
            item.exposure.stop_accepting()

    async def aclose(self) -> None:
        """Close every listener (in-flight requests get their drain timeout)."""
        for item in reversed(self.bound):
            await item.exposure.aclose()


def without_grpc(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` without its gRPC address: the card advertises only what is served."""
    if endpoint.a2a.grpc_port is None and endpoint.a2a.grpc_url is None:
        return endpoint
    a2a = endpoint.a2a.model_copy(update={"grpc_port": None, "grpc_url": None})
    return endpoint.model_copy(update={"a2a": a2a})


def with_agent_auth(endpoint: Endpoint, auth: A2AAuth | None) -> Endpoint:
    """``endpoint`` enforcing its agent's auth, whichever door declares it."""
    if auth is None or endpoint.a2a.auth == auth:
        return endpoint
    return endpoint.model_copy(update={"a2a": endpoint.a2a.model_copy(update={"auth": auth})})


def deployed_agents(wired: Wired, host: RuntimeHost) -> list[str]:
    """The hosted agents with a deployed endpoint (a door), in hosting order."""
    served = {item.agent for item in wired.routes.listeners}
    return [a for a in host.agents if a in served]


async def bind_listeners(
    wired: Wired,
    host: RuntimeHost,
    *,
    agents: Sequence[str] | None = None,
    bind_host: str | None = None,
    grpc: bool = False,
    metrics_registries: Sequence[CollectorRegistry] | None = None,
    drain_timeout: float = 10.0,
    registry: Registry | None = None,
    **options: Any,
) -> Listeners:
    """Bind every door of ``agents`` (default: every hosted deployed agent).

    An agent's doors are its deployed endpoints: the one keyed by its id and those naming it
    in ``agent`` (e.g. an MCP door beside the A2A one), in document order. On any failure
    the listeners already bound are closed again and :class:`ExposureError` names the
    agent and the reason.
    """
    registry = registry or default_registry()
    chosen = list(agents) if agents is not None else deployed_agents(wired, host)
    endpoints = wired.app.spec.endpoints
    bound: list[Bound] = []
    try:
        for agent in chosen:
            doors = [item.endpoint for item in wired.routes.listeners if item.agent == agent]
            if not doors:
                endpoint = endpoints.get(agent)
                usage = endpoint.effective_usage if endpoint is not None else "(no endpoint)"
                raise ExposureError(
                    f"spec.endpoints.{agent}.usage: is {usage}; a listener needs usage deploy "
                    "or use-and-deploy"
                )
            for key in doors:
                bound.append(
                    await _bind_door(
                        registry,
                        agent,
                        key,
                        with_agent_auth(endpoints[key], agent_auth(endpoints, agent)),
                        host,
                        bind_host=bind_host,
                        grpc=grpc,
                        metrics_registries=metrics_registries,
                        drain_timeout=drain_timeout,
                        **options,
                    )
                )
    except BaseException:
        await Listeners(bound).aclose()
        raise
    return Listeners(bound)


async def _bind_door(
    registry: Registry,
    agent: str,
    key: str,
    endpoint: Endpoint,
    host: RuntimeHost,
    *,
    grpc: bool,
    **options: Any,
) -> Bound:
    if endpoint.protocol not in registry.names(EXPOSE_CATEGORY):
        known = ", ".join(registry.names(EXPOSE_CATEGORY)) or "(none)"
        raise ExposureError(
            f"spec.endpoints.{key}.protocol: {endpoint.protocol!r} has no "
            f"{EXPOSE_CATEGORY} plugin; known: {known}"
        )
    try:  # an OSError (a taken port, an unreachable task store) is one line
        exposure: Exposure = registry.create(
            EXPOSE_CATEGORY,
            endpoint.protocol,
            {},
            agent_id=agent,
            manifest=host.manifest(agent),
            endpoint=endpoint if grpc else without_grpc(endpoint),
            mailbox=host.mailbox(agent),
            grpc=grpc,
            **options,
        )
        await exposure.start()
    except OSError as exc:
        raise ExposureError(f"agent {agent!r}: {exc}") from None
    return Bound(agent, endpoint.protocol, exposure)

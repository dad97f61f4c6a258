"""``RuntimeHost``: everything one runtime process hosts, built from a wired Application.

The hosted agents are the roots and every agent they reach through in-process routes
(:meth:`Routes.hosted_with`). For each: its model plugin (``registry.create('model', ...)``),
an :class:`~mas.runtime.agent.Agent`, a :class:`SessionTurnMailbox` attached to the
process's :class:`LocalBus`, and a :class:`DelegationContract` whose routes are

- local: the MAS-wide comm variant, ``registry.create('agent_comm', route.protocol,
  route.params, bus=bus)``;
- remote: ``registry.create('agent_comm', route.protocol, {'url', 'headers', 'timeout'})``
  with each header's ``secret_key_ref`` read from ``env[secret_env_name(ref)]``;

and, when it has ``spec.tools``, a :class:`Toolbox` of one
``registry.create('tool_source', protocol, {'url', 'headers', 'timeout'}, server=<id>)``
per tool server (headers resolved the same way).

A remote route or tool server that this Application deploys
(:func:`mas.infra.identity.carries_identity`) also gets ``identity``: the process's one
:class:`~mas.runtime.identity.token_file.TokenFile` (the projected token at
``$MAS_A2A_TOKEN_FILE``, default :data:`mas.infra.identity.TOKEN_PATH`), whose token goes
with every call; an endpoint only used never gets it.

A missing secret variable is a :class:`HostError` naming the header, the Secret and the
variable (never a value). A plugin that refuses its parameters is a ``PluginConfigError``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.identity import TOKEN_FILE_ENV, TOKEN_PATH, carries_identity
from mas.infra.model_choice import ModelChoice, model_choice
from mas.infra.models import AgentManifest, HeaderValue
from mas.infra.routes import Route, ToolRoute
from mas.infra.secrets import secret_env_name
from mas.infra.wiring import Wired
from mas.runtime.agent import Agent
from mas.runtime.boundary.agentcomm import AgentCommContract
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.boundary.tools import ToolSourceContract
from mas.runtime.comm.local import LocalBus
from mas.runtime.errors import HostError
from mas.runtime.identity.token_file import TokenFile
from mas.runtime.models.base import ModelPlugin
from mas.runtime.registry import Registry, default_registry
from mas.runtime.toolbox import Toolbox
from mas.runtime.turns import TurnRunner

logger = logging.getLogger(__name__)


@dataclass
class _Hosted:
    manifest: AgentManifest
    agent: Agent
    mailbox: SessionTurnMailbox


def resolve_headers(route: Route | ToolRoute, env: Mapping[str, str]) -> dict[str, str]:
    """The route's headers with literal values and Secret-backed values read from ``env``."""
    endpoint = route.server if isinstance(route, ToolRoute) else route.target
    out: dict[str, str] = {}
    for name, header in route.headers.items():
        out[name] = _header_value(endpoint, name, header, env)
    return out


def _header_value(endpoint: str, name: str, header: HeaderValue, env: Mapping[str, str]) -> str:
    if header.secret_key_ref is None:
        return header.value or ""
    ref = header.secret_key_ref
    variable = secret_env_name(ref)
    value = env.get(variable)
    if value is None:
        raise HostError(
            f"spec.endpoints.{endpoint}.headers.{name}: reads Secret {ref.name!r} key "
            f"{ref.key!r} from the environment variable {variable}, which is not set (the "
            "operator sets it in the pod; locally, export it)"
        )
    return value


def _check_model_key(choice: ModelChoice, env: Mapping[str, str]) -> None:
    """A named model's key must be in the environment before its plugin is built."""
    if choice.key is None:
        return
    variable = secret_env_name(choice.key)
    if not env.get(variable):
        raise HostError(
            f"spec.models.{choice.ref}.key: reads Secret {choice.key.name!r} key "
            f"{choice.key.key!r} from the environment variable {variable}, which is not set "
            "(the operator sets it in the pod; locally, export it)"
        )


class RuntimeHost:
    """The hosted agents of one process, their mailboxes and their routes."""

    def __init__(
        self,
        wired: Wired,
        hosted: Mapping[str, _Hosted],
        bus: LocalBus,
        comms: Sequence[AgentCommContract],
        models: Sequence[ModelPlugin],
        *,
        toolboxes: Sequence[Toolbox] = (),
    ) -> None:
        self.wired = wired
        self.bus = bus
        self._hosted = dict(hosted)
        self._comms = tuple(comms)
        self._models = tuple(models)
        self._toolboxes = tuple(toolboxes)

    @classmethod
    def build(
        cls,
        wired: Wired,
        roots: Sequence[str],
        *,
        registry: Registry | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> RuntimeHost:
        """Build the agents that ``roots`` need; use the host on one event loop."""
        registry = registry or default_registry()
        agents_doc = wired.app.spec.agency.agents
        unknown = [r for r in roots if r not in agents_doc]
        if unknown or not roots:
            raise HostError(
                f"cannot host {unknown or list(roots)!r}: not agents of the agency; "
                f"agents: {', '.join(agents_doc)}"
            )
        bus = LocalBus()
        hosted: dict[str, _Hosted] = {}
        comms: list[AgentCommContract] = []
        models: list[ModelPlugin] = []
        toolboxes: list[Toolbox] = []
        identity = TokenFile(env.get(TOKEN_FILE_ENV) or TOKEN_PATH)
        for agent_id in wired.routes.hosted_with(tuple(roots)):
            manifest = agents_doc[agent_id]
            choice = model_choice(wired.app.spec, agent_id)
            _check_model_key(choice, env)
            model: ModelPlugin = registry.create(
                "model", choice.plugin, choice.params, agent_id=agent_id, env=env
            )
            models.append(model)
            routes: dict[str, AgentCommContract] = {}
            for route in wired.routes.from_agent(agent_id):
                comm = cls._comm(registry, wired, route, bus, env, identity=identity)
                comms.append(comm)
                routes[route.target] = comm
            descriptions = {t: _describe(agents_doc[t]) for t in routes if t in agents_doc}
            delegation = DelegationContract(agent_id, routes, descriptions=descriptions)
            toolbox = cls._toolbox(registry, wired, agent_id, env, delegation, identity=identity)
            if toolbox is not None:
                toolboxes.append(toolbox)
            agent = Agent(agent_id, manifest, model, delegation, toolbox=toolbox, choice=choice)
            mailbox = SessionTurnMailbox(agent)
            bus.attach(agent_id, mailbox)
            hosted[agent_id] = _Hosted(manifest, agent, mailbox)
        logger.info("hosting %s", ", ".join(hosted))
        return cls(wired, hosted, bus, comms, models, toolboxes=toolboxes)

    @staticmethod
    def _toolbox(
        registry: Registry,
        wired: Wired,
        agent_id: str,
        env: Mapping[str, str],
        delegation: DelegationContract,
        *,
        identity: TokenFile,
    ) -> Toolbox | None:
        grants = wired.routes.tools_of(agent_id)
        if not grants:
            return None
        sources: list[tuple[ToolSourceContract, tuple[str, ...] | None]] = []
        for grant in grants:
            params: dict[str, Any] = {
                "url": grant.url,
                "headers": resolve_headers(grant, env),
                "timeout": grant.timeout,
            }
            if carries_identity(wired.app, grant.server):
                params["identity"] = identity.current
            source = registry.create("tool_source", grant.protocol, params, server=grant.server)
            if not isinstance(source, ToolSourceContract):
                raise HostError(
                    f"tool_source plugin {grant.protocol!r} built a {type(source).__name__}, "
                    "which is not a ToolSourceContract"
                )
            sources.append((source, grant.names))
        reserved = [tool.name for tool in delegation.tools()]
        return Toolbox(agent_id, sources, reserved=reserved)

    @staticmethod
    def _comm(
        registry: Registry,
        wired: Wired,
        route: Route,
        bus: LocalBus,
        env: Mapping[str, str],
        *,
        identity: TokenFile,
    ) -> AgentCommContract:
        if route.kind == "local":
            comm = registry.create("agent_comm", route.protocol, route.params, bus=bus)
        else:
            params: dict[str, Any] = {
                "url": route.url,
                "headers": resolve_headers(route, env),
                "timeout": route.timeout,
            }
            if carries_identity(wired.app, route.target):
                params["identity"] = identity.current
            comm = registry.create("agent_comm", route.protocol, params)
        if not isinstance(comm, AgentCommContract):
            raise HostError(
                f"agent_comm plugin {route.protocol!r} built a {type(comm).__name__}, which is "
                "not an AgentCommContract"
            )
        return comm

    @property
    def agents(self) -> tuple[str, ...]:
        """The hosted agent ids, roots first."""
        return tuple(self._hosted)

    def _get(self, agent_id: str) -> _Hosted:
        hosted = self._hosted.get(agent_id)
        if hosted is None:
            raise HostError(
                f"agent {agent_id!r} is not hosted here; hosted: {', '.join(self._hosted)}"
            )
        return hosted

    def mailbox(self, agent_id: str) -> SessionTurnMailbox:
        """The session mailbox of a hosted agent."""
        return self._get(agent_id).mailbox

    def runner(self, agent_id: str) -> TurnRunner:
        """The agent (turn runner) of a hosted agent."""
        return self._get(agent_id).agent

    def manifest(self, agent_id: str) -> AgentManifest:
        """The manifest of a hosted agent."""
        return self._get(agent_id).manifest

    async def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s overall) until every mailbox is idle."""
        results = await asyncio.gather(*(h.mailbox.drain(timeout) for h in self._hosted.values()))
        return all(results)

    async def cancel_turns(self) -> None:
        """End every queued or running turn ``canceled`` now (the drain ran out); the
        listeners stay up, so each turn's caller still gets that end."""
        for hosted in self._hosted.values():
            await hosted.mailbox.aclose()

    async def aclose(self) -> None:
        """Close the mailboxes, then the routes, then the models."""
        for hosted in self._hosted.values():
            await hosted.mailbox.aclose()
        for comm in self._comms:
            await comm.aclose()
        for toolbox in self._toolboxes:
            await toolbox.aclose()
        for model in self._models:
            await model.aclose()
        for agent_id in self._hosted:
            self.bus.detach(agent_id)


def _describe(manifest: AgentManifest) -> str:
    return manifest.spec.description or manifest.metadata.description or ""

"""Whole-document rules of an ``Application``, every failure reported together.

:func:`parse_application` turns a mapping into the typed model (schema errors become
:class:`~mas.infra.errors.Problem` lines); :func:`check_application` applies the rules that
need more than one field. Plugin names are checked against the names the caller passes
(the runtime registry decides what is valid; this layer stays pure).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from mas.infra.addresses import (
    AddressError,
    HostPort,
    parse_advertised_url,
    parse_grpc_address,
    parse_tool_server_url,
)
from mas.infra.errors import ApplicationInvalid, Problem, field_path
from mas.infra.model_choice import model_problems
from mas.infra.models import (
    ACCEPTED_API_VERSIONS,
    DNS_LABEL_PATTERN,
    AgentManifest,
    Application,
    CommSelector,
    Endpoint,
)
from mas.infra.routes import doors_of


@dataclass(frozen=True)
class KnownPlugins:
    """Plugin names the registry offers, by the role the document gives them."""

    agent_comm: Collection[str] = field(default_factory=lambda: ("local", "a2a"))
    agent_expose: Collection[str] = field(default_factory=lambda: ("a2a", "mcp"))
    model: Collection[str] = field(
        default_factory=lambda: ("echo", "scripted", "openai", "anthropic")
    )
    tool_source: Collection[str] = field(default_factory=lambda: ("mcp",))


def _path(loc: tuple[int | str, ...]) -> str:
    """A dotted field path (:func:`~mas.infra.errors.field_path`)."""
    return field_path(loc)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class whose field list applies at ``loc`` (for 'accepted fields' hints)."""
    current: Any = Application
    for part in loc:
        while True:
            args = [a for a in get_args(current) if a is not type(None)]
            if isinstance(current, type) and issubclass(current, BaseModel):
                break
            if not args:
                return None
            current = args[-1]  # Optional[X] -> X, dict[K, V] -> V, list[X] -> X
        if isinstance(part, int) or part not in current.model_fields:
            continue
        current = current.model_fields[part].annotation
    while not (isinstance(current, type) and issubclass(current, BaseModel)):
        args = [a for a in get_args(current) if a is not type(None)]
        if not args:
            return None
        current = args[-1]
    return current


def problems_from_pydantic(error: ValidationError) -> list[Problem]:
    """One :class:`Problem` per schema error, with the field path, the value and the rule."""
    problems = []
    for item in error.errors(include_url=False):
        loc = tuple(
            p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))
        )
        if item["type"] == "missing":
            problems.append(Problem(_path(loc), "is required"))
        elif item["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            accepted = f"; accepted: {', '.join(model.model_fields)}" if model else ""
            problems.append(Problem(_path(loc), f"is not a known field{accepted}"))
        elif (
            item["type"] == "string_pattern_mismatch"
            and (item.get("ctx") or {}).get("pattern") == DNS_LABEL_PATTERN
        ):
            where = _path(loc[:-2]) if loc and loc[-1] == "[key]" else _path(loc)
            problems.append(
                Problem(
                    where,
                    f"{_shown(item['input'])} is not an agent id; accepted: a DNS-1123 label "
                    "(lowercase letters, digits and '-', starting and ending with a letter or "
                    "digit)",
                )
            )
        elif loc and loc[-1] == "[key]":
            problems.append(Problem(_path(loc[:-2]), f"key {_shown(item['input'])}: {item['msg']}"))
        elif _path(loc) == "apiVersion":
            problems.append(
                Problem(
                    "apiVersion",
                    f"{_shown(item['input'])} is not accepted; accepted: "
                    + " or ".join(ACCEPTED_API_VERSIONS),
                )
            )
        else:
            problems.append(Problem(_path(loc), f"{_shown(item['input'])}: {item['msg']}"))
    return sorted({Problem(p.path or "(document)", p.message) for p in problems})


def parse_application(data: Mapping[str, Any]) -> Application:
    """The typed model of ``data``; :class:`ApplicationInvalid` lists every schema error."""
    try:
        return Application.model_validate(data)
    except ValidationError as exc:
        raise ApplicationInvalid(problems_from_pydantic(exc)) from None


def _comm_problems(
    where: str, selector: CommSelector | None, known: Collection[str]
) -> list[Problem]:
    if selector is None:
        return []
    if (selector.type is None) == (selector.protocol is None):
        return [Problem(where, "set exactly one of type or protocol")]
    key = "type" if selector.type is not None else "protocol"
    if selector.name not in known:
        return [
            Problem(
                f"{where}.{key}",
                f"{selector.name!r} is not a known agent_comm plugin; known: "
                + ", ".join(sorted(known)),
            )
        ]
    return []


def _endpoint_problems(
    agent_id: str,
    *,
    endpoint: Endpoint,
    agents: Collection[str],
    known: KnownPlugins,
    require_urls: bool,
    cards: dict[HostPort, list[str]],
    doors: dict[tuple[str, str], list[str]],
) -> list[Problem]:
    where = f"spec.endpoints.{agent_id}"
    problems = _protocol_problems(where, endpoint, known)
    served = endpoint.served_agent(agent_id)
    if endpoint.agent is not None:
        problems += _door_problems(where, agent_id, endpoint, agents)
    elif endpoint.deployed and agent_id not in agents:
        problems.append(
            Problem(
                f"{where}.usage",
                f"{endpoint.effective_usage!r} needs an agent of the agency to deploy, and "
                f"{agent_id!r} is not one (agents: {', '.join(sorted(agents))}); an external "
                "agent takes usage: use",
            )
        )
    if endpoint.a2a.extended_skills and not endpoint.a2a.capabilities.extendedAgentCard:
        problems.append(
            Problem(
                f"{where}.a2a.extended_skills",
                "are only served on the extended card; set a2a.capabilities.extendedAgentCard: "
                "true, or drop them",
            )
        )
    if endpoint.deployed and served in agents:
        doors[(served, endpoint.protocol)].append(where)
    http: HostPort | None = None
    if endpoint.url is None:
        if not endpoint.deployed:
            problems.append(
                Problem(
                    f"{where}.url", "is required for usage: use (the peer's scheme://host:port)"
                )
            )
        elif require_urls:
            problems.append(
                Problem(
                    f"{where}.url",
                    "is required to serve the agent outside a cluster (scheme://host:port); "
                    "only the operator defaults it to the Service DNS name",
                )
            )
    elif endpoint.protocol in known.tool_source and not endpoint.deployed:
        try:
            parse_tool_server_url(endpoint.url)
        except AddressError as exc:
            problems.append(Problem(f"{where}.url", str(exc)))
    else:
        try:
            http = parse_advertised_url(endpoint.url)
        except AddressError as exc:
            problems.append(Problem(f"{where}.url", str(exc)))
    problems += _grpc_problems(where, endpoint, http, cards)
    if endpoint.deployed and http is not None:
        cards[http.socket_key()].append(f"{where}.url")
    return problems


def _protocol_problems(where: str, endpoint: Endpoint, known: KnownPlugins) -> list[Problem]:
    """The endpoint's protocol against the plugins each of its usages needs."""
    protocol = endpoint.protocol
    comm, tools, expose = (
        protocol in known.agent_comm,
        protocol in known.tool_source,
        protocol in known.agent_expose,
    )
    if not (comm or tools or expose):
        every = {*known.agent_comm, *known.tool_source, *known.agent_expose}
        return [
            Problem(
                f"{where}.protocol",
                f"{protocol!r} is not a known protocol; known: " + ", ".join(sorted(every)),
            )
        ]
    if endpoint.used and not (comm or tools):
        return [
            Problem(
                f"{where}.usage",
                f"{endpoint.effective_usage!r}: protocol {protocol!r} has no agent_comm or "
                "tool_source plugin to use it; accepted: usage deploy",
            )
        ]
    if endpoint.deployed and not expose:
        return [
            Problem(
                f"{where}.protocol",
                f"{protocol!r} cannot be deployed (no agent_expose plugin); deployable: "
                + ", ".join(sorted(known.agent_expose)),
            )
        ]
    if tools and not comm and endpoint.effective_usage == "use-and-deploy":
        return [
            Problem(
                f"{where}.usage",
                f"'use-and-deploy' with protocol {protocol!r}: a {protocol} endpoint is either "
                "a tool server (usage: use) or an agent's door (usage: deploy), not both",
            )
        ]
    return []


def _auth_problems(
    endpoints: Mapping[str, Endpoint], agents: Collection[str], known: KnownPlugins
) -> list[Problem]:
    """``a2a.auth``: the inbound auth of an agent, one for all its doors (A2A and MCP)."""
    problems = []
    for key, endpoint in endpoints.items():
        tool_server = (
            endpoint.protocol in known.tool_source
            and endpoint.protocol not in known.agent_comm
            and not endpoint.deployed
        )
        if endpoint.a2a.auth is not None and tool_server:
            problems.append(
                Problem(
                    f"spec.endpoints.{key}.a2a.auth",
                    "is the inbound auth of a deployed door; a tool server (usage use) is "
                    "called, not served: give its credentials in headers (e.g. "
                    "Authorization: {secret_key_ref: ...}); accepted here: no a2a.auth",
                )
            )
    for agent in sorted(agents):
        declared = [(k, e.a2a.auth) for k, e in doors_of(endpoints, agent) if e.a2a.auth]
        for key, auth in declared:
            others = [k for k, other in declared if other != auth]
            if others:
                problems.append(
                    Problem(
                        f"spec.endpoints.{key}.a2a.auth",
                        f"differs from {', '.join(f'spec.endpoints.{o}.a2a.auth' for o in others)}"
                        f"; every door of agent {agent!r} enforces one auth: declare it on one "
                        "of its doors, or the same on each",
                    )
                )
    return problems


def _door_problems(
    where: str, key: str, endpoint: Endpoint, agents: Collection[str]
) -> list[Problem]:
    """The ``agent`` field: only on a deployed endpoint, naming an agent of the agency."""
    if not endpoint.deployed:
        return [
            Problem(
                f"{where}.agent",
                f"{endpoint.agent!r}: only a deployed endpoint serves an agent; usage is "
                f"{endpoint.effective_usage!r} (accepted: deploy or use-and-deploy)",
            )
        ]
    if endpoint.agent not in agents:
        return [
            Problem(
                f"{where}.agent",
                f"{endpoint.agent!r} is not an agent of the agency; agents: "
                + ", ".join(sorted(agents)),
            )
        ]
    if key in agents and key != endpoint.agent:
        return [
            Problem(
                f"{where}.agent",
                f"{endpoint.agent!r} differs from the key {key!r}, which is another agent; "
                "key a door of its own by a name that is not an agent id",
            )
        ]
    return []


def _tool_problems(
    where: str, manifest: AgentManifest, endpoints: Mapping[str, Endpoint], known: KnownPlugins
) -> list[Problem]:
    """``spec.tools``: every server a tool server endpoint, listed once; names unique."""
    problems: list[Problem] = []
    servers = sorted(k for k, e in endpoints.items() if e.used and e.protocol in known.tool_source)
    seen: set[str] = set()
    for index, grant in enumerate(manifest.spec.tools):
        at = f"{where}.tools[{index}]"
        endpoint = endpoints.get(grant.server)
        if grant.server in seen:
            problems.append(Problem(f"{at}.server", f"{grant.server!r} is listed twice"))
        seen.add(grant.server)
        if endpoint is None or not endpoint.used or endpoint.protocol not in known.tool_source:
            what = (
                "is not an endpoint"
                if endpoint is None
                else f"is an endpoint with protocol {endpoint.protocol!r} and usage "
                f"{endpoint.effective_usage!r}, not a tool server"
            )
            problems.append(
                Problem(
                    f"{at}.server",
                    f"{grant.server!r} {what}; tool servers (usage use, protocol "
                    f"{' or '.join(sorted(known.tool_source))}): {', '.join(servers) or '(none)'}",
                )
            )
        names = grant.names or []
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.append(Problem(f"{at}.names", f"{dup!r} is listed twice"))
    for index, target in enumerate(manifest.spec.delegates_to):
        endpoint = endpoints.get(target)
        if (
            endpoint is not None
            and endpoint.used
            and endpoint.protocol in known.tool_source
            and endpoint.protocol not in known.agent_comm
        ):
            problems.append(
                Problem(
                    f"{where}.delegates_to[{index}]",
                    f"{target!r} is a tool server (protocol {endpoint.protocol!r}), not an "
                    f"agent; list it in spec.tools instead: [{{server: {target}}}]",
                )
            )
    return problems


def _grpc_problems(
    where: str, endpoint: Endpoint, http: HostPort | None, cards: dict[HostPort, list[str]]
) -> list[Problem]:
    options = endpoint.a2a
    if options.grpc_port is None and options.grpc_url is None:
        return []
    if endpoint.protocol != "a2a":
        return [
            Problem(f"{where}.a2a", f"gRPC settings need protocol 'a2a', not {endpoint.protocol!r}")
        ]
    problems: list[Problem] = []
    grpc: HostPort | None = None
    if options.grpc_url is not None:
        try:
            grpc = parse_grpc_address(options.grpc_url)
        except AddressError as exc:
            problems.append(Problem(f"{where}.a2a.grpc_url", str(exc)))
    elif http is not None and options.grpc_port is not None:
        grpc = HostPort(http.host, options.grpc_port)
    if http is not None and options.grpc_port == http.port:
        problems.append(
            Problem(
                f"{where}.a2a.grpc_port",
                f"{options.grpc_port} is the url's HTTP port; gRPC needs a port of its own",
            )
        )
    elif grpc is not None and http is not None and grpc == http:
        problems.append(
            Problem(f"{where}.a2a.grpc_url", f"{options.grpc_url!r} is the url's own host:port")
        )
    if endpoint.deployed and grpc is not None and not problems:
        cards[grpc.socket_key()].append(f"{where}.a2a.grpc")
    return problems


def check_application(
    app: Application, known: KnownPlugins | None = None, *, require_urls: bool = True
) -> list[Problem]:
    """Every rule broken by ``app`` beyond its schema (``delegates_to`` is wiring's job).

    ``require_urls`` is off for the operator, which defaults a deployed agent's url to its
    Service DNS name.
    """
    known = known or KnownPlugins()
    spec = app.spec
    agents = set(spec.agency.agents)
    problems: list[Problem] = []
    if spec.agency.entry is not None and spec.agency.entry not in agents:
        problems.append(
            Problem(
                "spec.agency.entry",
                f"{spec.agency.entry!r} is not an agent of the agency; agents: "
                + ", ".join(sorted(agents)),
            )
        )
    elif spec.agency.entry_agent() is None:
        problems.append(
            Problem("spec.agency.entry", "is required when the agency has more than one agent")
        )
    problems += _comm_problems("spec.agent_comm", spec.agent_comm, known.agent_comm)
    problems += _comm_problems(
        "spec.defaults.agent_comm", spec.defaults.agent_comm, known.agent_comm
    )
    problems += model_problems(spec, known.model)
    for agent_id, manifest in spec.agency.agents.items():
        where = f"spec.agency.agents.{agent_id}.spec"
        problems += _tool_problems(where, manifest, spec.endpoints, known)
        seen: set[str] = set()
        for index, target in enumerate(manifest.spec.delegates_to):
            if target in seen:
                problems.append(
                    Problem(f"{where}.delegates_to[{index}]", f"{target!r} is listed twice")
                )
            seen.add(target)
    cards: dict[HostPort, list[str]] = defaultdict(list)
    doors: dict[tuple[str, str], list[str]] = defaultdict(list)
    for agent_id, endpoint in spec.endpoints.items():
        problems += _endpoint_problems(
            agent_id,
            endpoint=endpoint,
            agents=agents,
            known=known,
            require_urls=require_urls,
            cards=cards,
            doors=doors,
        )
    problems += _auth_problems(spec.endpoints, agents, known)
    for (agent, protocol), owners in doors.items():
        if len(owners) > 1:
            problems += [
                Problem(
                    owner,
                    f"agent {agent!r} is already served over {protocol} by "
                    + ", ".join(o for o in owners if o != owner),
                )
                for owner in owners
            ]
    for address, owners in cards.items():
        if len(owners) > 1:
            for owner in owners:
                others = ", ".join(o for o in owners if o != owner)
                problems.append(
                    Problem(
                        owner,
                        f"{address} is also served by {others}; a single port cannot host "
                        "multiple independent AgentCards",
                    )
                )
    return sorted(set(problems))

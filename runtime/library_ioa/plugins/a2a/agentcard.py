"""The AgentCard of a served agent, built from its manifest and its Application endpoint.

The rules (the spec's "AgentCard" section):

- ``name`` is ``metadata.name``, else the agent id; ``version`` is ``metadata.version``
  (default ``0.1.0``).
- ``description`` is ``spec.description``, then ``metadata.description``, then the name.
- One ``AgentSkill`` per ``spec.skills`` entry: ``name`` defaults to the id, ``description``
  to a sentence naming the skill and the agent, ``tags`` to the skill id (the protocol
  requires at least one). A single ``general`` skill when there are none.
- ``provider`` comes from ``spec.provider`` (no provider when it is absent); its
  ``organization`` defaults to MAS Lab.
- ``capabilities`` come from the endpoint's ``a2a.capabilities``; the default input and
  output modes are ``text/plain``.
- Interfaces: JSON-RPC at the advertised URL, HTTP+JSON at ``<url>/a2a/rest`` and gRPC when
  ``a2a.grpc_port`` or ``a2a.grpc_url`` is set (``grpc_url``, else the URL's host and
  ``grpc_port``), each for the protocol version the SDK implements. With ``compat_0_3``
  (the default) the same URLs are listed again for protocol 0.3, which the server also
  answers, so that 0.3 clients find ``url`` and ``preferredTransport`` on the card.
- ``securitySchemes`` / ``securityRequirements`` from the endpoint's ``a2a.auth``: one
  scheme each, any one suffices (``library_ioa/serving/auth.py``); no credential is ever on
  the card.
- The extended card (:func:`extended_card`, ``GetExtendedAgentCard``, only past
  authentication when ``a2a.auth`` is set) is served when ``extendedAgentCard`` is on: the
  public card plus the skills of ``a2a.extended_skills``.
"""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_CURRENT, TransportProtocol

from library_ioa.errors import LibraryError
from library_ioa.serving.auth import card_security
from mas.infra.addresses import normalize_url, parse_advertised_url, parse_grpc_address
from mas.infra.models import AgentManifest, Endpoint, Skill

DEFAULT_MODES = ("text/plain",)
REST_PATH = "/a2a/rest"
GENERAL_SKILL_ID = "general"


class AgentCardError(LibraryError, ValueError):
    """The card cannot be built; the message names the field and what is accepted."""


def _skills(manifest: AgentManifest, agent_name: str, description: str) -> list[AgentSkill]:
    if not manifest.spec.skills:
        return [
            AgentSkill(
                id=GENERAL_SKILL_ID,
                name="General",
                description=description,
                tags=[GENERAL_SKILL_ID],
            )
        ]
    return [_skill(skill, agent_name) for skill in manifest.spec.skills]


def _skill(skill: Skill, agent_name: str) -> AgentSkill:
    name = skill.name or skill.id
    return AgentSkill(
        id=skill.id,
        name=name,
        description=skill.description or f"The {name} skill of {agent_name}.",
        tags=list(skill.tags) or [skill.id],
        examples=list(skill.examples),
    )


def extended_card(card: AgentCard, endpoint: Endpoint) -> AgentCard | None:
    """The extended card of ``card`` (served by ``GetExtendedAgentCard`` to a caller past
    authentication): the public card plus ``a2a.extended_skills``; ``None`` unless
    ``a2a.capabilities.extendedAgentCard`` is on."""
    if not endpoint.a2a.capabilities.extendedAgentCard:
        return None
    extended = AgentCard()
    extended.CopyFrom(card)
    extended.skills.extend(_skill(skill, card.name) for skill in endpoint.a2a.extended_skills)
    return extended


def grpc_target(endpoint: Endpoint, url: str) -> str | None:
    """The advertised gRPC address (``host:port``), or None when no gRPC listener is served."""
    options = endpoint.a2a
    if options.grpc_url is not None:
        return str(parse_grpc_address(options.grpc_url))
    if options.grpc_port is not None:
        host = parse_advertised_url(url).host
        return str(parse_grpc_address(f"{host}:{options.grpc_port}"))
    return None


def interfaces(endpoint: Endpoint, url: str, *, compat_0_3: bool = True) -> list[AgentInterface]:
    """The card's interfaces, the protocol version the SDK implements first."""
    bindings = [
        (TransportProtocol.JSONRPC.value, url),
        (TransportProtocol.HTTP_JSON.value, f"{url}{REST_PATH}"),
    ]
    grpc = grpc_target(endpoint, url)
    if grpc is not None:
        bindings.append((TransportProtocol.GRPC.value, grpc))
    versions = [PROTOCOL_VERSION_CURRENT]
    if compat_0_3:
        versions.append(PROTOCOL_VERSION_0_3)
    return [
        AgentInterface(url=where, protocol_binding=binding, protocol_version=version)
        for version in versions
        for binding, where in bindings
    ]


def agent_card_from_manifest(
    agent_id: str,
    manifest: AgentManifest,
    endpoint: Endpoint,
    *,
    url: str | None = None,
    compat_0_3: bool = True,
) -> AgentCard:
    """The official A2A AgentCard of ``agent_id`` (see the module docstring for the rules).

    ``url`` overrides the endpoint's advertised URL (in a cluster it is the Service DNS
    name); one of the two is required.
    """
    advertised = url if url is not None else endpoint.url
    if not advertised:
        raise AgentCardError(
            f"spec.endpoints.{agent_id}.url: is not set and no url was given; accepted: "
            "scheme://host[:port]"
        )
    try:
        parse_advertised_url(advertised)
    except ValueError as exc:
        raise AgentCardError(f"spec.endpoints.{agent_id}.url: {exc}") from None
    advertised = normalize_url(advertised)
    name = manifest.metadata.name or agent_id
    description = manifest.spec.description or manifest.metadata.description or name
    caps = endpoint.a2a.capabilities
    card = AgentCard(
        name=name,
        description=description,
        version=manifest.metadata.version,
        supported_interfaces=interfaces(endpoint, advertised, compat_0_3=compat_0_3),
        capabilities=AgentCapabilities(
            streaming=caps.streaming,
            push_notifications=caps.pushNotifications,
            extended_agent_card=caps.extendedAgentCard,
        ),
        default_input_modes=list(DEFAULT_MODES),
        default_output_modes=list(DEFAULT_MODES),
        skills=_skills(manifest, name, description),
    )
    if endpoint.a2a.auth is not None:  # declared on the public card; enforced by serving/auth
        schemes, requirements = card_security(endpoint.a2a.auth)
        for name, scheme in schemes.items():
            card.security_schemes[name].CopyFrom(scheme)
        card.security_requirements.extend(requirements)
    provider = manifest.spec.provider
    if provider is not None:
        card.provider.CopyFrom(
            AgentProvider(organization=provider.organization, url=provider.url or "")
        )
    return card

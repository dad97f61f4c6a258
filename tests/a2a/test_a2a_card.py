"""The AgentCard: every default and fallback of agent_card_from_manifest, and the served card."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a_support import STEP, Served, serve_agent

from library_ioa.plugins.a2a.agentcard import AgentCardError, agent_card_from_manifest
from mas.infra.models import AgentManifest, Endpoint

URL = "http://agents.example.invalid:8401"


def manifest(**data: object) -> AgentManifest:
    return AgentManifest.model_validate(data)


def endpoint(**data: object) -> Endpoint:
    return Endpoint.model_validate({"url": URL, "usage": "deploy", **data})


def test_defaults_for_an_empty_manifest() -> None:
    card = agent_card_from_manifest("worker", manifest(), endpoint())
    assert card.name == "worker"
    assert card.version == "0.1.0"
    assert card.description == "worker"
    assert [s.id for s in card.skills] == ["general"]
    assert card.skills[0].description == "worker"
    assert list(card.skills[0].tags) == ["general"]
    assert not card.HasField("provider")
    assert list(card.default_input_modes) == ["text/plain"]
    assert list(card.default_output_modes) == ["text/plain"]
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is False
    assert card.capabilities.extended_agent_card is False
    current = [
        (i.protocol_binding, i.url)
        for i in card.supported_interfaces
        if i.protocol_version == "1.0"
    ]
    assert current == [("JSONRPC", URL), ("HTTP+JSON", f"{URL}/a2a/rest")]


def test_name_version_and_description_precedence() -> None:
    both = manifest(
        metadata={"name": "Worker", "version": "2.3.4", "description": "from metadata"},
        spec={"description": "from spec"},
    )
    card = agent_card_from_manifest("worker", both, endpoint())
    assert (card.name, card.version, card.description) == ("Worker", "2.3.4", "from spec")
    meta_only = manifest(metadata={"name": "Worker", "description": "from metadata"})
    assert agent_card_from_manifest("worker", meta_only, endpoint()).description == "from metadata"
    name_only = manifest(metadata={"name": "Worker"})
    assert agent_card_from_manifest("worker", name_only, endpoint()).description == "Worker"


def test_one_skill_per_entry_with_defaults() -> None:
    m = manifest(
        metadata={"name": "Desk"},
        spec={
            "skills": [
                {
                    "id": "answer",
                    "name": "Answer",
                    "description": "Answers.",
                    "tags": ["qa"],
                    "examples": ["Why?"],
                },
                {"id": "summarize"},
            ]
        },
    )
    skills = agent_card_from_manifest("desk", m, endpoint()).skills
    assert [(s.id, s.name, s.description, list(s.tags), list(s.examples)) for s in skills] == [
        ("answer", "Answer", "Answers.", ["qa"], ["Why?"]),
        ("summarize", "summarize", "The summarize skill of Desk.", ["summarize"], []),
    ]


def test_provider_from_spec_with_organization_default() -> None:
    given = manifest(spec={"provider": {"organization": "Acme", "url": "https://acme.example"}})
    card = agent_card_from_manifest("a", given, endpoint())
    assert (card.provider.organization, card.provider.url) == ("Acme", "https://acme.example")
    default_org = manifest(spec={"provider": {"url": "https://lab.example"}})
    card = agent_card_from_manifest("a", default_org, endpoint())
    assert (card.provider.organization, card.provider.url) == ("MAS Lab", "https://lab.example")


def test_capabilities_come_from_the_endpoint() -> None:
    ep = endpoint(
        a2a={
            "capabilities": {
                "streaming": False,
                "pushNotifications": True,
                "extendedAgentCard": True,
            }
        }
    )
    caps = agent_card_from_manifest("a", manifest(), ep).capabilities
    assert (caps.streaming, caps.push_notifications, caps.extended_agent_card) == (
        False,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("a2a", "expected"),
    [
        ({"grpc_port": 8411}, "agents.example.invalid:8411"),
        ({"grpc_url": "grpc.example.invalid:9000"}, "grpc.example.invalid:9000"),
        ({"grpc_url": "grpc.example.invalid:9000", "grpc_port": 8411}, "grpc.example.invalid:9000"),
        ({}, None),
    ],
)
def test_grpc_interface_when_configured(a2a: dict[str, object], expected: str | None) -> None:
    card = agent_card_from_manifest("a", manifest(), endpoint(a2a=a2a))
    grpc = [
        i.url
        for i in card.supported_interfaces
        if i.protocol_binding == "GRPC" and i.protocol_version == "1.0"
    ]
    assert grpc == ([expected] if expected else [])


def test_url_argument_overrides_the_endpoint_and_trailing_slash_is_dropped() -> None:
    card = agent_card_from_manifest(
        "a", manifest(), endpoint(), url="http://a.team.svc.cluster.local:8080/"
    )
    assert card.supported_interfaces[0].url == "http://a.team.svc.cluster.local:8080"


def test_protocol_versions_current_then_0_3() -> None:
    card = agent_card_from_manifest("a", manifest(), endpoint())
    assert [i.protocol_version for i in card.supported_interfaces] == ["1.0", "1.0", "0.3", "0.3"]
    only_current = agent_card_from_manifest("a", manifest(), endpoint(), compat_0_3=False)
    assert {i.protocol_version for i in only_current.supported_interfaces} == {"1.0"}


@pytest.mark.parametrize(
    ("url", "needle"),
    [(None, "spec.endpoints.a.url: is not set"), ("http://h:1/prefix", "path prefix")],
)
def test_unusable_url_is_a_clear_error(url: str | None, needle: str) -> None:
    ep = Endpoint.model_validate({"usage": "deploy"})
    with pytest.raises(AgentCardError, match=needle):
        agent_card_from_manifest("a", manifest(), ep, url=url)


async def test_served_card_over_http_is_the_official_card() -> None:
    m = manifest(metadata={"name": "Served"}, spec={"skills": [{"id": "s1", "tags": ["t"]}]})
    async with serve_agent(manifest=m) as agent, httpx.AsyncClient(timeout=STEP) as http:
        raw = (await http.get(f"{agent.url}/.well-known/agent-card.json")).json()
        card = await A2ACardResolver(http, agent.url).get_agent_card()
    assert card.name == "Served"
    assert [s.id for s in card.skills] == ["s1"]
    assert raw["supportedInterfaces"][0] == {
        "url": agent.url,
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert raw["url"] == agent.url  # the 0.3 fields, for 0.3 clients
    assert raw["protocolVersion"] == "0.3"
    grpc = [i["url"] for i in raw["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert grpc and grpc[0] == agent.grpc_address


async def test_health_and_readiness(served: Served) -> None:
    # After stop_accepting the listener refuses new connections, so the last probe must go
    # over the connection the first ones opened. httpx drops an idle pooled connection after
    # 5 s (its default keepalive_expiry), which a loaded machine can take between two
    # requests: the probe then dialled anew and failed with ConnectError. Keep it open.
    limits = httpx.Limits(keepalive_expiry=None)
    async with httpx.AsyncClient(timeout=STEP, limits=limits) as http:
        health = await http.get(f"{served.url}/healthz")
        ready = await http.get(f"{served.url}/readyz")
        served.exposure.stop_accepting()
        not_ready = await http.get(f"{served.url}/readyz")
    assert (health.status_code, health.json()["status"]) == (200, "ok")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    assert (not_ready.status_code, not_ready.json()["status"]) == (503, "not ready")

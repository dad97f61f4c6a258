"""Every validation rule, from the broken documents under tests/data/invalid/."""

from __future__ import annotations

import copy

import pytest

from mas.infra.documents import read_yaml_file
from mas.infra.errors import ApplicationInvalid, WiringError
from mas.infra.model_choice import model_choice
from mas.infra.models import Application
from mas.infra.validation import KnownPlugins, check_application, parse_application
from mas.infra.wiring import wire
from tests.conftest import DATA, EXAMPLES
from tests.unit.documents import document

INVALID = DATA / "invalid"

# file -> every (field path, message fragment) the user must see, and nothing else.
EXPECTED: dict[str, list[tuple[str, str]]] = {
    "url-path-prefix.yaml": [
        ("spec.endpoints.writer.url", "has a path prefix '/agents/writer'"),
    ],
    "shared-card-port.yaml": [
        ("spec.endpoints.editor.url", "a single port cannot host multiple independent AgentCards"),
        ("spec.endpoints.writer.url", "127.0.0.1:8501 is also served by spec.endpoints.editor.url"),
    ],
    "deploy-external.yaml": [
        ("spec.endpoints.search.usage", "'search' is not one (agents: writer)"),
    ],
    "legacy-expose-external.yaml": [
        ("spec.endpoints.search.usage", "'use-and-deploy' needs an agent of the agency"),
    ],
    "grpc-port-clash.yaml": [
        ("spec.endpoints.writer.a2a.grpc_port", "gRPC needs a port of its own"),
    ],
    "grpc-url-malformed.yaml": [
        ("spec.endpoints.writer.a2a.grpc_url", "accepted: host:port"),
    ],
    "unknown-protocol.yaml": [
        ("spec.endpoints.writer.protocol", "'smoke-signals' is not a known protocol; known: a2a"),
    ],
    "unknown-agent-comm.yaml": [
        ("spec.agent_comm.type", "'carrier-pigeon' is not a known agent_comm plugin; known: a2a"),
    ],
    "entry-not-agent.yaml": [
        ("spec.agency.entry", "'boss' is not an agent of the agency; agents: editor, writer"),
    ],
    "missing-delegation-target.yaml": [
        ("spec.agency.agents.editor.spec.delegates_to[0]", "'fact-checker' of agent 'editor'"),
        ("spec.agency.agents.writer.spec.delegates_to[0]", "'researcher' of agent 'writer'"),
    ],
    "bad-usage-value.yaml": [
        ("spec.endpoints.writer.exposed", "is not a known field; accepted: protocol, url, usage"),
        ("spec.endpoints.writer.usage", "'publish': Input should be 'use', 'deploy' or"),
    ],
    "schema-and-rules.yaml": [
        ("spec.endpoints.editor.url", "has a path prefix '/agents/editor'"),
        ("spec.endpoints.search.usage", "'search' is not one (agents: editor, writer)"),
        ("spec.endpoints.writer.url", "has a path prefix '/agents/writer'"),
        ("spec.endpoints.writer.usage", "'publish': Input should be 'use', 'deploy' or"),
    ],
    "mcp-tools.yaml": [
        ("spec.agency.agents.writer.spec.delegates_to[0]", "'docs' is a tool server"),
        ("spec.agency.agents.writer.spec.tools[0].server", "'nowhere' is not an endpoint"),
        ("spec.agency.agents.writer.spec.tools[1].server", "protocol 'a2a' and usage 'use'"),
        ("spec.agency.agents.writer.spec.tools[2].names", "'lookup' is listed twice"),
        ("spec.agency.agents.writer.spec.tools[3].server", "'docs' is listed twice"),
        ("spec.endpoints.docs.url", "accepted: http(s)://host[:port][/path]"),
    ],
    "mcp-empty-tool-filter.yaml": [
        ("spec.agency.agents.writer.spec.tools[0].names", "List should have at least 1 item"),
    ],
    "bad-agent-id.yaml": [
        ("spec.agency.agents", "'Writer_One' is not an agent id; accepted: a DNS-1123 label"),
    ],
}


def test_every_broken_document_has_expectations() -> None:
    assert sorted(p.name for p in INVALID.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_document_reports_every_problem(name: str) -> None:
    with pytest.raises(ApplicationInvalid) as caught:
        wire(read_yaml_file(INVALID / name))
    got = [(p.path, p.message) for p in caught.value.problems]
    assert len(got) == len(EXPECTED[name]), got
    for (path, fragment), (got_path, got_message) in zip(EXPECTED[name], got, strict=True):
        assert got_path == path
        assert fragment in got_message


def test_missing_targets_raise_wiring_error_naming_each_delegator() -> None:
    with pytest.raises(WiringError) as caught:
        wire(read_yaml_file(INVALID / "missing-delegation-target.yaml"))
    assert [(m.source, m.target) for m in caught.value.missing] == [
        ("editor", "fact-checker"),
        ("writer", "researcher"),
    ]


def test_wiring_and_rule_problems_are_reported_together() -> None:
    doc = document(
        agency={"entry": "ghost", "agents": {"lead": {"spec": {"delegates_to": ["nobody"]}}}}
    )
    with pytest.raises(ApplicationInvalid) as caught:
        wire(doc)
    paths = [p.path for p in caught.value.problems]
    assert paths == ["spec.agency.agents.lead.spec.delegates_to[0]", "spec.agency.entry"]
    assert [m.target for m in caught.value.missing] == ["nobody"]


def test_example_is_valid() -> None:
    wired = wire(read_yaml_file(EXAMPLES / "agency.yaml"))
    assert wired.app.spec.agency.entry_agent() == "concierge"


def test_short_api_version_is_accepted_and_others_name_both() -> None:
    doc = document()
    doc["apiVersion"] = "infra/v1"
    assert parse_application(doc).apiVersion == "infra/v1"
    doc["apiVersion"] = "infra.maslab.io/v2"
    with pytest.raises(ApplicationInvalid) as caught:
        parse_application(doc)
    assert str(caught.value) == (
        "apiVersion: 'infra.maslab.io/v2' is not accepted; accepted: infra.maslab.io/v1 or infra/v1"
    )


def test_entry_is_required_with_several_agents_and_implied_with_one() -> None:
    doc = document(agency={"agents": {"a": {}, "b": {}}})
    problems = check_application(parse_application(doc))
    assert [str(p) for p in problems] == [
        "spec.agency.entry: is required when the agency has more than one agent"
    ]
    single = parse_application(document(agency={"agents": {"solo": {}}}))
    assert single.spec.agency.entry_agent() == "solo"
    assert check_application(single) == []


def test_use_endpoint_needs_a_url_and_operator_mode_defaults_deployed_ones() -> None:
    doc = document(endpoints={"worker": {"usage": "use"}, "lead": {"usage": "deploy"}})
    app = parse_application(doc)
    local = [str(p) for p in check_application(app)]
    assert local == [
        "spec.endpoints.lead.url: is required to serve the agent outside a cluster "
        "(scheme://host:port); only the operator defaults it to the Service DNS name",
        "spec.endpoints.worker.url: is required for usage: use (the peer's scheme://host:port)",
    ]
    cluster = [str(p) for p in check_application(app, require_urls=False)]
    assert cluster == [local[1]]


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://127.0.0.1:21", "has scheme 'ftp'"),
        ("http://", "has no host"),
        ("http://h:99999", "is not a valid URL"),
        ("http://h:80?x=1", "has a query or fragment"),
    ],
)
def test_bad_urls_say_what_is_accepted(url: str, fragment: str) -> None:
    doc = document(endpoints={"worker": {"url": url, "usage": "use"}})
    problems = check_application(parse_application(doc))
    assert len(problems) == 1
    assert problems[0].path == "spec.endpoints.worker.url"
    assert fragment in problems[0].message


def test_grpc_url_port_may_differ_and_grpc_needs_protocol_a2a() -> None:
    ok = document(
        endpoints={
            "lead": {
                "url": "http://127.0.0.1:8000",
                "usage": "deploy",
                "a2a": {"grpc_port": 9000, "grpc_url": "lead.example:443"},
            }
        }
    )
    assert check_application(parse_application(ok)) == []
    known = KnownPlugins(agent_comm=("a2a", "mqtt"), agent_expose=("a2a",))
    bad = document(
        endpoints={"worker": {"protocol": "mqtt", "url": "http://h:1", "a2a": {"grpc_port": 2}}}
    )
    problems = [str(p) for p in check_application(parse_application(bad), known)]
    assert problems == ["spec.endpoints.worker.a2a: gRPC settings need protocol 'a2a', not 'mqtt'"]


def test_deployed_protocol_needs_an_expose_plugin() -> None:
    known = KnownPlugins(agent_comm=("a2a", "mqtt"), agent_expose=("a2a",))
    doc = document(endpoints={"lead": {"protocol": "mqtt", "url": "http://h:1", "usage": "deploy"}})
    problems = [str(p) for p in check_application(parse_application(doc), known)]
    assert problems == [
        "spec.endpoints.lead.protocol: 'mqtt' cannot be deployed (no agent_expose plugin); "
        "deployable: a2a"
    ]


def test_grpc_listener_collides_with_another_card() -> None:
    doc = document(
        endpoints={
            "lead": {"url": "http://127.0.0.1:8000", "usage": "deploy", "a2a": {"grpc_port": 8001}},
            "worker": {"url": "http://127.0.0.1:8001", "usage": "use-and-deploy"},
        }
    )
    problems = check_application(parse_application(doc))
    assert [p.path for p in problems] == [
        "spec.endpoints.lead.a2a.grpc",
        "spec.endpoints.worker.url",
    ]


def test_comm_selector_needs_exactly_one_name_and_known_models() -> None:
    doc = document(agent_comm={"type": "local", "protocol": "a2a"})
    doc["spec"]["agency"]["agents"]["worker"] = {"spec": {"model": {"type": "gpt-banana"}}}
    problems = [str(p) for p in check_application(parse_application(doc))]
    assert problems == [
        "spec.agency.agents.worker.spec.model.type: 'gpt-banana' is not a known model plugin; "
        "known: anthropic, echo, openai, scripted",
        "spec.agent_comm: set exactly one of type or protocol",
    ]


def test_duplicate_delegation_target_is_named() -> None:
    doc = document()
    doc["spec"]["agency"]["agents"]["lead"]["spec"]["delegates_to"] = ["worker", "worker"]
    problems = [str(p) for p in check_application(parse_application(doc))]
    assert problems == ["spec.agency.agents.lead.spec.delegates_to[1]: 'worker' is listed twice"]


def test_model_defaults_follow_the_seed() -> None:
    app = Application.model_validate(document(endpoints={"worker": {"url": "http://h:1"}}))
    endpoint = app.spec.endpoints["worker"]
    assert (endpoint.protocol, endpoint.effective_usage, endpoint.timeout) == ("a2a", "use", 30.0)
    assert app.spec.agency.agents["worker"].metadata.version == "0.1.0"
    assert model_choice(app.spec, "worker").plugin == "echo"


@pytest.mark.parametrize(
    ("usage", "expose", "effective"),
    [
        (None, True, "use-and-deploy"),
        ("use", True, "use"),
        (None, False, "use"),
        (None, None, "use"),
        ("deploy", None, "deploy"),
    ],
)
def test_legacy_expose_reads_as_use_and_deploy_only_without_usage(
    usage: str | None, expose: bool | None, effective: str
) -> None:
    endpoint: dict[str, object] = {"url": "http://h:1"}
    if usage is not None:
        endpoint["usage"] = usage
    if expose is not None:
        endpoint["expose"] = expose
    app = Application.model_validate(document(endpoints={"lead": endpoint}))
    assert app.spec.endpoints["lead"].effective_usage == effective


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("http://localhost:8000", "http://127.0.0.1:8000"),
        ("http://LOCALHOST:8000", "http://localhost.:8000/"),
        ("http://127.1:8000", "http://127.0.0.1:8000"),
        ("http://2130706433:8000", "http://localhost:8000"),
        ("http://[::ffff:127.0.0.1]:8000", "http://127.0.0.1:8000"),
        ("http://[0:0:0:0:0:0:0:1]:8000", "http://[::1]:8000"),
        ("http://Agent.Example:80", "http://agent.example"),
    ],
)
def test_two_spellings_of_one_socket_are_one_port(first: str, second: str) -> None:
    doc = document(
        endpoints={
            "lead": {"url": first, "usage": "deploy"},
            "worker": {"url": second, "usage": "use-and-deploy"},
        }
    )
    problems = check_application(parse_application(doc))
    assert [p.path for p in problems] == ["spec.endpoints.lead.url", "spec.endpoints.worker.url"]
    assert all("a single port cannot host multiple" in p.message for p in problems)


def test_different_loopback_addresses_and_ports_are_different_sockets() -> None:
    doc = document(
        endpoints={
            "lead": {"url": "http://127.0.0.1:8000", "usage": "deploy"},
            "worker": {"url": "http://127.0.0.2:8000", "usage": "use-and-deploy"},
        }
    )
    assert check_application(parse_application(doc)) == []


def test_extended_skills_need_the_extended_card() -> None:
    skills = [{"id": "audit"}]
    off = document(endpoints={"lead": {"url": "http://h:1", "a2a": {"extended_skills": skills}}})
    assert [str(p) for p in check_application(parse_application(off))] == [
        "spec.endpoints.lead.a2a.extended_skills: are only served on the extended card; set "
        "a2a.capabilities.extendedAgentCard: true, or drop them"
    ]
    on = copy.deepcopy(off)
    on["spec"]["endpoints"]["lead"]["a2a"]["capabilities"] = {"extendedAgentCard": True}
    assert check_application(parse_application(on)) == []

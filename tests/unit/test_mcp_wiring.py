"""MCP tool servers and MCP doors in the Application: validation, routes, the routes table."""

from __future__ import annotations

import json

import pytest

from mas.ctl.cli import main
from mas.infra.errors import ApplicationInvalid
from mas.infra.validation import check_application, parse_application
from mas.infra.wiring import wire
from tests.unit.documents import document

DOCS = {"protocol": "mcp", "usage": "use", "url": "http://127.0.0.1:8600/mcp", "timeout": 5}


def _with_tools(
    tools: list[dict[str, object]], **endpoints: dict[str, object]
) -> dict[str, object]:
    return document(
        agency={
            "entry": "lead",
            "agents": {
                "lead": {"spec": {"delegates_to": ["worker"], "tools": tools}},
                "worker": {},
            },
        },
        endpoints=endpoints,
    )


def test_tool_grants_become_tool_routes_in_spec_order() -> None:
    doc = _with_tools(
        [{"server": "docs", "names": ["lookup"]}, {"server": "files"}],
        docs=DOCS,
        files={**DOCS, "url": "https://tools.example:9443/v1/mcp"},
    )
    routes = wire(doc).routes
    got = [(t.source, t.server, t.protocol, t.url, t.timeout, t.names) for t in routes.tools]
    assert got == [
        ("lead", "docs", "mcp", "http://127.0.0.1:8600/mcp", 5.0, ("lookup",)),
        ("lead", "files", "mcp", "https://tools.example:9443/v1/mcp", 5.0, None),
    ]
    assert routes.tools_of("worker") == ()
    assert [r.target for r in routes.routes] == ["worker"]


def test_mcp_door_beside_the_a2a_endpoint_of_one_agent() -> None:
    doc = document(
        endpoints={
            "lead": {"url": "http://127.0.0.1:8401", "usage": "deploy"},
            "lead-mcp": {
                "protocol": "mcp",
                "agent": "lead",
                "url": "http://127.0.0.1:8402",
                "usage": "deploy",
            },
        }
    )
    routes = wire(doc).routes
    doors = [(item.endpoint, item.agent, item.protocol, item.url) for item in routes.listeners]
    assert doors == [
        ("lead", "lead", "a2a", "http://127.0.0.1:8401"),
        ("lead-mcp", "lead", "mcp", "http://127.0.0.1:8402"),
    ]
    assert routes.runtimes == {"lead": ("lead", "worker")}
    mcp_door = routes.listener("lead", "mcp")
    assert mcp_door is not None
    assert mcp_door.endpoint == "lead-mcp"


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        (
            {"x": {"protocol": "mcp", "agent": "ghost", "url": "http://h:1", "usage": "deploy"}},
            ["spec.endpoints.x.agent: 'ghost' is not an agent of the agency; agents: lead, worker"],
        ),
        (
            {"x": {"protocol": "mcp", "agent": "lead", "url": "http://h:1/mcp", "usage": "use"}},
            [
                "spec.endpoints.x.agent: 'lead': only a deployed endpoint serves an agent; "
                "usage is 'use' (accepted: deploy or use-and-deploy)"
            ],
        ),
        (
            {
                "worker": {
                    "protocol": "mcp",
                    "agent": "lead",
                    "url": "http://h:1",
                    "usage": "deploy",
                }
            },
            [
                "spec.endpoints.worker.agent: 'lead' differs from the key 'worker', which is "
                "another agent; key a door of its own by a name that is not an agent id"
            ],
        ),
        (
            {"lead": {**DOCS, "usage": "use-and-deploy", "url": "http://h:1"}},
            [
                "spec.endpoints.lead.usage: 'use-and-deploy' with protocol 'mcp': a mcp endpoint "
                "is either a tool server (usage: use) or an agent's door (usage: deploy), not both"
            ],
        ),
        (
            {
                "a": {"protocol": "mcp", "agent": "lead", "url": "http://h:1", "usage": "deploy"},
                "b": {"protocol": "mcp", "agent": "lead", "url": "http://h:2", "usage": "deploy"},
            },
            [
                "spec.endpoints.a: agent 'lead' is already served over mcp by spec.endpoints.b",
                "spec.endpoints.b: agent 'lead' is already served over mcp by spec.endpoints.a",
            ],
        ),
        (
            {
                "lead": {"url": "http://h:1", "usage": "deploy"},
                "door": {
                    "protocol": "mcp",
                    "agent": "lead",
                    "url": "http://h:1",
                    "usage": "deploy",
                },
            },
            [
                "spec.endpoints.door.url: h:1 is also served by spec.endpoints.lead.url; a single "
                "port cannot host multiple independent AgentCards",
                "spec.endpoints.lead.url: h:1 is also served by spec.endpoints.door.url; a single "
                "port cannot host multiple independent AgentCards",
            ],
        ),
    ],
)
def test_door_rules_name_the_field(endpoints: dict[str, object], expected: list[str]) -> None:
    app = parse_application(document(endpoints=endpoints))
    assert [str(p) for p in check_application(app)] == expected


def test_routes_table_and_json_show_tool_servers(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    import yaml

    path = Path(str(tmp_path)) / "app.yaml"
    path.write_text(
        yaml.safe_dump(_with_tools([{"server": "docs", "names": ["lookup"]}], docs=DOCS))
    )
    assert main(["routes", "-f", str(path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[-1].split() == [
        "lead",
        "docs",
        "tools",
        "mcp",
        "http://127.0.0.1:8600/mcp",
        "(tools:",
        "lookup)",
    ]
    assert main(["routes", "-f", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tools"] == [
        {
            "from": "lead",
            "server": "docs",
            "protocol": "mcp",
            "url": "http://127.0.0.1:8600/mcp",
            "timeout": 5.0,
            "names": ["lookup"],
        }
    ]


def test_a_tool_server_is_not_a_delegation_route() -> None:
    doc = _with_tools([], docs=DOCS)
    doc["spec"]["agency"]["agents"]["lead"]["spec"]["delegates_to"] = ["docs"]  # type: ignore[index]
    with pytest.raises(ApplicationInvalid) as caught:
        wire(doc)
    assert [p.path for p in caught.value.problems] == [
        "spec.agency.agents.lead.spec.delegates_to[0]"
    ]

"""The operator's children for MCP: an agent's MCP door (Service port, container port,
ingress) and the egress and Secrets of the tool servers its agents use (pure builders)."""

from __future__ import annotations

from typing import Any

from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas_operator.children import build_children
from mas_operator.plan import plan_application

TOKEN = {"name": "tools-token", "key": "tenant"}


def app() -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "demo"},
        "spec": {
            "agency": {
                "agents": {"front": {"spec": {"tools": [{"server": "docs", "names": ["find"]}]}}}
            },
            "endpoints": {
                "front": {"usage": "deploy"},
                "front-mcp": {"protocol": "mcp", "agent": "front", "usage": "deploy"},
                "docs": {
                    "protocol": "mcp",
                    "usage": "use",
                    "url": "http://10.0.0.7:8600/mcp",
                    "headers": {"X-Tenant": {"secret_key_ref": TOKEN}},
                },
            },
        },
    }


def by_kind(children: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [c for c in children if c["kind"] == kind]


def test_an_mcp_door_is_a_port_of_the_agents_own_pod_and_service() -> None:
    plan = plan_application(app())
    [agent] = plan.agents  # one runtime for both doors
    assert (agent.http_port, agent.mcp_port) == (8080, 8090)
    door = plan.app.spec.endpoints["front-mcp"]
    assert door.url == "http://desk-front.demo.svc:8090"
    children = build_children(plan)
    [service] = by_kind(children, "Service")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("a2a-http", 8080),
        ("mcp-http", 8090),
        ("metrics", 9464),
    ]
    [deployment] = by_kind(children, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "mcp-http", "containerPort": 8090, "protocol": "TCP"} in container["ports"]
    [policy] = by_kind(children, "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["ports"] == [
        {"protocol": "TCP", "port": "a2a-http"},
        {"protocol": "TCP", "port": "mcp-http"},
    ]


def test_tool_servers_get_egress_and_their_header_secrets() -> None:
    plan = plan_application(app())
    [agent] = plan.agents
    assert [(s.name, s.key) for s in agent.secrets] == [("tools-token", "tenant")]
    [policy] = by_kind(build_children(plan), "NetworkPolicy")
    assert {
        "to": [{"ipBlock": {"cidr": "10.0.0.7/32"}}],
        "ports": [{"protocol": "TCP", "port": 8600}],
    } in policy["spec"]["egress"]
    [deployment] = by_kind(build_children(plan), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    variable = secret_env_name(SecretKeyRef(**TOKEN))
    assert any(item["name"] == variable for item in env)


def test_auth_declared_on_the_mcp_door_is_mounted_for_the_agent() -> None:
    auth_ref = {"name": "front-auth", "key": "token"}
    document = app()
    document["spec"]["endpoints"]["front-mcp"]["a2a"] = {
        "auth": {"schemes": [{"type": "bearer", "secret_key_ref": auth_ref}]}
    }
    plan = plan_application(document)
    [agent] = plan.agents  # both doors enforce it: the pod reads it once
    assert sorted((s.name, s.key) for s in agent.secrets) == [
        ("front-auth", "token"),
        ("tools-token", "tenant"),
    ]
    [deployment] = by_kind(build_children(plan), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    variable = secret_env_name(SecretKeyRef(**auth_ref))
    [item] = [item for item in env if item["name"] == variable]
    assert item["valueFrom"]["secretKeyRef"] == auth_ref

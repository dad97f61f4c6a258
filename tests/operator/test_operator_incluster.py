"""The in-cluster URL model (mas.infra.incluster) as the operator's builders apply it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mas.infra.errors import ApplicationInvalid
from mas.infra.incluster import cluster_document, pod_local_kind
from mas.infra.wiring import wire
from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def kind(children: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in children if c["kind"] == name}


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.3.2.1", "loopback"),
        ("[::1]", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("localhost", "loopback"),
        ("LocalHost.", "loopback"),
        ("api.localhost", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("10.0.0.5", None),
        ("desk-researcher.team-a.svc", None),
        ("localhost.example.com", None),
    ],
)
def test_pod_local_hosts(host: str, expected: str | None) -> None:
    assert pod_local_kind(host) == expected


def test_example_loopback_urls_map_to_the_services_with_a_note_each() -> None:
    plan = plan_application(example(), "team-a")
    concierge, researcher = plan.agent("concierge"), plan.agent("researcher")
    assert concierge.url == "http://research-desk-concierge.team-a.svc:8401"
    assert researcher.url == "http://research-desk-researcher.team-a.svc:8402"
    assert concierge.card_url == concierge.url + "/.well-known/agent-card.json"
    assert (concierge.http_port, concierge.grpc_port) == (8401, 8411)
    assert [str(n) for n in plan.notes] == [
        "spec.endpoints.concierge-mcp.url: http://127.0.0.1:8404 is a loopback address, which "
        "in a pod is the pod itself; in the cluster this door of 'concierge' is advertised and "
        "reached at its Service, http://research-desk-concierge.team-a.svc:8404",
        "spec.endpoints.concierge.url: http://127.0.0.1:8401 is a loopback address, which in "
        "a pod is the pod itself; in the cluster 'concierge' is advertised and reached at its "
        "Service, http://research-desk-concierge.team-a.svc:8401",
        "spec.endpoints.researcher.url: http://127.0.0.1:8402 is a loopback address, which in "
        "a pod is the pod itself; in the cluster 'researcher' is advertised and reached at its "
        "Service, http://research-desk-researcher.team-a.svc:8402",
        "spec.endpoints.text-tools.url: http://127.0.0.1:8600/mcp is a loopback address, which "
        "in a pod is the pod itself; this Application does not deploy 'text-tools', so tool "
        "calls to 'text-tools' from summarizer fail to connect from the pods: set a url the "
        "pods can reach",
        "spec.endpoints.web-search.url: http://127.0.0.1:8403 is a loopback address, which in "
        "a pod is the pod itself; this Application does not deploy 'web-search', so "
        "delegations to 'web-search' from researcher fail to connect from the pods: set a url "
        "the pods can reach",
    ]
    route = next(r for r in concierge.routes if r.target == "researcher")
    assert route.url == researcher.url


def test_example_pod_documents_advertise_and_route_through_services() -> None:
    """What each pod reads: its own card url and its routes name Services, never 127.0.0.1."""
    children = build_children(plan_application(example(), "team-a"))
    configs = kind(children, "ConfigMap")
    concierge = yaml.safe_load(configs["research-desk-concierge"]["data"]["application.yaml"])
    wired = wire(concierge, require_urls=True)  # exactly as `mas-ctl serve -f` loads it
    listener = wired.routes.listener("concierge")
    assert listener is not None
    assert listener.url == "http://research-desk-concierge.team-a.svc:8401"
    remote = {r.target: r.url for r in wired.routes.routes if r.kind == "remote"}
    assert remote["researcher"] == "http://research-desk-researcher.team-a.svc:8402"
    service = kind(children, "Service")["research-desk-concierge"]
    assert service["metadata"]["annotations"] == {
        "maslab.io/url": "http://research-desk-concierge.team-a.svc:8401",
        "maslab.io/card-url": "http://research-desk-concierge.team-a.svc:8401"
        "/.well-known/agent-card.json",
        "maslab.io/metrics-url": "http://research-desk-concierge.team-a.svc:9464/metrics",
    }
    # A2A, gRPC, MCP, metrics
    assert [p["port"] for p in service["spec"]["ports"]] == [8401, 8411, 8404, 9464]


def test_a_public_url_is_advertised_as_written_and_peers_still_use_the_service() -> None:
    app = example()
    app["spec"]["endpoints"]["researcher"]["url"] = "https://researcher.maslab.example"
    plan = plan_application(app, "team-a")
    assert plan.agent("researcher").url == "https://researcher.maslab.example"
    assert [n.path for n in plan.notes] == [
        "spec.endpoints.concierge-mcp.url",
        "spec.endpoints.concierge.url",
        "spec.endpoints.text-tools.url",
        "spec.endpoints.web-search.url",
    ]
    route = next(r for r in plan.agent("concierge").routes if r.target == "researcher")
    assert route.url == "http://research-desk-researcher.team-a.svc:443"
    configs = kind(build_children(plan), "ConfigMap")
    own = yaml.safe_load(configs["research-desk-researcher"]["data"]["application.yaml"])
    peer = yaml.safe_load(configs["research-desk-concierge"]["data"]["application.yaml"])
    assert own["spec"]["endpoints"]["researcher"]["url"] == "https://researcher.maslab.example"
    assert peer["spec"]["endpoints"]["researcher"]["url"] == route.url


def test_an_unspecified_url_is_mapped_too() -> None:
    app = example()
    app["spec"]["endpoints"]["concierge"]["url"] = "http://0.0.0.0:8401"
    plan = plan_application(app, "team-a")
    assert plan.agent("concierge").url == "http://research-desk-concierge.team-a.svc:8401"
    [note] = [n for n in plan.notes if n.path == "spec.endpoints.concierge.url"]
    assert "an unspecified address" in str(note)


def test_urls_written_for_the_cluster_need_no_note() -> None:
    app = example()
    for name in ("concierge", "concierge-mcp", "researcher"):
        del app["spec"]["endpoints"][name]["url"]
    app["spec"]["endpoints"]["web-search"]["url"] = "http://web-search.tools.svc:8080"
    app["spec"]["endpoints"]["text-tools"]["url"] = "http://text-tools.tools.svc:8600/mcp"
    assert plan_application(app, "team-a").notes == ()


def test_a_pod_local_external_peer_gets_no_egress_rule() -> None:
    """Loopback never leaves the pod; a port-only rule for ``localhost`` would open the port
    to every destination."""
    app = example()
    app["spec"]["endpoints"]["web-search"]["url"] = "http://localhost:8403"
    policies = kind(build_children(plan_application(app, "team-a")), "NetworkPolicy")
    egress = policies["research-desk-researcher"]["spec"]["egress"]
    assert not [rule for rule in egress if {"protocol": "TCP", "port": 8403} in rule["ports"]]


def test_a_broken_document_is_left_for_validation_to_report() -> None:
    document = {"metadata": {"name": "x"}, "spec": {"endpoints": {"a": "not-a-mapping"}}}
    urls = cluster_document(document, "ns")
    assert (urls.document, urls.notes, urls.services) == (document, (), {})


def test_dns_egress_reaches_any_resolver() -> None:
    """The resolver may be a host-network pod or on the node: not only pods may answer."""
    policies = kind(build_children(plan_application(example(), "team-a")), "NetworkPolicy")
    for policy in policies.values():
        dns = policy["spec"]["egress"][0]
        assert dns == {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}


def test_egress_ports_to_peer_agents_are_the_ports_their_pods_listen_on() -> None:
    """Policies see pod ports (after the Service's translation): each peer rule's port must be
    a container port of that peer, and the Service port that targets it the same number."""
    children = build_children(plan_application(example(), "team-a"))
    deployments, services = kind(children, "Deployment"), kind(children, "Service")
    policy = kind(children, "NetworkPolicy")["research-desk-concierge"]
    checked = 0
    for rule in policy["spec"]["egress"]:
        for peer in rule.get("to", []):
            agent = peer.get("podSelector", {}).get("matchLabels", {}).get("maslab.io/agent")
            if agent is None:
                continue
            name = f"research-desk-{agent}"
            container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
            by_name = {p["name"]: p["containerPort"] for p in container["ports"]}
            service_ports = {
                p["port"]: by_name[p["targetPort"]] for p in services[name]["spec"]["ports"]
            }
            for port in rule["ports"]:
                assert port["port"] in by_name.values()
                assert service_ports[port["port"]] == port["port"]
                checked += 1
    assert checked == 1  # the concierge reaches the researcher on 8402


def test_a_pod_local_grpc_url_is_mapped_to_the_service_and_its_port_deployed() -> None:
    """``a2a.grpc_url: localhost:8412`` without ``grpc_port``: the listener binds 8412, so the
    container, the Service and the delegator's egress carry it, and the card names the Service."""
    app = example()
    app["spec"]["endpoints"]["researcher"]["a2a"] = {"grpc_url": "localhost:8412"}
    plan = plan_application(app, "team-a")
    researcher = plan.agent("researcher")
    assert researcher.grpc_port == 8412
    grpc_note = next(n for n in plan.notes if n.path.endswith(".a2a.grpc_url"))
    assert str(grpc_note) == (
        "spec.endpoints.researcher.a2a.grpc_url: localhost:8412 is a loopback address, which "
        "in a pod is the pod itself; in the cluster the gRPC interface of 'researcher' is "
        "advertised and reached at its Service, research-desk-researcher.team-a.svc:8412"
    )
    assert [n.path for n in plan.notes][:4] == [
        "spec.endpoints.concierge-mcp.url",
        "spec.endpoints.concierge.url",
        "spec.endpoints.researcher.a2a.grpc_url",
        "spec.endpoints.researcher.url",
    ]
    children = build_children(plan)
    service = kind(children, "Service")["research-desk-researcher"]
    assert [p["port"] for p in service["spec"]["ports"]] == [8402, 8412, 9464]
    own = yaml.safe_load(
        kind(children, "ConfigMap")["research-desk-researcher"]["data"]["application.yaml"]
    )
    assert own["spec"]["endpoints"]["researcher"]["a2a"]["grpc_url"] == (
        "research-desk-researcher.team-a.svc:8412"
    )
    egress = kind(children, "NetworkPolicy")["research-desk-concierge"]["spec"]["egress"]
    assert any({"protocol": "TCP", "port": 8412} in rule["ports"] for rule in egress)


def test_a_grpc_url_written_for_the_cluster_is_kept_without_a_note() -> None:
    app = example()
    app["spec"]["endpoints"]["concierge"]["a2a"]["grpc_url"] = "grpc.desk.example:443"
    plan = plan_application(app, "team-a")
    assert not [n for n in plan.notes if "grpc" in n.path]
    assert plan.agent("concierge").grpc_port == 443


def test_the_metrics_port_is_refused_for_a_grpc_url_too() -> None:
    app = example()
    app["spec"]["endpoints"]["researcher"]["a2a"] = {"grpc_url": "127.0.0.1:9464"}
    with pytest.raises(ApplicationInvalid) as raised:
        plan_application(app, "team-a")
    assert "spec.endpoints.researcher.a2a.grpc_url" in str(raised.value)

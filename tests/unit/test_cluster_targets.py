"""What an APP/AGENT target names, decided from an Application and its pods (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from mas.ctl import cluster_targets as targets
from mas.ctl.cluster_targets import (
    ClusterTargetError,
    ResolvedAgent,
    UrlRewrite,
    parse_target,
    pick_pod,
    pod_reason,
    resolve_agent,
)
from mas_operator import names
from mas_operator.conditions import AgentObserved
from mas_operator.plan import plan_application
from tests.conftest import EXAMPLES

NS = "team-a"


def example() -> dict[str, Any]:
    """The example as the API server returns it once the operator has written its status."""
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / "agency.yaml").read_text())
    plan = plan_application(doc, NS)
    doc["status"] = {
        "agents": {
            agent.agent: AgentObserved(1, 1, True, agent.url, agent.card_url).as_status()
            for agent in plan.agents
        }
    }
    return doc


def refusal(app: dict[str, Any], agent: str) -> str:
    with pytest.raises(ClusterTargetError) as caught:
        resolve_agent(app, agent, NS)
    return str(caught.value)


def test_the_labels_and_port_names_are_the_operators() -> None:
    assert targets.LABEL_APPLICATION == names.LABEL_APPLICATION
    assert targets.LABEL_AGENT == names.LABEL_AGENT
    assert (targets.PORT_HTTP, targets.PORT_GRPC) == (names.PORT_HTTP, names.PORT_GRPC)
    assert targets.pod_selector("Research.Desk", "concierge") == ",".join(
        f"{k}={v}" for k, v in names.selector_labels("Research.Desk", "concierge").items()
    )


@pytest.mark.parametrize("target", ["research-desk", "a/b/c", "/concierge", "Desk/x", "a/"])
def test_a_target_that_is_not_app_slash_agent_says_what_is_accepted(target: str) -> None:
    with pytest.raises(ClusterTargetError) as caught:
        parse_target(target)
    assert str(caught.value) == (
        f"target {target!r} is not APP/AGENT; accepted: an Application and one of its agents "
        "(e.g. research-desk/concierge) or an agent's URL (http(s)://host:port)"
    )


def test_a_deployed_agent_resolves_with_its_status() -> None:
    resolved = resolve_agent(example(), "concierge", NS)
    assert (resolved.app, resolved.agent, resolved.namespace) == ("research-desk", "concierge", NS)
    assert resolved.status["url"] == f"http://research-desk-concierge.{NS}.svc:8401"


def test_an_unknown_agent_lists_the_agents_and_where_each_runs() -> None:
    assert refusal(example(), "conceirge") == (
        f"no agent 'conceirge' in Application 'research-desk' in namespace '{NS}'; its agents: "
        "concierge (deployed), researcher (deployed), summarizer (in-process, inside concierge, "
        "researcher)"
    )


def test_an_in_process_agent_names_the_deployed_agents_that_host_it() -> None:
    assert refusal(example(), "summarizer") == (
        "'summarizer' is not deployed: it runs in-process inside the pods of concierge, "
        "researcher; ask one of those (e.g. research-desk/concierge), which delegates to it"
    )


def test_an_external_agent_points_at_its_own_url() -> None:
    assert refusal(example(), "web-search") == (
        f"'web-search' is an external agent Application 'research-desk' in namespace '{NS}' "
        "only uses, not one it deploys; reach it at its own URL: http://127.0.0.1:8403"
    )


def test_an_agent_served_over_mcp_only_says_so() -> None:
    app = example()
    app["spec"]["endpoints"]["researcher"] = {
        "protocol": "mcp",
        "url": "http://127.0.0.1:8402",
        "usage": "deploy",
    }
    app["spec"]["agency"]["agents"]["concierge"]["spec"]["delegates_to"] = ["summarizer"]
    assert refusal(app, "researcher") == (
        f"'researcher' has no A2A endpoint in Application 'research-desk' in namespace '{NS}' "
        "(it is served over mcp only); mas-ctl speaks A2A"
    )


def pod(name: str, *, ready: bool = False, **status: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "runtime", "ports": [{"name": "a2a-http"}]}]},
        "status": {"phase": "Running", "conditions": conditions, **status},
    }


RESOLVED = ResolvedAgent("research-desk", "researcher", NS, {"replicas": 1, "ready": False})


def test_the_first_ready_pod_by_name_is_picked_and_terminating_ones_never() -> None:
    leaving = pod("a", ready=True)
    leaving["metadata"]["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    chosen = pick_pod(RESOLVED, [pod("d", ready=True), pod("b"), leaving, pod("c", ready=True)])
    assert chosen["metadata"]["name"] == "c"


def test_a_pod_in_image_pull_back_off_is_named_with_its_reason() -> None:
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"\n'}
    broken = pod("r-1", containerStatuses=[{"name": "runtime", "state": {"waiting": waiting}}])
    with pytest.raises(ClusterTargetError) as caught:
        pick_pod(RESOLVED, [broken])
    assert str(caught.value) == (
        f"research-desk/researcher in namespace '{NS}' is not Ready: pod r-1: "
        'ImagePullBackOff: Back-off pulling image "x:1"'
    )


def test_an_unschedulable_pod_says_pending_and_why() -> None:
    unscheduled = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient memory.",
            }
        ],
    }
    assert pod_reason({"status": unscheduled}) == (
        "Pending (Unschedulable: 0/1 nodes are available: 1 Insufficient memory.)"
    )


def test_a_deployment_scaled_to_zero_or_not_reported_yet_says_so() -> None:
    scaled = ResolvedAgent("research-desk", "researcher", NS, {"replicas": 0})
    with pytest.raises(ClusterTargetError, match="Deployment research-desk-researcher is scaled"):
        pick_pod(scaled, [])
    unknown = ResolvedAgent("research-desk", "researcher", NS, {})
    with pytest.raises(ClusterTargetError, match="the operator has not reported it yet"):
        pick_pod(unknown, [])


def test_the_agents_in_cluster_urls_are_rewritten_to_the_forwarded_ports() -> None:
    resolved = resolve_agent(example(), "concierge", NS)
    rewrite = UrlRewrite.for_agent(resolved, {8401: 20001, 8411: 20002})
    service = f"research-desk-concierge.{NS}.svc"
    assert rewrite(f"http://{service}:8401") == "http://127.0.0.1:20001"
    assert rewrite(f"http://{service}:8401/a2a/rest") == "http://127.0.0.1:20001/a2a/rest"
    assert rewrite(f"http://{service}.cluster.local:8401/") == "http://127.0.0.1:20001/"
    assert rewrite(f"HTTP://Research-Desk-Concierge.{NS}:8401") == "http://127.0.0.1:20001"
    assert rewrite(f"{service}:8411") == "127.0.0.1:20002"  # the gRPC interface
    # not the agent's, or a port that is not forwarded: unchanged
    assert rewrite(f"http://research-desk-researcher.{NS}.svc:8401") == (
        f"http://research-desk-researcher.{NS}.svc:8401"
    )
    assert rewrite(f"http://{service}:9464/metrics") == f"http://{service}:9464/metrics"
    assert rewrite("other.example:8411") == "other.example:8411"
    assert rewrite("not a url") == "not a url"


def test_an_advertised_url_that_is_not_the_service_is_rewritten_too() -> None:
    app = example()
    status = copy.deepcopy(app["status"]["agents"]["concierge"])
    status["url"] = "http://desk.maslab.example:8401"
    app["status"]["agents"]["concierge"] = status
    rewrite = UrlRewrite.for_agent(resolve_agent(app, "concierge", NS), {8401: 20001})
    assert rewrite("http://desk.maslab.example:8401") == "http://127.0.0.1:20001"

"""The edges of an Application (``status.routes``): which exist and the state of each. Pure."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from mas_operator.cardchecks import CardVerdict
from mas_operator.conditions import AgentObserved, Observed, build_status
from mas_operator.edges import (
    Edge,
    edge_states,
    edges_ready,
    not_ready_summary,
    plan_edges,
    routes_status,
    transitions,
)
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(10)

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "agency.yaml"
NS = "team-a"
RESEARCHER = f"http://research-desk-researcher.{NS}.svc:8402"


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def agent(want: int, ready: int) -> AgentObserved:
    return AgentObserved(want, ready, want == ready, None, None)


def by_edge(states: Any) -> dict[str, dict[str, Any]]:
    return {s.edge.describe(): s.as_status() for s in states}


def test_the_example_has_one_edge_per_delegation_and_tool_grant() -> None:
    edges = plan_edges(plan_application(example(), NS))
    assert [(e.describe(), e.url) for e in edges] == [
        ("concierge -> researcher (a2a)", RESEARCHER),  # its Service, not the loopback url
        ("concierge -> summarizer (in-process)", None),
        ("researcher -> web-search (a2a)", "http://127.0.0.1:8403"),  # as configured
        ("researcher -> summarizer (in-process)", None),
        ("summarizer -> text-tools (mcp)", "http://127.0.0.1:8600/mcp"),
    ]
    hosts = {e.describe(): e.hosts for e in edges if e.via == "in-process"}
    assert hosts == {
        "concierge -> summarizer (in-process)": ("concierge",),
        "researcher -> summarizer (in-process)": ("researcher",),
    }
    assert [e.describe() for e in edges if e.checkable] == ["researcher -> web-search (a2a)"]


def test_a_target_serving_grpc_is_reached_via_grpc() -> None:
    doc = example()
    doc["spec"]["agency"]["agents"]["researcher"]["spec"]["delegates_to"].append("concierge")
    doc["spec"]["endpoints"]["concierge"]["usage"] = "use-and-deploy"  # a route, not in-process
    edges = {e.describe(): e for e in plan_edges(plan_application(doc, NS))}
    edge = edges["researcher -> concierge (grpc)"]  # concierge has a2a.grpc_port
    assert (edge.url, edge.agent) == (f"http://research-desk-concierge.{NS}.svc:8401", "concierge")


def test_states_follow_the_deployments() -> None:
    edges = plan_edges(plan_application(example(), NS))
    rolling = by_edge(edge_states(edges, {"concierge": agent(1, 1), "researcher": agent(1, 0)}))
    assert rolling["concierge -> researcher (a2a)"] == {
        "from": "concierge",
        "to": "researcher",
        "via": "a2a",
        "url": RESEARCHER,
        "state": "Pending",
        "reason": "NoReadyReplicas",
        "message": "0/1 replicas ready",
    }
    assert rolling["concierge -> summarizer (in-process)"]["state"] == "Ready"
    assert rolling["researcher -> summarizer (in-process)"]["message"] == (
        "runs in the pods of researcher: 0/1 replicas ready"
    )
    external = rolling["researcher -> web-search (a2a)"]
    assert (external["state"], external["reason"]) == ("Unknown", "NotChecked")
    assert "spec.routes.check_external" in external["message"]
    assert rolling["summarizer -> text-tools (mcp)"]["state"] == "Unknown"

    scaled = by_edge(edge_states(edges, {"concierge": agent(1, 1), "researcher": agent(0, 0)}))
    assert scaled["concierge -> researcher (a2a)"]["reason"] == "ScaledToZero"
    assert scaled["concierge -> researcher (a2a)"]["message"] == "scaled to 0 replicas"
    hosted = scaled["researcher -> summarizer (in-process)"]["message"]
    assert hosted == "runs in the pods of researcher: scaled to 0 replicas"
    assert scaled["researcher -> summarizer (in-process)"]["reason"] == "ScaledToZero"

    missing = by_edge(edge_states(edges, {"concierge": agent(1, 1)}))
    assert missing["concierge -> researcher (a2a)"]["reason"] == "NotDeployed"

    # one ready replica is enough for calls to succeed: a rollout need not be complete
    ready = edge_states(edges, {"concierge": agent(1, 1), "researcher": agent(3, 1)})
    assert edges_ready(ready) == "3/5"
    assert by_edge(ready)["concierge -> researcher (a2a)"]["message"] == "1/3 replicas ready"


def test_an_in_process_edge_of_an_agent_nobody_hosts_is_unknown() -> None:
    edge = Edge("lonely", "helper", "in-process")
    (state,) = edge_states([edge], {})
    assert (state.state, state.reason) == ("Unknown", "NotHosted")


def test_a_worker_hosted_twice_waits_for_every_host() -> None:
    edge = Edge("summarizer", "helper", "in-process", hosts=("a", "b"))
    (state,) = edge_states([edge], {"a": agent(1, 1), "b": agent(2, 0)})
    assert (state.state, state.message) == ("Pending", "runs in the pods of b: 0/2 replicas ready")


def test_the_card_check_decides_an_external_edge_only_when_asked_for() -> None:
    url = "http://peer.example:8080"
    edge = Edge("a", "peer", "a2a", url, checkable=True)
    assert edge_states([edge], {}, check=True)[0].reason == "CheckPending"
    ok = CardVerdict(True, f"the AgentCard at {url}/.well-known/agent-card.json answered")
    (state,) = edge_states([edge], {}, check=True, verdicts={url: ok})
    assert (state.state, state.reason, state.message) == ("Ready", "CardAnswered", ok.message)
    failing = CardVerdict(False, "GET ... failed: refused", 3, "2026-12-04T10:00:08Z")
    (state,) = edge_states([edge], {}, check=True, verdicts={url: failing})
    assert state.as_status() == {
        "from": "a",
        "to": "peer",
        "via": "a2a",
        "url": url,
        "state": "Unreachable",
        "reason": "CardCheckFailed",
        "message": "GET ... failed: refused (3 failed checks in a row)",
        "checkFailures": 3,
        "nextCheckTime": "2026-12-04T10:00:08Z",
    }
    # off: the verdicts are not read at all
    assert edge_states([edge], {}, check=False, verdicts={url: ok})[0].state == "Unknown"


def test_a_checked_edge_keeps_its_last_result_until_this_process_checks_it() -> None:
    url = "http://peer.example:8080"
    edge = Edge("a", "peer", "a2a", url, checkable=True)
    before = [{"from": "a", "to": "peer", "via": "a2a", "url": url, "state": "Ready"}]
    before[0].update(reason="CardAnswered", message="answered")
    (state,) = edge_states([edge], {}, check=True, previous=before)
    assert (state.state, state.message) == ("Ready", "answered")  # an operator restart
    moved = [{**before[0], "url": "http://elsewhere:1"}]
    assert edge_states([edge], {}, check=True, previous=moved)[0].reason == "CheckPending"


def test_transition_time_is_kept_while_the_state_holds() -> None:
    edge = Edge("a", "b", "in-process", hosts=("a",))
    pending = routes_status(edge_states([edge], {"a": agent(1, 0)}), [], "T0")
    assert pending[0]["lastTransitionTime"] == "T0"
    still = routes_status(edge_states([edge], {"a": agent(2, 0)}), pending, "T1")
    assert still[0]["lastTransitionTime"] == "T0"
    assert still[0]["message"] == "runs in the pods of a: 0/2 replicas ready"
    ready = routes_status(edge_states([edge], {"a": agent(1, 1)}), still, "T2")
    assert ready[0]["lastTransitionTime"] == "T2"


def test_transitions_are_leaving_ready_and_reaching_it() -> None:
    edges = [
        Edge("a", "b", "a2a", "http://b", agent="b"),
        Edge("a", "c", "a2a", "http://c", agent="c"),
    ]
    ready = edge_states(edges, {"b": agent(1, 1), "c": agent(1, 0)})
    assert transitions(ready, []) == ()  # new edges: no transition
    before = routes_status(ready, [], "T0")
    down = edge_states(edges, {"b": agent(0, 0), "c": agent(1, 0)})
    (change,) = transitions(down, before)
    assert (change.edge.target, change.was, change.now.state) == ("b", "Ready", "Pending")
    assert transitions(down, routes_status(down, before, "T1")) == ()  # once per transition
    up = edge_states(edges, {"b": agent(1, 1), "c": agent(1, 1)})
    assert {(c.edge.target, c.was) for c in transitions(up, routes_status(down, before, "T1"))} == {
        ("b", "Pending"),
        ("c", "Pending"),
    }


def test_wired_names_the_edges_that_are_not_ready() -> None:
    edges = plan_edges(plan_application(example(), NS))
    agents = {"concierge": agent(1, 1), "researcher": agent(1, 0)}
    states = edge_states(edges, agents)
    assert not_ready_summary(states) == (
        "edges not Ready: concierge -> researcher (a2a): Pending: 0/1 replicas ready; "
        "researcher -> summarizer (in-process): Pending: runs in the pods of researcher: "
        "0/1 replicas ready; state Unknown: researcher -> web-search (a2a), "
        "summarizer -> text-tools (mcp)"
    )
    status = build_status(Observed(2, agents, wiring_summary="5 routes", routes=states), None)
    wired = next(c for c in status["conditions"] if c["type"] == "Wired")
    assert (wired["status"], wired["reason"]) == ("True", "Wired")  # wiring is not broken
    assert wired["message"].startswith("5 routes; edges not Ready: concierge -> researcher")
    assert status["edges_ready"] == "1/5"
    assert [r["state"] for r in status["routes"]] == [
        "Pending",
        "Ready",
        "Unknown",
        "Pending",
        "Unknown",
    ]
    assert not_ready_summary(edge_states(edges[:2], {**agents, "researcher": agent(1, 1)})) == ""


def test_a_reconcile_that_observed_no_routes_leaves_them_as_they_were() -> None:
    edge = Edge("a", "b", "in-process", hosts=("a",))
    first = build_status(Observed(1, {}, routes=edge_states([edge], {"a": agent(1, 1)})), None)
    stalled = build_status(Observed(2, {}, "InvalidSpec", "bad"), copy.deepcopy(first))
    assert "routes" not in stalled and "edges_ready" not in stalled  # the merge patch keeps them

"""The Application's events-only Role, in the pure builders: when it is built, what it
grants, whom it binds, and the pod settings that go with it (the real API server's verdict
is in test_operator_event_roles_envtest.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from operator_support import cluster_app

from mas.infra import identity
from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)


def _env(children: list[dict[str, Any]], name: str) -> dict[str, str]:
    [deployment] = [
        c for c in children if c["kind"] == "Deployment" and c["metadata"]["name"] == name
    ]
    return {
        e["name"]: e.get("value", "")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }


def _rbac(children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in children if c["kind"] in {"Role", "RoleBinding"}]


def test_one_role_that_only_creates_events_bound_to_every_agents_own_account() -> None:
    document = cluster_app()
    document["metadata"]["uid"] = "u-1"
    children = build_children(plan_application(document, "team-a"))
    role, binding = _rbac(children)
    assert [c["kind"] for c in children[:2]] == ["Role", "RoleBinding"]  # before the pods
    assert (role["kind"], role["metadata"]["name"]) == ("Role", "desk.events")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    assert (binding["kind"], binding["metadata"]["name"]) == ("RoleBinding", "desk.events")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "desk.events",
    }
    accounts = [c["metadata"]["name"] for c in children if c["kind"] == "ServiceAccount"]
    assert sorted(accounts) == ["desk-back", "desk-front"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "team-a"} for account in accounts
    ]
    for manifest in (role, binding):  # the Application's, no agent's
        labels = manifest["metadata"]["labels"]
        assert labels["maslab.io/application"] == "desk"
        assert "maslab.io/agent" not in labels
    env = _env(children, "desk-front")
    assert env[identity.DENIAL_EVENTS_ENV] == identity.DENIAL_EVENTS_ON
    assert env[identity.APPLICATION_UID_ENV] == "u-1"


def test_an_agent_called_events_cannot_take_the_roles_name() -> None:
    document = cluster_app()
    agents = document["spec"]["agency"]["agents"]
    agents["events"] = {}
    agents["front"]["spec"]["delegates_to"].append("events")
    document["spec"]["endpoints"]["events"] = {"usage": "deploy"}
    children = build_children(plan_application(document, "team-a"))
    names = Counter((c["kind"], c["metadata"]["name"]) for c in children)
    assert [key for key, n in names.items() if n > 1] == []
    assert ("ServiceAccount", "desk-events") in names
    [binding] = [c for c in children if c["kind"] == "RoleBinding"]
    assert binding["metadata"]["name"] == "desk.events"
    assert {s["name"] for s in binding["subjects"]} == {"desk-front", "desk-back", "desk-events"}


@pytest.mark.parametrize(
    ("runtime", "install"),
    [
        ({"denial_events": False}, True),  # the Application turns them off
        ({}, False),  # the install does (mas-operator run --no-denial-events)
        ({"service_account": "shared"}, True),  # an account the operator did not create
    ],
)
def test_no_role_and_no_events_when_off(runtime: dict[str, Any], install: bool) -> None:
    document = cluster_app()
    document["spec"]["runtime"] = {**document["spec"].get("runtime", {}), **runtime}
    children = build_children(plan_application(document, "team-a", denial_events=install))
    assert _rbac(children) == []
    assert identity.DENIAL_EVENTS_ENV not in _env(children, "desk-front")


def test_no_role_when_no_agent_is_deployed() -> None:
    document = cluster_app()
    document["spec"]["endpoints"] = {
        "front": {"usage": "use", "url": "http://front.example:8080"},
        "back": {"usage": "use", "url": "http://back.example:8080"},
    }
    plan = plan_application(document, "team-a")
    assert plan.agents == ()
    assert build_children(plan) == []

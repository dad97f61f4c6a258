"""The events-only Role of each agent, in the pure builders: when it is built, what it grants,
and the pod settings that go with it (the real API server's verdict is in
test_operator_event_roles_envtest.py)."""

from __future__ import annotations

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


def _rbac(children: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (c["kind"], c["metadata"]["name"]) for c in children if c["kind"] in {"Role", "RoleBinding"}
    ]


def test_each_agent_gets_a_role_that_only_creates_events_bound_to_its_own_account() -> None:
    document = cluster_app()
    document["metadata"]["uid"] = "u-1"
    children = build_children(plan_application(document, "team-a"))
    assert sorted(_rbac(children)) == [
        ("Role", "desk-back"),
        ("Role", "desk-front"),
        ("RoleBinding", "desk-back"),
        ("RoleBinding", "desk-front"),
    ]
    role = next(c for c in children if c["kind"] == "Role")
    name = role["metadata"]["name"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    binding = next(c for c in children if c["kind"] == "RoleBinding")
    assert binding["metadata"]["name"] == name
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": name,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "team-a"}]
    env = _env(children, "desk-front")
    assert env[identity.DENIAL_EVENTS_ENV] == identity.DENIAL_EVENTS_ON
    assert env[identity.APPLICATION_UID_ENV] == "u-1"


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

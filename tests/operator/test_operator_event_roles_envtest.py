"""The Application's events-only Role on a real API server (RBAC on): one Role and one
RoleBinding per Application, binding every agent's own ServiceAccount, granting each exactly
``create`` on Events in its namespace, gone when ``spec.runtime.denial_events`` is off.
What it grants is asked of the API server's own authorizer (SubjectAccessReview), not read
from the Role."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import Api, cluster_app, eventually, owned_children

from mas.infra import identity

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

AGENTS = ["desk-back", "desk-front"]
ROLE = ["desk.events"]
RBAC_GROUP = "rbac.authorization.k8s.io"


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def allowed(api: Api, account: str, verb: str, resource: str, **where: str) -> bool:
    """Whether the API server's authorizer lets ``account``'s tokens do it."""
    attributes = {"namespace": api.ns, "verb": verb, "resource": resource, **where}
    review = k8s.AuthorizationV1Api(api.client).create_subject_access_review(
        {
            "spec": {
                "user": identity.subject(api.ns, account),
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{api.ns}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            }
        }
    )
    return bool(review.status.allowed)


def test_each_agent_may_create_events_in_its_namespace_and_nothing_else(
    start_operator: Any, api: Api
) -> None:
    start_operator()
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(
        lambda: (c := owned_children(api, uid))["Role"] == ROLE and c["RoleBinding"] == ROLE,
        what="one Role and one RoleBinding, owned by the Application",
    )
    binding = k8s.RbacAuthorizationV1Api(api.client).read_namespaced_role_binding(ROLE[0], api.ns)
    assert sorted(s.name for s in binding.subjects) == AGENTS
    for account in AGENTS:
        assert allowed(api, account, "create", "events")
        refused = {
            "patch events": ("patch", "events", {}),
            "list events": ("list", "events", {}),
            "create events.k8s.io events": ("create", "events", {"group": "events.k8s.io"}),
            "create events elsewhere": ("create", "events", {"namespace": "default"}),
            "get secrets": ("get", "secrets", {}),
            "list pods": ("list", "pods", {}),
            "create pods": ("create", "pods", {}),
            "create serviceaccounts/token": (
                "create",
                "serviceaccounts",
                {"subresource": "token", "name": account},
            ),
            "get applications": ("get", "applications", {"group": "infra.maslab.io"}),
            "create rolebindings": (
                "create",
                "rolebindings",
                {"group": "rbac.authorization.k8s.io"},
            ),
        }
        granted = [
            what
            for what, (verb, resource, where) in refused.items()
            if allowed(api, account, verb, resource, **where)
        ]
        assert granted == [], account
    # the Deployment asks the agent to post them, naming the Application
    deployment = api.apps.read_namespaced_deployment("desk-front", api.ns)
    env = {e.name: e.value for e in deployment.spec.template.spec.containers[0].env}
    assert env[identity.DENIAL_EVENTS_ENV] == identity.DENIAL_EVENTS_ON
    assert env[identity.APPLICATION_UID_ENV] == uid


def test_denial_events_off_removes_the_role_and_the_right(start_operator: Any, api: Api) -> None:
    start_operator()
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(lambda: owned_children(api, uid)["RoleBinding"] == ROLE, what="the binding")
    spec = cluster_app()["spec"]
    spec["runtime"] = {**spec.get("runtime", {}), "denial_events": False}
    api.patch_spec("desk", spec)
    eventually(
        lambda: (c := owned_children(api, uid))["Role"] == [] and c["RoleBinding"] == [],
        what="the Role and RoleBinding to be pruned",
    )
    assert not allowed(api, "desk-front", "create", "events")

    def asked() -> bool:
        deployment = api.apps.read_namespaced_deployment("desk-front", api.ns)
        env = {e.name for e in deployment.spec.template.spec.containers[0].env}
        return identity.DENIAL_EVENTS_ENV not in env

    eventually(asked, what="the pods to stop posting Events")

"""Each agent's own ServiceAccount on a real API server: created, used, repaired, pruned."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import Api, cluster_app, eventually, owned_children

from mas.infra import identity
from mas.infra.models import Application
from mas.infra.wiring import wire
from mas.runtime.identity.cluster import console_principal

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

AGENTS = ["desk-back", "desk-front"]


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def test_pods_run_as_their_agents_own_account_with_the_a2a_token(
    start_operator: Any, api: Api
) -> None:
    start_operator()
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(
        lambda: owned_children(api, uid)["ServiceAccount"] == AGENTS,
        what="one ServiceAccount per deployed agent, owned by the Application",
    )
    for name in AGENTS:
        account = api.core.read_namespaced_service_account(name, api.ns)
        assert account.automount_service_account_token is False
    # the ServiceAccount admission plugin refuses a pod whose account does not exist
    pods = eventually(
        lambda: len(items := api.core.list_namespaced_pod(api.ns).items) == 2 and items,
        what="two pods admitted",
    )
    accounts = sorted(pod.spec.service_account_name for pod in pods)
    assert accounts == AGENTS
    for pod in pods:
        assert pod.spec.automount_service_account_token is False
        [token] = [v for v in pod.spec.volumes if v.projected is not None]
        ours, api_token, ca = token.projected.sources
        assert ours.service_account_token.audience == identity.AUDIENCE
        assert ours.service_account_token.expiration_seconds == identity.TOKEN_EXPIRY_SECONDS
        # the API-audience token (the API server's default) and the CA read the issuer's keys
        assert (api_token.service_account_token.path, ca.config_map.name) == (
            identity.API_TOKEN_FILE,
            "kube-root-ca.crt",
        )
    # one binding for them all: to the Application's Role, which may only create Events
    # (their denial Events; test_operator_event_roles_envtest.py checks what it grants)
    rbac = k8s.RbacAuthorizationV1Api(api.client)
    bound = sorted(
        (binding.role_ref.kind, binding.role_ref.name, s.name)
        for binding in rbac.list_namespaced_role_binding(api.ns).items
        for s in binding.subjects or []
        if s.kind == "ServiceAccount" and s.name in AGENTS
    )
    assert bound == [("Role", "desk.events", name) for name in AGENTS]


def test_a_deleted_account_comes_back_and_a_shared_one_prunes_them(
    start_operator: Any, api: Api
) -> None:
    start_operator(resync=60.0)  # the child watches repair it, not the resync
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(lambda: owned_children(api, uid)["ServiceAccount"] == AGENTS, what="two accounts")
    api.core.delete_namespaced_service_account("desk-front", api.ns)
    eventually(
        lambda: api.core.read_namespaced_service_account("desk-front", api.ns),
        what="the deleted ServiceAccount to come back",
    )
    api.core.create_namespaced_service_account(api.ns, {"metadata": {"name": "shared"}})
    spec = cluster_app()["spec"]
    spec["runtime"] = {"service_account": "shared"}
    api.patch_spec("desk", spec)
    eventually(
        lambda: owned_children(api, uid)["ServiceAccount"] == [],
        what="the per-agent ServiceAccounts to be pruned",
    )
    eventually(
        lambda: all(
            d.spec.template.spec.service_account_name == "shared" for d in api.deployments()
        ),
        what="the pods to run as the named account",
    )


def test_the_install_console_reaches_every_agents_admission(start_operator: Any, api: Api) -> None:
    console = "system:serviceaccount:mas-system:mas-operator-console"
    start_operator(console_principal=console)
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(
        lambda: owned_children(api, uid)["Deployment"] == AGENTS,
        what="the agents' Deployments",
    )
    app = Application.model_validate(cluster_app())
    routes = wire(cluster_app(), None, require_urls=False).routes
    for name in AGENTS:
        deployment = api.apps.read_namespaced_deployment(name, api.ns)
        env = {e.name: e.value for e in deployment.spec.template.spec.containers[0].env}
        # what mas-ctl serve in that pod reads, and whom the agent then admits
        admission = identity.admission(
            app, routes, name.removeprefix("desk-"), api.ns, console_principal(env)
        )
        rule = admission.admitted(console)
        assert rule is not None and rule.source == identity.CONSOLE_SOURCE, name

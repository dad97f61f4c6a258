"""The chart's console (``console.enabled``): what it renders, and, on a real API server, that
its ServiceAccount may read Applications and Events but no Secret, and that the console's
cluster source, running as that ServiceAccount, sees the Applications."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import cluster_app, helm_template

from mas.console.cluster_source import ClusterSource
from mas.infra import identity
from mas_operator.serviceaccounts import token_volume

pytestmark = pytest.mark.timeout(120)
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def console_objects(*args: str, namespace: str = "mas-system") -> list[dict[str, Any]]:
    return [
        o
        for o in helm_template("--set", "console.enabled=true", *args, namespace=namespace)
        if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "console"
    ]


def test_the_console_is_off_by_default() -> None:
    assert not [o for o in helm_template() if "console" in o["metadata"]["name"]]


def test_the_console_reads_applications_and_events_only() -> None:
    objects = console_objects("--set", "watchNamespaces={team-a,team-b}")
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ClusterRole", "Deployment", "RoleBinding", "RoleBinding", "ServiceAccount"]
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    assert role["rules"] == [
        {
            "apiGroups": ["infra.maslab.io"],
            "resources": ["applications"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    ]
    bound = {
        (o["metadata"]["namespace"], o["subjects"][0]["name"])
        for o in objects
        if o["kind"] == "RoleBinding"
    }
    assert bound == {("team-a", "mas-operator-console"), ("team-b", "mas-operator-console")}
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mas-operator-console"
    args = pod["containers"][0]["args"]
    assert args[:3] == ["console", "--cluster", "--in-cluster"]
    assert "--namespace=team-a" in args and "--host=127.0.0.1" in args
    # its pods are not the operator's: neither selector picks the other's pods
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "mas-operator-console"


def test_behind_a_proxy_it_listens_on_the_pod_behind_a_service() -> None:
    objects = console_objects(
        "--set",
        "console.auth.proxyRanges={10.0.0.0/8}",
        "--set",
        "console.traceUrl=http://j/{trace_id}",
    )
    args = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--host=0.0.0.0" in args
    assert "--trusted-proxy-header=X-Forwarded-User" in args
    assert "--trusted-proxy-range=10.0.0.0/8" in args
    assert "--trace-url=http://j/{trace_id}" in args
    service = next(o for o in objects if o["kind"] == "Service")
    assert service["spec"]["selector"]["app.kubernetes.io/name"] == "mas-operator-console"
    assert "ClusterRoleBinding" in {o["kind"] for o in objects}  # no namespaces: all


def _operator_args(*args: str) -> list[str]:
    objects = helm_template(*args, namespace="mas-system")
    deployment = next(
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "mas-operator"
    )
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def test_the_console_calls_agents_with_a_projected_token_of_its_own() -> None:
    deployment = next(o for o in console_objects() if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    [source] = volumes["a2a-token"]["projected"]["sources"]
    # the agents' conventions (mas_operator.serviceaccounts): audience, expiry, path
    agents_token = token_volume()[0]["projected"]["sources"][0]
    assert source == agents_token
    assert source["serviceAccountToken"]["audience"] == identity.AUDIENCE
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["a2a-token"] == {
        "name": "a2a-token",
        "mountPath": identity.TOKEN_DIR,
        "readOnly": True,
    }
    # beside it, the API token its watches need stays automounted
    assert pod.get("automountServiceAccountToken", True) is True


def test_the_operator_makes_agents_admit_the_console_unless_told_not_to() -> None:
    [account] = [o for o in console_objects() if o["kind"] == "ServiceAccount"]
    subject = identity.subject(account["metadata"]["namespace"], account["metadata"]["name"])
    assert subject == "system:serviceaccount:mas-system:mas-operator-console"
    assert f"--console-principal={subject}" in _operator_args("--set", "console.enabled=true")
    off = _operator_args("--set", "console.enabled=true", "--set", "console.admittedByAgents=false")
    assert not [a for a in off if a.startswith("--console-principal")]
    assert not [a for a in _operator_args() if a.startswith("--console-principal")]
    # the agents of the namespaces the console reads admit it, no others
    scoped = _operator_args("--set", "console.enabled=true", "--set", "console.namespaces={team-a}")
    assert "--console-namespace=team-a" in scoped
    assert not [
        a for a in _operator_args("--set", "console.enabled=true") if "console-namespace" in a
    ]


@pytest.mark.envtest
@pytest.mark.integration
async def test_the_console_service_account_reads_what_the_console_needs(
    control_plane: Any, crd_installed: Any, envtest_namespace: str
) -> None:
    release = f"mc-{uuid.uuid4().hex[:6]}"
    rendered = console_objects(
        "--set",
        f"console.namespaces={{{envtest_namespace}}}",
        "--set",
        f"fullnameOverride={release}",
        namespace=envtest_namespace,
    )
    objects = [o for o in rendered if o["kind"] in RBAC_KINDS]
    control_plane.apply_yaml(objects, namespace=envtest_namespace)
    # the API server accepts the console's Deployment, its projected token volume included
    [deployment] = control_plane.apply_yaml(
        [o for o in rendered if o["kind"] == "Deployment"], namespace=envtest_namespace
    )
    volumes = {v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert "a2a-token" in volumes
    try:
        core = k8s.CoreV1Api(control_plane.api_client())
        account = f"{release}-console"
        token = core.create_namespaced_service_account_token(
            account,
            envtest_namespace,
            k8s.AuthenticationV1TokenRequest(
                spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
            ),
        ).status.token
        as_sa = k8s.AuthorizationV1Api(control_plane.api_client(token))

        def allowed(verb: str, resource: str, group: str = "") -> bool:
            attributes = k8s.V1ResourceAttributes(
                namespace=envtest_namespace, verb=verb, resource=resource, group=group
            )
            review = k8s.V1SelfSubjectAccessReview(
                spec=k8s.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
            )
            return bool(as_sa.create_self_subject_access_review(review).status.allowed)

        assert allowed("watch", "applications", "infra.maslab.io")
        assert allowed("watch", "events")
        assert not allowed("get", "secrets")
        assert not allowed("update", "applications", "infra.maslab.io")
        assert not allowed("create", "deployments", "apps")

        k8s.CustomObjectsApi(control_plane.api_client()).create_namespaced_custom_object(
            "infra.maslab.io", "v1", envtest_namespace, "applications", cluster_app()
        )
        kubeconfig = control_plane.user_kubeconfig(token, name="console-sa")
        source = ClusterSource.connect([envtest_namespace], None, str(kubeconfig))
        with source.changes.subscribe() as changes:
            await source.start()
            try:
                async with asyncio.timeout(30):
                    while source.application(envtest_namespace, "desk") is None:
                        await changes.get()
            finally:
                await source.stop()
        view = source.application(envtest_namespace, "desk")
        assert view is not None and {a.id for a in view.agents} == {"front", "helper", "back"}
    finally:
        rbac = k8s.RbacAuthorizationV1Api(control_plane.api_client())
        for obj in objects:
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(obj["metadata"]["name"])
            elif obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(obj["metadata"]["name"])

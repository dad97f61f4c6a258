"""The Helm chart: no drift from crds/, least-privilege RBAC, and it works on a real server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from operator_support import (
    REPO,
    Api,
    cluster_app,
    eventually,
    helm_template,
    wait_condition,
)

from mas_operator.cli import build_parser
from mas_operator.handlers import COLD_EVERY

CHART = REPO / "charts" / "mas-operator"
pytestmark = pytest.mark.timeout(120)


def test_chart_crd_is_the_generated_crd() -> None:
    chart_crd = CHART / "crds" / "application.yaml"
    # a symlink to crds/application.yaml (helm follows it when templating and packaging)
    assert chart_crd.resolve() == (REPO / "crds" / "application.yaml").resolve()
    generated = yaml.safe_load((REPO / "crds" / "application.yaml").read_text())
    rendered = [
        o for o in helm_template("--include-crds") if o["kind"] == "CustomResourceDefinition"
    ]
    assert rendered == [generated]


def rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for o in objects if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]]


def test_rbac_lists_every_resource_and_verb_without_wildcards() -> None:
    objects = helm_template()
    for rule in rules(objects):
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert "resourceNames" not in rule or rule["resourceNames"]
    granted = {
        (g, r, v)
        for rule in rules(objects)
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("", "secrets", "get") in granted
    assert not {v for g, r, v in granted if r == "secrets"} - {"get"}  # never list or watch
    assert ("coordination.k8s.io", "leases", "update") in granted
    jobs = {v for g, r, v in granted if (g, r) == ("batch", "jobs")}
    assert jobs == {"list", "watch", "create", "delete"}  # a Job is never updated
    assert {v for g, r, v in granted if (g, r) == ("", "pods")} == {"list"}


def test_watched_namespaces_get_role_bindings_not_a_cluster_binding() -> None:
    objects = helm_template("--set", "watchNamespaces={team-a,team-b}")
    bindings = [
        (o["kind"], o["metadata"].get("namespace"), o["roleRef"]["name"])
        for o in objects
        if o["kind"].endswith("Binding")
    ]
    assert ("RoleBinding", "team-a", "mas-operator-reconcile") in bindings
    assert ("RoleBinding", "team-b", "mas-operator-reconcile") in bindings
    assert ("ClusterRoleBinding", None, "mas-operator-reconcile") not in bindings
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--all-namespaces" not in args


def test_the_operators_arguments_parse_and_carry_the_resync_values() -> None:
    """What the Deployment runs is what ``mas-operator run`` accepts, with the chart's
    ``resyncSeconds`` and ``coldEvery``."""
    objects = helm_template("--set", "resyncSeconds=20", "--set", "coldEvery=0")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["mas-operator"]
    parsed = build_parser().parse_args(container["args"])
    assert (parsed.resync, parsed.cold_every) == (20.0, 0)
    defaults = next(o for o in helm_template() if o["kind"] == "Deployment")
    args = defaults["spec"]["template"]["spec"]["containers"][0]["args"]
    assert build_parser().parse_args(args).cold_every == COLD_EVERY


def test_service_monitor_is_optional() -> None:
    assert "ServiceMonitor" not in {o["kind"] for o in helm_template()}
    objects = helm_template("--set", "metrics.serviceMonitor.enabled=true")
    monitor = next(o for o in objects if o["kind"] == "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_dockerfile_entry_points_exist_after_install() -> None:
    text = (REPO / "Dockerfile").read_text()
    from importlib.metadata import entry_points

    scripts = {e.name: e for e in entry_points(group="console_scripts")}
    for name in ("mas-operator", "mas-ctl"):
        assert name in text, f"the Dockerfile does not name {name}"
        assert name in scripts, f"{name} is not installed as a console script"
        assert callable(scripts[name].load())
    assert "USER 10001" in text


@pytest.mark.envtest
def test_rendered_chart_applies_as_a_server_side_dry_run(
    control_plane: Any, crd_installed: Any, envtest_namespace: str
) -> None:
    objects = helm_template(
        "--include-crds",
        "--set",
        f"watchNamespaces={{{envtest_namespace}}}",
        "--set",
        "conformance.test.enabled=true",
        namespace=envtest_namespace,
    )
    dyn = control_plane.dynamic_client()
    kinds = []
    for obj in objects:
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=namespace,
            field_manager="helm-dry-run",
            force_conflicts=True,
            dry_run="All",
        )
        kinds.append(obj["kind"])
    assert {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Job",  # the conformance test hook
    } <= set(kinds)
    with pytest.raises(k8s.ApiException) as caught:  # dry run: nothing was created
        k8s.AppsV1Api(control_plane.api_client()).read_namespaced_deployment(
            "mas-operator", envtest_namespace
        )
    assert caught.value.status == 404


@pytest.fixture
def chart_rbac(
    control_plane: Any, crd_installed: Any, envtest_namespace: str
) -> Iterator[tuple[str, str]]:
    """The chart's ServiceAccount and RBAC applied for real; yields (release, SA name)."""
    release = f"mo-{uuid.uuid4().hex[:6]}"
    objects = [
        o
        for o in helm_template(
            "--set",
            f"watchNamespaces={{{envtest_namespace}}}",
            "--set",
            f"fullnameOverride={release}",
            namespace=envtest_namespace,
        )
        if o["kind"]
        in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    control_plane.apply_yaml(objects, namespace=envtest_namespace)
    try:
        yield release, release
    finally:
        rbac = k8s.RbacAuthorizationV1Api(control_plane.api_client())
        for obj in objects:
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(obj["metadata"]["name"])
            elif obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(obj["metadata"]["name"])


@pytest.mark.envtest
def test_chart_rbac_suffices_for_a_full_reconcile(
    control_plane: Any,
    chart_rbac: tuple[str, str],
    envtest_namespace: str,
    start_operator: Any,
) -> None:
    _, service_account = chart_rbac
    core = k8s.CoreV1Api(control_plane.api_client())
    token = core.create_namespaced_service_account_token(
        service_account,
        envtest_namespace,
        k8s.AuthenticationV1TokenRequest(
            spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        ),
    ).status.token
    kubeconfig = control_plane.user_kubeconfig(token, name="operator-sa")
    as_sa = k8s.AuthorizationV1Api(control_plane.api_client(token))
    review = as_sa.create_self_subject_access_review(
        k8s.V1SelfSubjectAccessReview(
            spec=k8s.V1SelfSubjectAccessReviewSpec(
                resource_attributes=k8s.V1ResourceAttributes(
                    namespace=envtest_namespace, verb="list", resource="secrets"
                )
            )
        )
    )
    assert review.status.allowed is False  # least privilege: Secrets are only read one by one

    core.create_namespaced_secret(
        envtest_namespace,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="back-token"), string_data={"token": "s3cret"}),
    )
    start_operator(kubeconfig=str(kubeconfig))
    api = Api(control_plane.api_client(), envtest_namespace)
    app = cluster_app()
    app["spec"]["conformance"] = {"enabled": True}
    api.create(app)
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments made as the SA")
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to stand in for")
    ready = wait_condition(api, "desk", "Ready", "True")
    assert ready["reason"] == "AllAgentsReady"
    assert len(api.net.list_namespaced_network_policy(envtest_namespace).items) == 2
    managers = {f.manager for d in api.deployments() for f in d.metadata.managed_fields}
    assert "mas-operator" in managers

    # conformance Jobs: created, watched and deleted, their pods listed, all as the SA
    batch = k8s.BatchV1Api(control_plane.api_client())

    def jobs() -> list[Any]:
        selector = "maslab.io/conformance-agent"
        return list(batch.list_namespaced_job(envtest_namespace, label_selector=selector).items)

    eventually(lambda: len(jobs()) == 2, what="two conformance Jobs made as the SA")
    running = wait_condition(api, "desk", "Conformant", "Unknown")
    eventually(
        lambda: api.condition("desk", "Conformant")["reason"] == "ProbeRunning",
        what="ProbeRunning (the Jobs' pods listed)",
    )
    assert running["observedGeneration"] == 1
    app["spec"]["conformance"] = {"enabled": False}
    api.patch_spec("desk", app["spec"])
    eventually(lambda: jobs() == [], what="the Jobs deleted by the SA")

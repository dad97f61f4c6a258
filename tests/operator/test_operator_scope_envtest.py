"""A scoped install on the real API server: the chart's Roles and RoleBindings only, the
operator watching one namespace as the chart's ServiceAccount. It reconciles there, has no
write permission anywhere else, leaves an Application in an unlisted namespace alone and
names it once."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from operator_support import Api, eventually, helm_template, self_contained_app

from mas_operator.kube import Cluster

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.fixture
def unlisted(control_plane: Any) -> Iterator[str]:
    """A second namespace, not watched."""
    core = k8s.CoreV1Api(control_plane.api_client())
    name = f"u-{uuid.uuid4().hex[:10]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def scoped_identity(control_plane: Any, namespace: str, *values: str) -> tuple[Path, Any]:
    """The chart's RBAC for ``watchNamespaces={namespace}`` applied; a kubeconfig as its
    ServiceAccount, and a cleanup of the cluster-scoped objects."""
    release = f"ms-{uuid.uuid4().hex[:6]}"
    args = ("--set", f"watchNamespaces={{{namespace}}}", "--set", f"fullnameOverride={release}")
    rendered = helm_template(*args, *values, namespace=namespace)
    objects = [o for o in rendered if o["kind"] in RBAC_KINDS]
    control_plane.apply_yaml(objects, namespace=namespace)
    token = (
        k8s.CoreV1Api(control_plane.api_client())
        .create_namespaced_service_account_token(
            release,
            namespace,
            k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[])),
        )
        .status.token
    )

    def cleanup() -> None:
        rbac = k8s.RbacAuthorizationV1Api(control_plane.api_client())
        for obj in objects:
            if obj["kind"] == "ClusterRole":
                rbac.delete_cluster_role(obj["metadata"]["name"])
            elif obj["kind"] == "ClusterRoleBinding":
                rbac.delete_cluster_role_binding(obj["metadata"]["name"])

    kubeconfig = control_plane.user_kubeconfig(token, name=f"{release}-sa")
    return kubeconfig, (cleanup, token)


def allowed(client: Any, verb: str, resource: str, namespace: str | None, group: str = "") -> bool:
    review = k8s.AuthorizationV1Api(client).create_self_subject_access_review(
        k8s.V1SelfSubjectAccessReview(
            spec=k8s.V1SelfSubjectAccessReviewSpec(
                resource_attributes=k8s.V1ResourceAttributes(
                    namespace=namespace, verb=verb, resource=resource, group=group
                )
            )
        )
    )
    return bool(review.status.allowed)


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


@pytest.mark.usefixtures("crd_installed")
def test_a_scoped_operator_reconciles_its_namespace_and_names_others_once(
    control_plane: Any,
    envtest_namespace: str,
    unlisted: str,
    start_operator: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mas_operator.scopes")
    kubeconfig, (cleanup, token) = scoped_identity(control_plane, envtest_namespace)
    try:
        as_sa = control_plane.api_client(token)
        for verb in ("create", "patch", "delete"):
            assert not allowed(as_sa, verb, "deployments", unlisted, "apps")
            assert not allowed(as_sa, verb, "applications", unlisted, "infra.maslab.io")
            assert not allowed(as_sa, verb, "deployments", None, "apps")  # cluster-wide
        assert not allowed(as_sa, "list", "namespaces", None)
        assert not allowed(as_sa, "get", "secrets", unlisted)
        assert allowed(as_sa, "list", "applications", None, "infra.maslab.io")  # read only
        assert allowed(as_sa, "create", "deployments", envtest_namespace, "apps")

        admin = control_plane.api_client()
        watched, elsewhere = Api(admin, envtest_namespace), Api(admin, unlisted)
        elsewhere.create(self_contained_app())
        start_operator(kubeconfig=str(kubeconfig), resync=1.0)
        watched.create(self_contained_app())
        eventually(lambda: len(watched.deployments()) == 2, what="two Deployments, as the SA")

        named = f"Application {unlisted}/desk is left alone"
        eventually(lambda: lines(caplog, named), what="the unwatched Application named")
        other = self_contained_app()
        other["metadata"]["name"] = "other"
        elsewhere.create(other)
        eventually(
            lambda: lines(caplog, f"Application {unlisted}/other is left alone"),
            what="a second unwatched Application named (a later pass)",
        )
        assert len(lines(caplog, named)) == 1  # once, not once per pass
        assert f"watches only {envtest_namespace}" in lines(caplog, named)[0]
        assert elsewhere.deployments() == []
        assert "status" not in elsewhere.get("desk")
        assert (
            elsewhere.core.list_namespaced_config_map(
                unlisted, label_selector="app.kubernetes.io/managed-by=mas-operator"
            ).items
            == []
        )
    finally:
        cleanup()


@pytest.mark.usefixtures("crd_installed")
def test_without_the_read_only_cluster_role_it_says_once_that_it_cannot_look(
    control_plane: Any,
    envtest_namespace: str,
    start_operator: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mas_operator.scopes")
    kubeconfig, (cleanup, token) = scoped_identity(
        control_plane, envtest_namespace, "--set", "scope.reportUnwatched=false"
    )
    try:
        as_sa = control_plane.api_client(token)
        assert not allowed(as_sa, "list", "applications", None, "infra.maslab.io")
        start_operator(kubeconfig=str(kubeconfig), resync=1.0)
        watched = Api(control_plane.api_client(), envtest_namespace)
        watched.create(self_contained_app())
        eventually(lambda: len(watched.deployments()) == 2, what="two Deployments, as the SA")
        said = eventually(
            lambda: lines(caplog, "may not list Applications elsewhere"), what="the notice"
        )
        assert len(said) == 1
        assert f"watches only {envtest_namespace}" in said[0]
    finally:
        cleanup()


@pytest.mark.usefixtures("crd_installed")
def test_discovery_tells_a_served_crd_from_a_missing_one(control_plane: Any) -> None:
    cluster = Cluster(control_plane.api_client())
    assert cluster.serves("infra.maslab.io", "v1", "applications")
    assert not cluster.serves("infra.maslab.io", "v1", "nothings")
    assert not cluster.serves("absent.maslab.io", "v1", "applications")  # 404

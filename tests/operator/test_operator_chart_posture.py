"""The operator's own posture in the chart: readiness, a disruption budget, spread, a
NetworkPolicy and measured resource requests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from operator_support import REPO, helm_template, require_helm

pytestmark = pytest.mark.timeout(120)


def only(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "Deployment")[0]["spec"]["template"]["spec"]
    return spec


def test_the_operator_is_probed_for_readiness_on_its_health_port() -> None:
    container = pod_spec(helm_template())["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "healthz"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert container["resources"]["requests"] == {
        "cpu": "100m",
        "memory": "256Mi",
        "ephemeral-storage": "64Mi",
    }
    assert "cpu" not in container["resources"]["limits"]


def test_two_replicas_get_a_budget_and_one_does_not() -> None:
    objects = helm_template()
    budget = only(objects, "PodDisruptionBudget")[0]
    selector = only(objects, "Deployment")[0]["spec"]["selector"]
    assert budget["spec"]["selector"] == selector
    assert budget["spec"]["maxUnavailable"] == 1
    assert only(helm_template("--set", "replicaCount=1"), "PodDisruptionBudget") == []
    off = helm_template("--set", "podDisruptionBudget.enabled=false")
    assert only(off, "PodDisruptionBudget") == []


def test_replicas_are_spread_and_kept_apart() -> None:
    objects = helm_template()
    spec = pod_spec(objects)
    labels = only(objects, "Deployment")[0]["spec"]["selector"]["matchLabels"]
    keys = [c["topologyKey"] for c in spec["topologySpreadConstraints"]]
    assert keys == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    assert all(
        c["labelSelector"]["matchLabels"] == labels for c in spec["topologySpreadConstraints"]
    )
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    own = helm_template("--set", "affinity.nodeAffinity.foo=bar")
    assert pod_spec(own)["affinity"] == {"nodeAffinity": {"foo": "bar"}}  # theirs, as given


def test_network_policy_allows_dns_and_the_api_server_out_and_metrics_in() -> None:
    objects = helm_template(
        "--set",
        "networkPolicy.apiServer.cidrs={10.0.0.1/32}",
        "--set",
        "tracing.endpoint=https://otel.observability",
    )
    policy = only(objects, "NetworkPolicy")[0]["spec"]
    assert policy["podSelector"] == only(objects, "Deployment")[0]["spec"]["selector"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert [r["ports"] for r in policy["ingress"]] == [
        [{"protocol": "TCP", "port": 9090}],
        [{"protocol": "TCP", "port": 8080}],
    ]
    dns, api, tracing = policy["egress"]
    assert dns == {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    assert api == {
        "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}],
        "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
    }
    assert tracing == {"ports": [{"protocol": "TCP", "port": 443}]}
    assert only(helm_template("--set", "networkPolicy.enabled=false"), "NetworkPolicy") == []


def test_a_scoped_install_has_no_cluster_wide_write() -> None:
    objects = helm_template("--set", "watchNamespaces={team-a,team-b}")
    cluster_roles = only(objects, "ClusterRole")
    assert [r["metadata"]["name"] for r in cluster_roles] == ["mas-operator-unwatched"]
    assert cluster_roles[0]["rules"] == [
        {"apiGroups": ["infra.maslab.io"], "resources": ["applications"], "verbs": ["list"]}
    ]
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in only(objects, "Role")}
    assert {("team-a", "mas-operator-reconcile"), ("team-b", "mas-operator-reconcile")} <= roles
    for binding in only(objects, "RoleBinding"):
        assert binding["roleRef"]["kind"] == "Role"
    bare = helm_template(
        "--set", "watchNamespaces={team-a}", "--set", "scope.reportUnwatched=false"
    )  # fmt: skip
    assert only(bare, "ClusterRole") == [] and only(bare, "ClusterRoleBinding") == []
    everywhere = {r["metadata"]["name"] for r in only(helm_template(), "ClusterRole")}
    assert everywhere == {"mas-operator-reconcile", "mas-operator-observe"}


@pytest.fixture
def published_api_server(control_plane: Any) -> Iterator[tuple[str, int]]:
    """The kubernetes Service's EndpointSlice, which envtest's API server (no endpoint
    reconciler: it advertises loopback) does not write: published as the node tier does,
    at a documentation address and the API server's real port."""
    port = urlsplit(control_plane.server_url).port
    assert port is not None
    discovery = k8s.DiscoveryV1Api(control_plane.api_client())
    meta = k8s.V1ObjectMeta(name="kubernetes", labels={"kubernetes.io/service-name": "kubernetes"})
    slice_ = k8s.V1EndpointSlice(
        metadata=meta,
        address_type="IPv4",
        endpoints=[k8s.V1Endpoint(addresses=["192.0.2.10"], conditions={"ready": True})],
        ports=[k8s.DiscoveryV1EndpointPort(name="https", port=port, protocol="TCP")],
    )
    discovery.create_namespaced_endpoint_slice("default", slice_)
    yield "192.0.2.10", port
    discovery.delete_namespaced_endpoint_slice("kubernetes", "default")


@pytest.mark.envtest
@pytest.mark.usefixtures("crd_installed")
def test_at_install_the_policy_names_the_api_servers_endpoints(
    control_plane: Any, envtest_namespace: str, published_api_server: tuple[str, int]
) -> None:
    """``helm install --dry-run=server`` reads the cluster (helm lookup): the operator's
    egress goes to the kubernetes Service's endpoints, address and port, as a pod's
    traffic reaches them after the Service's translation."""
    address, port = published_api_server
    argv = [str(require_helm()), "install", "mas-operator", str(REPO / "charts" / "mas-operator")]
    argv += ["--namespace", envtest_namespace, "--kubeconfig", str(control_plane.kubeconfig_path)]
    done = subprocess.run(
        [*argv, "--skip-crds", "--dry-run=server"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    manifest = done.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
    objects = [d for d in yaml.safe_load_all(manifest) if d]
    api = only(objects, "NetworkPolicy")[0]["spec"]["egress"][1]
    assert api == {
        "ports": [{"protocol": "TCP", "port": port}],
        "to": [{"ipBlock": {"cidr": f"{address}/32"}}],
    }

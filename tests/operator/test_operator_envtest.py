"""The operator against a real kube-apiserver, etcd and kube-controller-manager.

No kubelet runs here, so pods never start: where a test needs ready replicas it marks the
pods Ready through the pods/status subresource, standing in for the kubelet (the
ReplicaSet and Deployment controllers then compute readiness as in a real cluster).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from operator_support import GROUP, PLURAL, VERSION, eventually

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "agency.yaml"


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


class Api:
    """The clients one test uses."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.ns = namespace
        self.client = client
        self.custom = k8s.CustomObjectsApi(client)
        self.core = k8s.CoreV1Api(client)
        self.apps = k8s.AppsV1Api(client)
        self.net = k8s.NetworkingV1Api(client)

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, doc, field_validation="Strict"
            )
        )

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name))

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        body = self.get(name)
        body["spec"] = spec
        self.custom.replace_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, body)

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        status = self.get(name).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)

    def deployments(self) -> list[Any]:
        return list(self.apps.list_namespaced_deployment(self.ns).items)

    def mark_pods_ready(self) -> int:
        """Stand in for the kubelet: report every pod of the namespace Running and Ready."""
        marked = 0
        for pod in self.core.list_namespaced_pod(self.ns).items:
            stamp = "2026-01-01T00:00:00Z"
            status = {
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": stamp},
                    ],
                }
            }
            self.core.patch_namespaced_pod_status(pod.metadata.name, self.ns, status)
            marked += 1
        return marked


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def test_example_converges_with_owned_children_and_status(start_operator: Any, api: Api) -> None:
    start_operator()
    created = api.create(example())
    uid = created["metadata"]["uid"]

    def children() -> bool:
        return len(api.deployments()) == 2

    eventually(children, what="two Deployments")
    for dep in api.deployments():
        refs = dep.metadata.owner_references
        assert [(r.kind, r.name, r.uid, r.controller) for r in refs] == [
            ("Application", "research-desk", uid, True)
        ]
    eventually(lambda: api.mark_pods_ready() == 2, what="two pods to mark ready")
    ready = eventually(
        lambda: (c := api.condition("research-desk", "Ready")) and c["status"] == "True" and c,
        what="Ready=True",
    )
    assert ready["reason"] == "AllAgentsReady"
    status = api.get("research-desk")["status"]
    assert status["phase"] == "Ready"
    assert status["agents_ready"] == "2/2"

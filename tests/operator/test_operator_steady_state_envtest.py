"""A reconcile of an Application that nothing changed writes nothing (real kube-apiserver).

The reconciles run in-process on a :class:`~mas_operator.kube.Cluster` that counts its
writes and passes every call on to the real API server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from operator_support import Api, cluster_app, eventually

from mas_operator.kube import Cluster
from mas_operator.reconcile import reconcile

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]


@dataclass
class CountingCluster(Cluster):
    """The real cluster client, counting the writes it makes."""

    writes: Counter[str] = field(default_factory=Counter)

    def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        self.writes[f"apply {manifest['kind']}"] += 1
        return super().apply(manifest)

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.writes["status"] += 1
        super().patch_status(namespace, name, status)


@pytest.fixture
def api(control_plane: Any, crd_installed: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def test_a_second_reconcile_of_an_unchanged_application_writes_nothing(
    control_plane: Any, api: Api
) -> None:
    cluster = CountingCluster(control_plane.api_client())
    api.create(cluster_app())
    first = reconcile(cluster, api.get("desk"))
    children = sum(n for key, n in cluster.writes.items() if key.startswith("apply "))
    assert children == sum(first.applied.values()) > 0
    assert cluster.writes["status"] == 1

    # The controller manager annotates each new Deployment with its revision: a change of
    # its metadata, which the next reconcile applies over once.
    eventually(
        lambda: all(
            "deployment.kubernetes.io/revision" in (d.metadata.annotations or {})
            for d in api.deployments()
        ),
        what="the Deployments' revision annotations",
    )
    settled = reconcile(cluster, api.get("desk"), last=first.last_applied)
    assert set(settled.applied) <= {"Deployment"}

    cluster.writes.clear()
    second = reconcile(cluster, api.get("desk"), last=settled.last_applied)
    assert dict(cluster.writes) == {}
    assert second.applied == {}
    assert second.phase == first.phase

    # Someone edits one child: only that one is applied again, and it is restored.
    api.core.patch_namespaced_config_map("desk-front", api.ns, {"data": {"agent": "mallory"}})
    third = reconcile(cluster, api.get("desk"), last=second.last_applied)
    assert dict(cluster.writes) == {"apply ConfigMap": 1}
    assert third.applied == {"ConfigMap": 1}
    assert api.core.read_namespaced_config_map("desk-front", api.ns).data["agent"] == "front"

    # A changed spec is applied (the children it changes, and the status).
    cluster.writes.clear()
    spec = api.get("desk")["spec"]
    spec["agency"]["agents"]["front"]["spec"]["description"] = "the front desk"
    api.patch_spec("desk", spec)
    reconcile(cluster, api.get("desk"), last=third.last_applied)
    assert cluster.writes["status"] == 1
    assert sum(n for key, n in cluster.writes.items() if key.startswith("apply ")) >= 1


def test_without_the_memory_of_the_last_apply_everything_is_applied_again(
    control_plane: Any, api: Api
) -> None:
    cluster = CountingCluster(control_plane.api_client())
    api.create(cluster_app())
    first = reconcile(cluster, api.get("desk"))
    cluster.writes.clear()
    again = reconcile(cluster, api.get("desk"))  # an operator that just restarted
    assert again.applied == first.applied
    assert sum(n for key, n in cluster.writes.items() if key.startswith("apply ")) == sum(
        first.applied.values()
    )
    # The status it would write is the one there (only the controller manager may have
    # changed the Deployments since).
    assert cluster.writes["status"] == 0

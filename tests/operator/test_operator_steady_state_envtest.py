"""A reconcile of an Application that nothing changed writes nothing (real kube-apiserver).

The reconciles run in-process on a :class:`~mas_operator.kube.Cluster` that counts its
writes and passes every call on to the real API server; the last test runs the whole
operator in-process.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from operator_support import Api, cluster_app, eventually, wait_condition

from mas_operator.kube import Cluster
from mas_operator.noops import merge_patch
from mas_operator.reconcile import reconcile

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]


@dataclass
class CountingCluster(Cluster):
    """The real cluster client, counting the writes it makes."""

    writes: Counter[str] = field(default_factory=Counter)

    def apply(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        self.writes[f"apply {manifest['kind']}"] += 1
        return super().apply(manifest)

    def patch_status(
        self, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        self.writes["status"] += 1
        return super().patch_status(namespace, name, status)


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


def without_stamps(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` without the conditions' ``lastTransitionTime`` (a time, not a state)."""
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return out


def test_a_reconcile_queued_behind_the_first_does_not_write_its_status_again(
    start_operator: Any, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every status write the operator makes changes the state it reports.

    The applies are slowed so that the watch events of the children arrive before their
    applies are known as the operator's own: the Application is marked dirty, and the
    reconcile that queues for it starts from the copy before the first status write
    (before: it wrote the same status again, with new lastTransitionTimes).
    """
    apply, patch_status = Cluster.apply, Cluster.patch_status
    wasted: list[dict[str, Any]] = []
    writes: list[str] = []

    def slow_apply(self: Cluster, manifest: Mapping[str, Any]) -> dict[str, Any]:
        result = apply(self, manifest)
        time.sleep(0.3)
        return result

    def judged_patch_status(
        self: Cluster, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        before = api.get(name).get("status") or {}
        if without_stamps(merge_patch(before, status)) == without_stamps(before):
            wasted.append(dict(status))
        writes.append(name)
        return patch_status(self, namespace, name, status)

    monkeypatch.setattr(Cluster, "apply", slow_apply)
    monkeypatch.setattr(Cluster, "patch_status", judged_patch_status)
    op = start_operator(resync=60.0)  # no full pass: only the dirty marks reconcile again
    api.create(cluster_app())
    wait_condition(api, "desk", "Wired", "True", timeout=60)
    metrics = op.handle.metrics

    def reconciles() -> float:
        samples = [s for family in metrics.reconciles.collect() for s in family.samples]
        return sum(s.value for s in samples if s.name.endswith("_total"))

    eventually(
        lambda: reconciles() >= 2,
        timeout=60,
        what="the reconcile the children's events queued",
    )
    assert writes and wasted == []

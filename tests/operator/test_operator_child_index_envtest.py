"""The operator reads an Application's children from its watches (real kube-apiserver).

A reconcile used to LIST every child kind of its Application; it now reads kopf's indexes
over the child watches (:mod:`mas_operator.indexes`). These tests run the whole operator
in-process and count, on the real client, the LISTs of children its reconciles make.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from operator_support import (
    Api,
    cluster_app,
    eventually,
    owned_children,
    reconciles,
    self_contained_app,
    total,
    wait_condition,
)

from mas_operator.children import ChildKind
from mas_operator.kube import Cluster

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]


@pytest.fixture
def api(control_plane: Any, crd_installed: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The child LISTs every :class:`Cluster` makes, by kind (each still goes to the server)."""
    counts: Counter[str] = Counter()
    real = Cluster.list_children

    def counting(
        self: Cluster, kind: ChildKind, namespace: str, selector: str
    ) -> list[dict[str, Any]]:
        counts[kind.kind] += 1
        return real(self, kind, namespace, selector)

    monkeypatch.setattr(Cluster, "list_children", counting)
    return counts


def test_resync_passes_list_no_children(
    start_operator: Any, api: Api, listed: Counter[str]
) -> None:
    op = start_operator(resync=0.5)
    api.create(cluster_app())
    wait_condition(api, "desk", "Wired", "True")
    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    settled = reconciles(op.handle.metrics)
    eventually(
        lambda: reconciles(op.handle.metrics) >= settled + 3, what="three more resync passes"
    )
    assert dict(listed) == {}


def test_a_restarted_operator_sees_the_children_that_exist(start_operator: Any, api: Api) -> None:
    """It deletes the children the plan dropped while it was down (it has no memory of
    them but its indexes)."""
    first = start_operator()
    uid = api.create(cluster_app())["metadata"]["uid"]
    eventually(
        lambda: len(owned_children(api, uid)["NetworkPolicy"]) == 2, what="two NetworkPolicies"
    )
    first.stop()
    doc = cluster_app()
    doc["spec"]["runtime"] = {"network_policy": {"enabled": False}}
    api.patch_spec("desk", doc["spec"])
    start_operator(resync=60.0)  # its start, not a resync, must find them
    eventually(
        lambda: owned_children(api, uid)["NetworkPolicy"] == [],
        what="the NetworkPolicies to be deleted",
    )
    assert owned_children(api, uid)["Deployment"] == ["desk-back", "desk-front"]


def test_an_idle_operator_reconciles_nothing(start_operator: Any, api: Api) -> None:
    """Once nothing changes, full resync passes leave a self-contained Application alone;
    an edit of one of its children is still repaired at once."""
    op = start_operator(resync=0.5)
    api.create(self_contained_app())
    wait_condition(api, "desk", "Wired", "True")
    metrics = op.handle.metrics
    quiet: dict[str, int] = {}

    def three_quiet_passes() -> bool:
        # Restart the count whenever a reconcile happens (the controller manager updates the
        # new Deployments' status for a while); before the change every pass reconciled.
        now = reconciles(metrics), total(metrics.resync_passes)
        if quiet.get("reconciles") != now[0]:
            quiet.update(reconciles=now[0], passes=now[1])
        return now[1] - quiet["passes"] >= 3

    eventually(three_quiet_passes, what="three full resync passes without a reconcile")
    assert total(metrics.resync_settled) >= 3

    api.core.patch_namespaced_config_map("desk-front", api.ns, {"data": {"agent": "mallory"}})
    eventually(
        lambda: api.core.read_namespaced_config_map("desk-front", api.ns).data["agent"] == "front",
        what="the edited ConfigMap to be restored",
    )

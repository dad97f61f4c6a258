"""Spread, disruption budgets and node-loss tolerations of agent pods (pure builders)."""

from __future__ import annotations

from typing import Any

import pytest
from test_operator_builders import by_kind, cluster_app

from mas.infra.errors import ApplicationInvalid
from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)


def children(**runtime: Any) -> list[dict[str, Any]]:
    app = cluster_app()
    app["spec"]["runtime"] = {**app["spec"]["runtime"], "autoscaling": False, **runtime}
    return build_children(plan_application(app))


def pod_specs(built: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["spec"]["template"]["spec"] for d in by_kind(built, "Deployment")]


def test_a_single_replica_gets_neither_budget_nor_spread() -> None:
    built = children(replicas=1)
    assert by_kind(built, "PodDisruptionBudget") == []
    assert all("topologySpreadConstraints" not in spec for spec in pod_specs(built))
    assert all("affinity" not in spec for spec in pod_specs(built))
    for deployment in by_kind(built, "Deployment"):
        ignored = deployment["metadata"]["annotations"]["kube-score/ignore"].split(",")
        assert "deployment-replicas" in ignored  # one replica is the Application's choice


def test_every_checkov_skip_names_a_check_and_a_reason() -> None:
    for deployment in by_kind(children(), "Deployment"):
        annotations = deployment["metadata"]["annotations"]
        skips = [v for k, v in annotations.items() if k.startswith("checkov.io/skip")]
        assert [s.split("=", 1)[0] for s in skips] == ["CKV_K8S_11", "CKV_K8S_15", "CKV_K8S_43"]
        assert all(len(s.split("=", 1)[1]) > 20 for s in skips)


@pytest.mark.parametrize("runtime", [{"replicas": 2}, {"replicas": 5}, {"autoscaling": True}])
def test_replicated_agents_get_a_budget_after_their_deployment_and_spread(
    runtime: dict[str, Any],
) -> None:
    built = children(**runtime)
    kinds = [c["kind"] for c in built if c["metadata"]["name"] == "desk-concierge"]
    assert kinds.index("PodDisruptionBudget") == kinds.index("Deployment") + 1
    budgets = {b["metadata"]["name"]: b["spec"] for b in by_kind(built, "PodDisruptionBudget")}
    assert sorted(budgets) == ["desk-concierge", "desk-researcher"]
    assert budgets["desk-researcher"] == {
        "maxUnavailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {
            "matchLabels": {"maslab.io/application": "desk", "maslab.io/agent": "researcher"}
        },
    }
    for deployment in by_kind(built, "Deployment"):
        selector = deployment["spec"]["selector"]["matchLabels"]
        spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert [c["topologyKey"] for c in spread] == [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
        ]
        assert all(c["labelSelector"]["matchLabels"] == selector for c in spread)
        assert {c["whenUnsatisfiable"] for c in spread} == {"ScheduleAnyway"}
        anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
        [preferred] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert preferred["podAffinityTerm"] == {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": selector},
        }
        assert "requiredDuringSchedulingIgnoredDuringExecution" not in anti
        ignored = deployment["metadata"]["annotations"]["kube-score/ignore"].split(",")
        assert "deployment-replicas" not in ignored  # replicated: nothing to excuse


def test_node_loss_tolerations_default_to_30_seconds_and_follow_the_application() -> None:
    for spec in pod_specs(children()):
        assert spec["tolerations"] == [
            {
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 30,
            }
            for taint in ("unreachable", "not-ready")
        ]
    for spec in pod_specs(children(node_loss_toleration_seconds=5)):
        assert {t["tolerationSeconds"] for t in spec["tolerations"]} == {5}


@pytest.mark.parametrize("value", [-1, 3601, "soon"])
def test_a_bad_toleration_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ApplicationInvalid) as refused:
        children(node_loss_toleration_seconds=value)
    assert "spec.runtime.node_loss_toleration_seconds" in str(refused.value)

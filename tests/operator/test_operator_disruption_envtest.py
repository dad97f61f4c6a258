"""Replicated agents on the real API server: a PodDisruptionBudget owned by the Application,
spread across nodes and zones, and tolerations of a lost node; a single replica gets neither
budget nor spread, and the budget goes when an agent drops to one replica."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client import ApiException
from operator_support import Api, cluster_app, eventually

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]

AGENTS = ("desk-back", "desk-front")


@pytest.fixture
def api(control_plane: Any, envtest_namespace: str) -> Api:
    return Api(control_plane.api_client(), envtest_namespace)


def budgets(api: Api) -> dict[str, Any]:
    policy = k8s.PolicyV1Api(api.client)
    return {b.metadata.name: b for b in policy.list_namespaced_pod_disruption_budget(api.ns).items}


def replicated(replicas: int, **runtime: Any) -> dict[str, Any]:
    doc = cluster_app()
    doc["spec"]["runtime"] = {"replicas": replicas, **runtime}
    return doc


def pod_spec(api: Api, name: str) -> Any:
    return api.apps.read_namespaced_deployment(name, api.ns).spec.template.spec


def test_two_replicas_get_a_budget_and_spread_and_lose_them_at_one(
    start_operator: Any, api: Api
) -> None:
    start_operator()
    created = api.create(replicated(2))
    uid = created["metadata"]["uid"]
    found = eventually(lambda: budgets(api) if len(budgets(api)) == 2 else None, what="2 PDBs")
    assert sorted(found) == list(AGENTS)
    for budget in found.values():
        assert budget.spec.max_unavailable == 1
        assert budget.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
        assert [r.uid for r in budget.metadata.owner_references] == [uid]
    assert found["desk-front"].spec.selector.match_labels == {
        "maslab.io/application": "desk",
        "maslab.io/agent": "front",
    }
    spec = eventually(lambda: pod_spec(api, "desk-front"), what="the front Deployment")
    spread = {c.topology_key: c for c in spec.topology_spread_constraints}
    assert sorted(spread) == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    assert {c.when_unsatisfiable for c in spread.values()} == {"ScheduleAnyway"}
    assert spread["kubernetes.io/hostname"].label_selector.match_labels == {
        "maslab.io/application": "desk",
        "maslab.io/agent": "front",
    }
    anti = spec.affinity.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution
    assert anti[0].pod_affinity_term.topology_key == "kubernetes.io/hostname"
    assert {(t.key, t.toleration_seconds) for t in spec.tolerations} == {
        ("node.kubernetes.io/unreachable", 30),
        ("node.kubernetes.io/not-ready", 30),
    }

    api.patch_spec("desk", replicated(1, node_loss_toleration_seconds=10)["spec"])
    eventually(lambda: budgets(api) == {}, what="the PDBs deleted at one replica")

    def single() -> Any:
        spec = pod_spec(api, "desk-front")
        spread = spec.topology_spread_constraints or spec.affinity
        return spec if spread is None else None

    spec = eventually(single, what="the spread removed at one replica")
    assert {t.toleration_seconds for t in spec.tolerations} == {10}


def test_the_budget_lets_one_ready_pod_be_evicted_at_a_time(start_operator: Any, api: Api) -> None:
    start_operator()
    doc = replicated(2)
    del doc["spec"]["endpoints"]["back"]  # one deployed agent: front
    doc["spec"]["agency"]["agents"]["front"]["spec"]["delegates_to"] = ["helper"]
    api.create(doc)

    def pods() -> list[Any]:
        selector = "maslab.io/agent=front"
        return list(api.core.list_namespaced_pod(api.ns, label_selector=selector).items)

    eventually(lambda: len(pods()) == 2, what="the two pods the ReplicaSet makes")
    api.mark_pods_ready()

    def allowed(count: int) -> bool:
        status = budgets(api)["desk-front"].status
        return status is not None and status.disruptions_allowed == count

    # the disruption controller (kube-controller-manager) counts the ready pods
    eventually(lambda: allowed(1), what="the budget to allow one disruption")
    first, second = (p.metadata.name for p in pods()[:2])
    evict = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=first, namespace=api.ns))
    api.core.create_namespaced_pod_eviction(first, api.ns, evict)
    eventually(lambda: allowed(0), what="the budget to allow no more disruption")
    evict = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=second, namespace=api.ns))
    with pytest.raises(ApiException) as refused:
        api.core.create_namespaced_pod_eviction(second, api.ns, evict)
    assert refused.value.status == 429  # what `kubectl drain` waits on and retries
    assert "disruption budget" in refused.value.body

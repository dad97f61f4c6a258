"""``build_disruption_budget``: a replicated agent keeps serving through voluntary disruptions.

A drain (``kubectl drain``, a node upgrade, the cluster autoscaler removing a node) evicts
pods through the Eviction API, which honours PodDisruptionBudgets. A replicated agent
(:func:`mas_operator.scheduling.spread_out`) gets one with ``maxUnavailable: 1``: one pod
at a time is evicted, and the next only once its replacement is Ready. ``maxUnavailable``,
not ``minAvailable``, so the budget scales with the replicas an autoscaler sets and never
blocks a drain outright (even at one replica one eviction is allowed); and
``unhealthyPodEvictionPolicy: AlwaysAllow``, so a pod that is not Ready (crash-looping,
stuck starting) never holds up a drain: the budget protects serving pods only. A single replica
gets no budget (:mod:`mas_operator.scheduling` says what a drain costs it).

:func:`serving_floor` is what the budget keeps serving, and what the operator's ``Ready``
asks of an agent (:mod:`mas_operator.reconcile`): all but one of several replicas, so a
drain that evicts within the budget leaves the Application Ready; the one of a single
replica.
"""

from __future__ import annotations

from typing import Any

from mas_operator.names import child_labels, selector_labels
from mas_operator.plan import AgentPlan, Plan
from mas_operator.scheduling import spread_out

MAX_UNAVAILABLE = 1


def serving_floor(replicas: int) -> int:
    """The ready pods an agent of ``replicas`` keeps through the disruptions its budget allows.

    Every Deployment of two or more replicas has a budget (its agent is spread out: two or
    more replicas, or autoscaled); one of a single replica has none (an autoscaled agent at
    one replica keeps its budget, which then allows the eviction of its only pod).
    """
    return replicas - MAX_UNAVAILABLE if replicas >= 2 else replicas


def build_disruption_budget(plan: Plan, agent: AgentPlan) -> dict[str, Any] | None:
    """The PodDisruptionBudget of one deployed agent, or ``None`` for a single replica."""
    if not spread_out(plan.app.spec.runtime):
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": agent.name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "spec": {
            "maxUnavailable": MAX_UNAVAILABLE,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": {"matchLabels": selector_labels(plan.name, agent.agent)},
        },
    }

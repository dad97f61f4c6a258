"""Where an agent's pods run and how long they stay on a lost node: spread and tolerations.

An agent that runs several pods (``spec.runtime.replicas`` of 2 or more, or
``spec.runtime.autoscaling``, whose autoscaler may scale it out) is *spread*: its pod
template gets ``topologySpreadConstraints`` over ``kubernetes.io/hostname`` and over
``topology.kubernetes.io/zone`` (nodes without a zone label are not counted), each with skew
1 and ``ScheduleAnyway``: the scheduler places each pod where the spread is best, and never
leaves a replica Pending for it (with ``DoNotSchedule``, the replacement of a pod evicted
by a drain could find no node that keeps the skew, and the agent would run short until the
drained node came back). Cordoned and tainted nodes are left out of the count
(``nodeTaintsPolicy: Honor``), and each rollout is spread on its own
(``matchLabelKeys: [pod-template-hash]``); a preferred pod anti-affinity on the host
says the same to schedulers and scanners that read only affinity. And it gets a
PodDisruptionBudget (:mod:`mas_operator.disruptionbudgets`). A single replica gets
neither: a budget that forbids its only eviction would block every drain of its node, so a
drain stops it and its requests fail until its replacement is Ready elsewhere.

Every agent pod tolerates the ``node.kubernetes.io/unreachable`` and ``not-ready`` taints
for ``spec.runtime.node_loss_toleration_seconds`` (30 s unless the Application says),
not Kubernetes' default 300 s: when a node stops answering, its pods are evicted and
replaced on another node after that delay instead of five minutes. Shorter risks
replacing pods on a node that only missed a few heartbeats (the node lifecycle controller
taints after its grace period, 40 to 50 s by version, so a pod is replaced a little over a
minute after its node went silent).
"""

from __future__ import annotations

from typing import Any

from mas.infra.models import RuntimeSpec
from mas_operator.names import selector_labels

NODE_LOSS_TAINTS = ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
SPREAD_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


def spread_out(runtime: RuntimeSpec) -> bool:
    """Whether the agents of ``runtime`` may run several pods (so they are spread and
    get a PodDisruptionBudget)."""
    return runtime.autoscaling or runtime.replicas >= 2


def topology_spread(application: str, agent: str) -> list[dict[str, Any]]:
    """The spread constraints of a replicated agent's pods: nodes first, then zones."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector_labels(application, agent)},
            "matchLabelKeys": ["pod-template-hash"],  # spread each rollout's pods anew
            "nodeTaintsPolicy": "Honor",  # a cordoned or tainted node does not count
        }
        for key in SPREAD_KEYS
    ]


def host_anti_affinity(application: str, agent: str) -> dict[str, Any]:
    """Prefer, never require, nodes without another pod of the agent (beside the spread)."""
    term = {
        "topologyKey": SPREAD_KEYS[0],
        "labelSelector": {"matchLabels": selector_labels(application, agent)},
    }
    preferred = [{"weight": 100, "podAffinityTerm": term}]
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


def node_loss_tolerations(runtime: RuntimeSpec) -> list[dict[str, Any]]:
    """How long a pod stays bound to a node that stopped answering or is not ready."""
    return [
        {
            "key": taint,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": runtime.node_loss_toleration_seconds,
        }
        for taint in NODE_LOSS_TAINTS
    ]

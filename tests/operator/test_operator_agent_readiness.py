"""When an agent counts as ready: its current template rolled out, and serving at least what
its PodDisruptionBudget keeps (all but one of several replicas, the one of a single one)."""

from __future__ import annotations

from typing import Any

import pytest

from mas_operator.disruptionbudgets import serving_floor
from mas_operator.reconcile import deployment_ready

pytestmark = pytest.mark.timeout(10)


def deployment(
    want: int,
    *,
    generation: int = 3,
    observed: int = 3,
    replicas: int | None = None,
    updated: int | None = None,
    ready: int | None = None,
    available: int | None = None,
) -> dict[str, Any]:
    """A Deployment as the API server returns it; the counts default to ``want``."""
    status = {
        "observedGeneration": observed,
        "replicas": want if replicas is None else replicas,
        "updatedReplicas": want if updated is None else updated,
        "readyReplicas": want if ready is None else ready,
        "availableReplicas": (want if ready is None else ready) if available is None else available,
    }
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": want},
        "status": {k: v for k, v in status.items() if v},  # the API leaves zeros out
    }


def test_the_floor_is_all_but_one_of_several_replicas_and_the_only_one_of_one() -> None:
    assert [serving_floor(n) for n in (0, 1, 2, 3, 5)] == [0, 1, 1, 2, 4]


def test_a_drained_replica_leaves_a_replicated_agent_ready_while_it_is_replaced() -> None:
    # Evicted: the ReplicaSet counts its active pods only, then the replacement starting.
    assert deployment_ready(deployment(2, replicas=1, updated=1, ready=1)) == (2, 1, True)
    assert deployment_ready(deployment(2, ready=1)) == (2, 1, True)
    assert deployment_ready(deployment(3, ready=2)) == (3, 2, True)


def test_below_the_floor_is_not_ready() -> None:
    assert deployment_ready(deployment(2, ready=0)) == (2, 0, False)
    assert deployment_ready(deployment(3, ready=1)) == (3, 1, False)
    assert deployment_ready(deployment(1, ready=0)) == (1, 0, False)  # a single replica lost
    assert deployment_ready(deployment(2, ready=2, available=0)) == (2, 2, False)


def test_a_rollout_is_ready_only_once_no_pod_of_an_older_template_is_left() -> None:
    # A new generation not yet seen by the Deployment controller.
    assert deployment_ready(deployment(2, generation=4, observed=3)) == (2, 2, False)
    # Surging: one new pod beside two old ones, all ready.
    assert deployment_ready(deployment(2, replicas=3, updated=1, ready=3)) == (2, 3, False)
    # The old pods gone: ready at the floor like a drain.
    assert deployment_ready(deployment(2, ready=1)) == (2, 1, True)


def test_one_replica_and_zero() -> None:
    assert deployment_ready(deployment(1)) == (1, 1, True)
    assert deployment_ready(deployment(0)) == (0, 0, True)  # scaled to zero: nothing to wait for
    new = {"metadata": {"generation": 1}, "spec": {"replicas": 1}}  # no status yet
    assert deployment_ready(new) == (1, 0, False)

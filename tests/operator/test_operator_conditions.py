"""Status conditions as kstatus reads them, recomputed from what a reconcile observed."""

from __future__ import annotations

import pytest

from mas_operator.conditions import (
    AgentObserved,
    Observed,
    build_status,
    with_transition_times,
)

pytestmark = pytest.mark.timeout(10)


def agent(ready: bool) -> AgentObserved:
    return AgentObserved(1, 1 if ready else 0, ready, "http://a:8080", "http://a:8080/card")


def by_type(status: dict[str, object]) -> dict[str, dict[str, object]]:
    return {c["type"]: c for c in status["conditions"]}  # type: ignore[attr-defined, index]


def test_rollout_in_progress_then_ready() -> None:
    rolling = build_status(Observed(4, {"a": agent(True), "b": agent(False)}), None)
    conds = by_type(rolling)
    assert (conds["Ready"]["status"], conds["Reconciling"]["status"]) == ("False", "True")
    assert conds["Ready"]["message"] == "1/2 deployed agents ready; waiting for b"
    assert rolling["phase"] == "Progressing" and rolling["agents_ready"] == "1/2"
    assert all(c["observedGeneration"] == 4 for c in conds.values())
    ready = build_status(Observed(4, {"a": agent(True), "b": agent(True)}), rolling)
    conds = by_type(ready)
    assert (conds["Ready"]["status"], conds["Reconciling"]["status"]) == ("True", "False")
    assert conds["Stalled"]["status"] == "False"


def test_stalled_update_says_the_children_are_kept() -> None:
    seen = Observed(5, {"a": agent(True)}, "MissingDelegationTarget", "target 'x' missing", "4")
    conds = by_type(build_status(seen, None))
    assert conds["Stalled"]["status"] == "True"
    assert conds["Stalled"]["message"] == (
        "target 'x' missing; the running children (generation 4) are kept unchanged until a "
        "valid update"
    )
    assert conds["Reconciling"]["status"] == "False"  # kstatus: never both
    assert conds["Wired"]["status"] == "False"


def test_transition_time_changes_only_when_the_status_flips() -> None:
    old = [
        {"type": "Ready", "status": "False", "lastTransitionTime": "T0"},
        {"type": "Wired", "status": "True", "lastTransitionTime": "T0"},
    ]
    new = [{"type": "Ready", "status": "True"}, {"type": "Wired", "status": "True"}]
    stamped = {c["type"]: c["lastTransitionTime"] for c in with_transition_times(new, old, "T1")}
    assert stamped == {"Ready": "T1", "Wired": "T0"}


def test_removed_agents_are_dropped_from_status() -> None:
    previous = {"agents": {"gone": {"ready": True}}}
    status = build_status(Observed(2, {"a": agent(True)}), previous)
    assert status["agents"]["gone"] is None  # type: ignore[index]

"""Conformance verdicts: a probe's termination message to ``Conformant``, per agent and overall."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mas.infra.conformance import ConformanceCheck, ConformanceResult
from mas_operator.conditions import AgentObserved, Observed, build_status, phase_of
from mas_operator.conformance.verdicts import (
    AgentConformance,
    ConformanceObserved,
    conformant_condition,
    from_termination,
    read_probe,
)

pytestmark = pytest.mark.timeout(10)

NOW = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)


def result(*failing: str) -> str:
    checks = [ConformanceCheck(interface="JSONRPC", check="send-message", status="pass")]
    checks += [
        ConformanceCheck(interface="GRPC", check=name, status="fail", detail=f"{name} broke")
        for name in failing
    ]
    return ConformanceResult(url="http://a", checked_at=NOW, checks=checks).compact_json()


def job(name: str = "desk-a-conformance-1", uid: str = "job-1", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid}, "status": status}


def pod(owner: str, container: str, message: str, code: int = 0) -> dict[str, Any]:
    terminated = {"exitCode": code, "reason": "Completed", "message": message}
    return {
        "metadata": {"ownerReferences": [{"uid": owner}]},
        "status": {"containerStatuses": [{"name": container, "state": {"terminated": terminated}}]},
    }


def test_a_passing_result_is_true_with_its_counts() -> None:
    verdict = from_termination({"exitCode": 0, "message": result()})
    assert verdict == AgentConformance(
        "True", "ChecksPassed", "1 passed, 0 failed, 0 skipped", "2026-12-02T18:00:00Z"
    )


def test_a_failing_result_is_false_naming_the_failed_checks() -> None:
    verdict = from_termination({"exitCode": 1, "message": result("send-message")})
    assert (verdict.status, verdict.reason) == ("False", "ChecksFailed")
    assert verdict.message == "1 passed, 1 failed, 0 skipped: GRPC send-message: send-message broke"


@pytest.mark.parametrize(
    ("terminated", "fragment"),
    [
        ({"exitCode": 2}, "exited 2 (exit 2: a usage error, the Job is misconfigured) without"),
        ({"exitCode": 137, "message": "  "}, "exited 137 without a result"),
        ({"exitCode": 1, "message": '{"url": "http://a", "checks": [{"ch'}, "is not a conformance"),
        ({"exitCode": 1, "message": '{"url": "http://a"}'}, "(checked_at: Field required)"),
    ],
)
def test_a_missing_or_unreadable_message_is_false_and_says_so(
    terminated: dict[str, Any], fragment: str
) -> None:
    verdict = from_termination(terminated)
    assert (verdict.status, verdict.reason) == ("False", "ResultUnreadable")
    assert fragment in verdict.message


def test_read_probe_follows_the_job_and_only_its_own_pod() -> None:
    other = pod("job-0", "a", result("streaming"))  # an older run's pod
    assert read_probe("a", job(), [other]).reason == "ProbeRunning"
    mine = pod("job-1", "a", result())
    assert read_probe("a", job(), [other, mine]).status == "True"
    deadline = {
        "type": "Failed",
        "status": "True",
        "reason": "DeadlineExceeded",
        "message": "Job was active longer than specified deadline",
    }
    failed = job(conditions=[deadline])
    verdict = read_probe("a", failed, [])
    assert (verdict.status, verdict.reason) == ("False", "ProbeFailed")
    assert "DeadlineExceeded: Job was active longer" in verdict.message
    assert read_probe("a", failed, [mine]).status == "True"  # the pod's result comes first
    complete = job(conditions=[{"type": "Complete", "status": "True"}])
    gone = read_probe("a", complete, [])  # exit 0 is a pass; only the detail is lost
    assert (gone.status, gone.reason) == ("True", "ChecksPassed")
    assert "the pod of Job desk-a-conformance-1, which held the detailed result, is gone" in (
        gone.message
    )


def v(status: str, reason: str, message: str = "m") -> AgentConformance:
    return AgentConformance(status, reason, message)


def test_the_application_is_false_naming_each_failing_agent_and_its_checks() -> None:
    cond = conformant_condition(
        {
            "a": v("True", "ChecksPassed"),
            "b": v("False", "ChecksFailed", "20 passed, 1 failed, 0 skipped: GRPC send-message: x"),
            "c": v("Unknown", "ProbeRunning"),
            "d": v("False", "ResultUnreadable", "the probe exited 2"),
        },
        7,
    )
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "False",
        "ChecksFailed",
        7,
    )
    assert cond["message"] == (
        "2/4 deployed agents not conformant: b: 20 passed, 1 failed, 0 skipped: GRPC "
        "send-message: x; d: the probe exited 2"
    )


def test_the_application_is_unknown_while_probes_wait_or_run_then_true() -> None:
    pending = conformant_condition({"a": v("Unknown", "ProbePending", "rolling out")}, 1)
    assert (pending["status"], pending["reason"]) == ("Unknown", "ProbePending")
    assert pending["message"] == "0/1 deployed agents probed; waiting for a (rolling out)"
    mixed = {"a": v("True", "ChecksPassed"), "b": v("Unknown", "ProbeRunning")}
    assert conformant_condition(mixed, 1)["reason"] == "ProbeRunning"
    done = conformant_condition({"a": v("True", "ChecksPassed"), "b": v("True", "ChecksPassed")}, 1)
    assert (done["status"], done["message"]) == ("True", "2/2 deployed agents conformant")
    assert conformant_condition({}, 1)["reason"] == "NoDeployedAgents"


def test_a_long_message_is_clipped() -> None:
    many = {f"agent-{i}": v("False", "ChecksFailed", "x" * 300) for i in range(20)}
    assert len(conformant_condition(many, 1)["message"]) == 2048


def agent() -> AgentObserved:
    return AgentObserved(1, 1, True, "http://a:8080", "http://a:8080/card")


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_status_carries_the_verdicts_and_conformant_never_drives_ready() -> None:
    failing = ConformanceObserved(True, {"a": v("False", "ChecksFailed", "1 failed")})
    seen = Observed(3, {"a": agent()}, conformance=failing)
    status = build_status(seen, None)
    conds = by_type(status)
    assert conds["Conformant"]["status"] == "False"
    assert conds["Conformant"]["lastTransitionTime"]
    assert conds["Ready"]["status"] == "True" and phase_of(seen) == "Ready"
    assert status["agents"]["a"]["conformant"] == {
        "status": "False",
        "reason": "ChecksFailed",
        "message": "1 failed",
    }


def test_switching_conformance_off_removes_the_condition_and_the_verdicts() -> None:
    on = build_status(
        Observed(3, {"a": agent()}, conformance=ConformanceObserved(True, {"a": v("True", "P")})),
        None,
    )
    off = build_status(Observed(4, {"a": agent()}, conformance=ConformanceObserved(False)), on)
    assert "Conformant" not in by_type(off)
    assert off["agents"]["a"]["conformant"] is None  # the merge patch removes it


def test_a_reconcile_that_did_not_look_keeps_the_last_verdicts() -> None:
    on = build_status(
        Observed(3, {"a": agent()}, conformance=ConformanceObserved(True, {"a": v("True", "P")})),
        None,
    )
    stalled = Observed(4, {"a": agent()}, "InvalidSpec", "bad", "3")
    status = build_status(stalled, on)
    assert by_type(status)["Conformant"] == by_type(on)["Conformant"]
    assert "conformant" not in status["agents"]["a"]  # left as it is by the merge patch

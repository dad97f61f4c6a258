"""Conformance verdicts: from a conformance Job and its pod to ``Conformant``, per agent and
for the Application. Pure: :mod:`mas_operator.conformance.step` does the API I/O.

An agent's verdict comes from the termination message of its probe container, which is
``mas-ctl conformance --result-file`` output, read with
:meth:`mas.infra.conformance.ConformanceResult.model_validate_json`:

============  =====================  ================================================
status        reason                 when
============  =====================  ================================================
``True``      ``ChecksPassed``       every check passed (skips allowed), or the Job
                                     completed (exit 0) and its pod is gone
``False``     ``ChecksFailed``       a check failed; the message names it
``False``     ``ResultUnreadable``   the probe exited without a readable result
``False``     ``ProbeFailed``        the Job failed (deadline) and no pod has a result
``Unknown``   ``ProbePending``       the agent is not rolled out yet: no Job
``Unknown``   ``ProbeRunning``       the Job runs
============  =====================  ================================================

The Application's ``Conformant`` is ``False`` when any agent's is (``ChecksFailed`` when a
check failed, naming each failing agent and its failed checks), else ``Unknown`` while a
probe is pending or running, else ``True``. It never drives ``Ready``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from mas.infra.conformance import ConformanceResult

CONFORMANT = "Conformant"

CHECKS_PASSED = "ChecksPassed"
CHECKS_FAILED = "ChecksFailed"
RESULT_UNREADABLE = "ResultUnreadable"
PROBE_FAILED = "ProbeFailed"
PROBE_PENDING = "ProbePending"
PROBE_RUNNING = "ProbeRunning"
NO_DEPLOYED_AGENTS = "NoDeployedAgents"

MESSAGE_LIMIT = 2048  # of the Application's condition message
FAILURES_SHOWN = 3  # failed checks named per agent
_QUOTED = 200  # characters of an unreadable termination message quoted


@dataclass(frozen=True)
class AgentConformance:
    """One deployed agent's verdict (``status.agents.<id>.conformant``)."""

    status: str
    reason: str
    message: str
    checked_at: str | None = None

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "reason": self.reason}
        out["message"] = self.message
        if self.checked_at is not None:
            out["checked_at"] = self.checked_at
        return out


@dataclass(frozen=True)
class ConformanceObserved:
    """What one reconcile found: ``enabled`` false means no verdicts are reported at all."""

    enabled: bool
    agents: Mapping[str, AgentConformance] = field(default_factory=dict)


def pending(agent_ready: bool) -> AgentConformance:
    """No Job yet: the agent is still rolling out (or its Job is about to be created)."""
    why = (
        "the conformance Job is being created"
        if agent_ready
        else "waiting for the agent's rollout to complete before probing it"
    )
    return AgentConformance("Unknown", PROBE_PENDING, why)


def _container_state(
    agent: str, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The terminated state of the probe container of ``job``'s pod, if it has ended."""
    uid = (job.get("metadata") or {}).get("uid")
    for pod in pods:
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        if not any(ref.get("uid") == uid for ref in refs):
            continue
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated")
            if status.get("name") == agent and terminated:
                return dict(terminated)
    return None


def _job_finished(job: Mapping[str, Any], type_: str) -> str | None:
    """``reason: message`` of the Job's ``Complete`` or ``Failed`` condition, when it is set."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return f"{cond.get('reason') or type_}: {cond.get('message') or 'no message'}"
    return None


def from_termination(terminated: Mapping[str, Any]) -> AgentConformance:
    """The verdict in a probe container's terminated state (its termination message)."""
    text = str(terminated.get("message") or "")
    code = terminated.get("exitCode")
    if not text.strip():
        why = " (exit 2: a usage error, the Job is misconfigured)" if code == 2 else ""
        return AgentConformance(
            "False",
            RESULT_UNREADABLE,
            f"the probe exited {code}{why} without a result in its termination message",
        )
    try:
        result = ConformanceResult.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the message"
        quoted = text if len(text) <= _QUOTED else text[:_QUOTED] + "..."
        return AgentConformance(
            "False",
            RESULT_UNREADABLE,
            f"the probe's termination message (exit {code}) is not a conformance result "
            f"({where}: {first['msg']}): {quoted!r}",
        )
    checked_at = result.checked_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if result.passed:
        return AgentConformance("True", CHECKS_PASSED, result.summary(), checked_at)
    return AgentConformance(
        "False", CHECKS_FAILED, result.summary(limit=FAILURES_SHOWN), checked_at
    )


def read_probe(
    agent: str, job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> AgentConformance:
    """The verdict of ``agent`` from its conformance ``job`` and the namespace's probe pods."""
    terminated = _container_state(agent, job, pods)
    if terminated is not None:
        return from_termination(terminated)
    name = (job.get("metadata") or {}).get("name")
    if _job_finished(job, "Complete") is not None:  # its pod, and the detail, are gone
        return AgentConformance(
            "True",
            CHECKS_PASSED,
            f"the probe exited 0 (every check passed); the pod of Job {name}, which held "
            "the detailed result, is gone",
        )
    failure = _job_finished(job, "Failed")
    if failure is not None:
        return AgentConformance(
            "False",
            PROBE_FAILED,
            f"the conformance Job {name} failed ({failure}) and no probe result can be read "
            "from its pod",
        )
    return AgentConformance("Unknown", PROBE_RUNNING, f"the conformance Job {name} is running")


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def conformant_condition(
    agents: Mapping[str, AgentConformance], generation: int | None
) -> dict[str, Any]:
    """The Application's ``Conformant`` condition (without a transition time)."""
    total = len(agents)
    failed = {name: c for name, c in sorted(agents.items()) if c.status == "False"}
    waiting = {name: c for name, c in sorted(agents.items()) if c.status == "Unknown"}
    if not agents:
        status, reason, message = "True", NO_DEPLOYED_AGENTS, "no deployed agents to probe"
    elif failed:
        status = "False"
        reasons = [c.reason for c in failed.values()]
        reason = CHECKS_FAILED if CHECKS_FAILED in reasons else reasons[0]
        named = "; ".join(f"{name}: {c.message}" for name, c in failed.items())
        message = f"{len(failed)}/{total} deployed agents not conformant: {named}"
    elif waiting:
        status = "Unknown"
        running = any(c.reason == PROBE_RUNNING for c in waiting.values())
        reason = PROBE_RUNNING if running else PROBE_PENDING
        message = (
            f"{total - len(waiting)}/{total} deployed agents probed; waiting for "
            + ", ".join(f"{name} ({c.message})" for name, c in waiting.items())
        )
    else:
        status, reason, message = (
            "True",
            CHECKS_PASSED,
            f"{total}/{total} deployed agents conformant",
        )
    out: dict[str, Any] = {
        "type": CONFORMANT,
        "status": status,
        "reason": reason,
        "message": _clip(message),
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out

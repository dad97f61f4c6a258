"""Status as state: conditions recomputed from what the reconcile observed.

Conditions follow the Kubernetes API conventions and kstatus: ``Ready`` (all deployed
agents rolled out at the current generation), ``Reconciling`` (work in progress),
``Stalled`` (the current generation cannot be applied; the reason says why), and ``Wired``
(every ``delegates_to`` target resolved; reason ``PodLocalUrls`` when the message lists urls
the in-cluster URL model mapped to a Service or cannot make reachable from a pod). Each
carries reason, message and observedGeneration; ``lastTransitionTime`` changes only when
the status flips. ``phase`` summarises them for the printer column and never drives logic.
``Conformant`` (:mod:`mas_operator.conformance.verdicts`) is added when
``spec.conformance.enabled``; it never drives ``Ready`` or ``phase``. ``status.routes`` and
``edges_ready`` come from :mod:`mas_operator.edges`; ``Wired``'s message names the edges
that are not Ready, its status and reason stay what the wiring says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mas_operator.backoff import describe_delay
from mas_operator.conformance.verdicts import CONFORMANT, ConformanceObserved, conformant_condition
from mas_operator.edges import EdgeState, edges_ready, not_ready_summary, routes_status

READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
WIRED = "Wired"

MISSING_DELEGATION_TARGET = "MissingDelegationTarget"
INVALID_SPEC = "InvalidSpec"
APPLY_FAILED = "ApplyFailed"
APPLY_REFUSED = "ApplyRefused"
# Wired, with urls the in-cluster URL model mapped to Services or could not fix
POD_LOCAL_URLS = "PodLocalUrls"

PHASE_READY = "Ready"
PHASE_PROGRESSING = "Progressing"
PHASE_STALLED = "Stalled"


@dataclass(frozen=True)
class AgentObserved:
    """What the Deployment and Service of one agent say."""

    replicas: int
    ready_replicas: int
    ready: bool
    url: str | None
    card_url: str | None
    metrics_url: str | None = None

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ready": self.ready,
            "replicas": self.replicas,
            "ready_replicas": self.ready_replicas,
        }
        if self.url is not None:
            out["url"] = self.url
        if self.card_url is not None:
            out["card_url"] = self.card_url
        if self.metrics_url is not None:
            out["metrics_url"] = self.metrics_url
        return out


@dataclass(frozen=True)
class Observed:
    """One reconcile's view of the world."""

    generation: int | None
    agents: Mapping[str, AgentObserved]
    stall_reason: str | None = None
    stall_message: str = ""
    kept_generation: str | None = None
    wiring_summary: str = ""
    url_notes: tuple[str, ...] = ()  # mas.infra.incluster notes: "<field>: <what happens>"
    apply_error: str | None = None
    retry_in: float | None = None  # seconds until the failed apply is retried
    # None: not observed by this reconcile (stalled, apply failed), the last verdicts stay
    conformance: ConformanceObserved | None = None
    # None: not observed by this reconcile (stalled, apply failed), the last routes stay
    routes: tuple[EdgeState, ...] | None = None

    @property
    def stalled(self) -> bool:
        return self.stall_reason is not None

    @property
    def all_ready(self) -> bool:
        return all(a.ready for a in self.agents.values())

    @property
    def agents_ready(self) -> str:
        ready = sum(1 for a in self.agents.values() if a.ready)
        return f"{ready}/{len(self.agents)}"


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(type_: str, ok: bool, reason: str, message: str, gen: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
    }
    if gen is not None:
        out["observedGeneration"] = gen
    return out


def _stall_detail(seen: Observed) -> str:
    if seen.stall_reason == APPLY_REFUSED:
        return seen.stall_message
    if seen.agents:
        kept = f" (generation {seen.kept_generation})" if seen.kept_generation else ""
        return (
            f"{seen.stall_message}; the running children{kept} are kept unchanged until a "
            "valid update"
        )
    return f"{seen.stall_message}; no children were created"


def wired_condition(seen: Observed) -> dict[str, Any]:
    """``Wired=True``: the routes, the edges that are not Ready, and every url the cluster
    does not use as written."""
    edges = not_ready_summary(seen.routes) if seen.routes is not None else ""
    summary = f"{seen.wiring_summary}; {edges}" if edges else seen.wiring_summary
    if not seen.url_notes:
        return _condition(WIRED, True, "Wired", summary, seen.generation)
    message = f"{summary}; pod-local urls: " + "; ".join(seen.url_notes)
    return _condition(WIRED, True, POD_LOCAL_URLS, message, seen.generation)


def desired_conditions(seen: Observed) -> list[dict[str, Any]]:
    """The four conditions for ``seen`` (without transition times)."""
    gen = seen.generation
    if seen.stalled:
        reason = seen.stall_reason or INVALID_SPEC
        wired_ok = reason != MISSING_DELEGATION_TARGET
        detail = _stall_detail(seen)
        return [
            _condition(READY, False, reason, detail, gen),
            _condition(RECONCILING, False, reason, "reconciling is stalled", gen),
            _condition(STALLED, True, reason, detail, gen),
            _condition(
                WIRED,
                wired_ok,
                "Wired" if wired_ok else reason,
                seen.wiring_summary if wired_ok else seen.stall_message,
                gen,
            ),
        ]
    waiting = sorted(agent for agent, a in seen.agents.items() if not a.ready)
    if seen.apply_error is not None:
        ready = _condition(READY, False, APPLY_FAILED, seen.apply_error, gen)
        when = "" if seen.retry_in is None else f" in {describe_delay(seen.retry_in)}"
        reconciling = _condition(
            RECONCILING, True, APPLY_FAILED, f"retrying{when}: {seen.apply_error}", gen
        )
    elif waiting:
        ready = _condition(
            READY,
            False,
            "AgentsNotReady",
            f"{seen.agents_ready} deployed agents ready; waiting for " + ", ".join(waiting),
            gen,
        )
        reconciling = _condition(
            RECONCILING, True, "RolloutInProgress", f"rolling out {', '.join(waiting)}", gen
        )
    else:
        message = (
            f"{seen.agents_ready} deployed agents ready" if seen.agents else "no deployed agents"
        )
        ready = _condition(READY, True, "AllAgentsReady", message, gen)
        reconciling = _condition(RECONCILING, False, "Reconciled", message, gen)
    return [
        ready,
        reconciling,
        _condition(STALLED, False, "Reconciled", "the current generation is applied", gen),
        wired_condition(seen),
    ]


def with_transition_times(
    conditions: list[dict[str, Any]], previous: Sequence[Mapping[str, Any]], at: str
) -> list[dict[str, Any]]:
    """Keep each condition's ``lastTransitionTime`` unless its status changed."""
    before = {c.get("type"): c for c in previous}
    out = []
    for cond in conditions:
        old = before.get(cond["type"])
        same = old is not None and old.get("status") == cond["status"]
        stamp = old.get("lastTransitionTime") if same and old is not None else None
        out.append({**cond, "lastTransitionTime": stamp or at})
    return out


def phase_of(seen: Observed) -> str:
    """The printer-column summary."""
    if seen.stalled:
        return PHASE_STALLED
    ready = seen.all_ready and seen.apply_error is None
    return PHASE_READY if ready else PHASE_PROGRESSING


def build_status(seen: Observed, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status to merge-patch: removed agents are set to ``None`` so the patch drops them;
    without observed routes, ``routes`` and ``edges_ready`` are left out (they stay)."""
    previous = previous or {}
    before = previous.get("conditions") or []
    desired = desired_conditions(seen)
    conformance = seen.conformance
    if conformance is not None and conformance.enabled:
        desired.append(conformant_condition(conformance.agents, seen.generation))
    at = now()
    conditions = with_transition_times(desired, before, at)
    if conformance is None:
        conditions += [c for c in before if c.get("type") == CONFORMANT]
    agents: dict[str, Any] = {name: None for name in previous.get("agents") or {}}
    agents.update({name: a.as_status() for name, a in seen.agents.items()})
    if conformance is not None:
        for name in seen.agents:
            verdict = conformance.agents.get(name) if conformance.enabled else None
            agents[name]["conformant"] = verdict.as_status() if verdict else None
    out = {
        "observedGeneration": seen.generation,
        "phase": phase_of(seen),
        "agents_ready": seen.agents_ready,
        "conditions": conditions,
        "agents": agents,
    }
    if seen.routes is not None:
        out["edges_ready"] = edges_ready(seen.routes)
        out["routes"] = routes_status(seen.routes, previous.get("routes") or [], at)
    return out

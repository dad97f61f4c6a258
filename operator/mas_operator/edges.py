"""The Application's edges (``status.routes``): which exist, and the state of each. Pure.

:func:`plan_edges` lists one :class:`Edge` per ``delegates_to`` target and per tool-server
grant, as the pods use them (:mod:`mas.infra.routes` after the in-cluster URL rules).
:func:`edge_states` derives each edge's state from what a reconcile observed:

===============  ====================  ===============================================
state            reason                when
===============  ====================  ===============================================
``Ready``        ``TargetReady``       the in-cluster target has a ready replica
``Ready``        ``HostReady``         every agent whose pods run the in-process edge
                                       has a ready replica
``Ready``        ``CardAnswered``      the external endpoint's AgentCard answered
                                       (only with ``spec.routes.check_external``)
``Pending``      ``ScaledToZero``      the target (or a host) is scaled to 0
``Pending``      ``NoReadyReplicas``   the target (or a host) has no ready replica yet
``Pending``      ``NotDeployed``       the target's Deployment does not exist yet
``Unreachable``  ``CardCheckFailed``   the card check failed (``checkFailures`` in a
                                       row; retried at ``nextCheckTime``)
``Unknown``      ``NotChecked``        an external endpoint, card check off (or an MCP
                                       tool server: no AgentCard to check)
``Unknown``      ``CheckPending``      the first card check has not run yet
``Unknown``      ``NoUrl``             the external endpoint has no url
``Unknown``      ``NotHosted``         no deployed agent runs the delegating agent
===============  ====================  ===============================================

An in-cluster edge's target is the agent's Deployment: Ready at one ready replica (a
rollout need not be complete for calls to succeed). An in-process edge runs wherever its
delegating agent is hosted (a private worker may be hosted by several deployed agents): it
is Ready when every one of those has a ready replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mas_operator.cardchecks import CardVerdict
from mas_operator.plan import Plan, grpc_listener_port

IN_PROCESS = "in-process"

READY = "Ready"
PENDING = "Pending"
UNREACHABLE = "Unreachable"
UNKNOWN = "Unknown"

TARGET_READY = "TargetReady"
HOST_READY = "HostReady"
CARD_ANSWERED = "CardAnswered"
SCALED_TO_ZERO = "ScaledToZero"
NO_READY_REPLICAS = "NoReadyReplicas"
NOT_DEPLOYED = "NotDeployed"
CARD_CHECK_FAILED = "CardCheckFailed"
NOT_CHECKED = "NotChecked"
CHECK_PENDING = "CheckPending"
NO_URL = "NoUrl"
NOT_HOSTED = "NotHosted"

CHECKED_REASONS = (CARD_ANSWERED, CARD_CHECK_FAILED)  # states a card check gave
CARD_PROTOCOLS = ("a2a",)  # external endpoints whose AgentCard is checked
MESSAGE_LIMIT = 2048  # of the Wired message's edge list


class AgentObserved(Protocol):
    """What an edge's state reads of a deployed agent (its Deployment)."""

    @property
    def replicas(self) -> int: ...

    @property
    def ready_replicas(self) -> int: ...


@dataclass(frozen=True)
class Edge:
    """One edge: ``source`` reaches ``target`` ``via`` a transport, at ``url``.

    ``agent``: the deployed agent of this Application the edge reaches (in-cluster);
    ``hosts``: the deployed agents whose pods run an in-process edge; ``checkable``: an
    external endpoint whose AgentCard the opt-in check may fetch.
    """

    source: str
    target: str
    via: str
    url: str | None = None
    agent: str | None = None
    hosts: tuple[str, ...] = ()
    checkable: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.source, self.target, self.via)

    @property
    def external(self) -> bool:
        return self.via != IN_PROCESS and self.agent is None

    def describe(self) -> str:
        """``concierge -> researcher (a2a)``: how a person names the edge."""
        return f"{self.source} -> {self.target} ({self.via})"


@dataclass(frozen=True)
class EdgeState:
    """One edge and its state (a ``status.routes`` entry, without its transition time)."""

    edge: Edge
    state: str
    reason: str
    message: str
    check_failures: int | None = None
    next_check_time: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == READY

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": self.edge.source, "to": self.edge.target}
        out["via"] = self.edge.via
        if self.edge.url is not None:
            out["url"] = self.edge.url
        out.update(state=self.state, reason=self.reason, message=self.message)
        if self.check_failures is not None:
            out["checkFailures"] = self.check_failures
        if self.next_check_time is not None:
            out["nextCheckTime"] = self.next_check_time
        return out


def plan_edges(plan: Plan) -> tuple[Edge, ...]:
    """Every edge of the planned Application: delegations in agency and ``delegates_to``
    order, then tool-server grants in agency and ``spec.tools`` order."""
    routes = plan.wired.routes
    endpoints = plan.app.spec.endpoints
    hosts_of: dict[str, list[str]] = {}
    for runtime, hosted in routes.runtimes.items():
        for agent in hosted:
            hosts_of.setdefault(agent, []).append(runtime)
    edges: list[Edge] = []
    for route in routes.routes:
        hosts = tuple(hosts_of.get(route.source, ()))
        if route.kind == "local":
            edges.append(Edge(route.source, route.target, IN_PROCESS, hosts=hosts))
            continue
        service = plan.services.get(route.target)
        if service is not None:
            endpoint = endpoints[route.target]
            grpc = route.protocol == "a2a" and grpc_listener_port(endpoint) is not None
            via = "grpc" if grpc else route.protocol
            edges.append(Edge(route.source, route.target, via, service, agent=route.target))
        else:
            checkable = route.protocol in CARD_PROTOCOLS and route.url is not None
            edges.append(
                Edge(route.source, route.target, route.protocol, route.url, checkable=checkable)
            )
    for tool in routes.tools:
        edges.append(Edge(tool.source, tool.server, tool.protocol, tool.url))
    return tuple(edges)


def card_targets(edges: Iterable[Edge]) -> tuple[str, ...]:
    """The urls whose AgentCard the opt-in check fetches (each once, in edge order)."""
    return tuple(dict.fromkeys(e.url for e in edges if e.checkable and e.url is not None))


def _replicas(seen: AgentObserved | None) -> tuple[str, str] | None:
    """``None`` when the agent has a ready replica, else the Pending reason and why."""
    if seen is None:
        return NOT_DEPLOYED, "its Deployment does not exist yet"
    if seen.ready_replicas >= 1:
        return None
    if seen.replicas == 0:
        return SCALED_TO_ZERO, "scaled to 0 replicas"
    return NO_READY_REPLICAS, f"{seen.ready_replicas}/{seen.replicas} replicas ready"


def _in_cluster(edge: Edge, agents: Mapping[str, AgentObserved]) -> EdgeState:
    seen = agents.get(edge.agent or edge.target)
    waiting = _replicas(seen)
    if waiting is not None:
        return EdgeState(edge, PENDING, *waiting)
    assert seen is not None  # _replicas: None only for a ready agent
    return EdgeState(
        edge, READY, TARGET_READY, f"{seen.ready_replicas}/{seen.replicas} replicas ready"
    )


def _in_process(edge: Edge, agents: Mapping[str, AgentObserved]) -> EdgeState:
    if not edge.hosts:
        return EdgeState(
            edge,
            UNKNOWN,
            NOT_HOSTED,
            f"no deployed agent runs {edge.source}, so this edge is not served in the cluster",
        )
    waiting = [(host, _replicas(agents.get(host))) for host in edge.hosts]
    not_ready = [(host, w) for host, w in waiting if w is not None]
    if not not_ready:
        return EdgeState(edge, READY, HOST_READY, "runs in the pods of " + ", ".join(edge.hosts))
    reasons = [w[0] for _, w in not_ready]
    reason = NO_READY_REPLICAS if NO_READY_REPLICAS in reasons else reasons[0]
    detail = "; ".join(f"{host}: {why}" for host, (_, why) in not_ready)
    return EdgeState(edge, PENDING, reason, f"runs in the pods of {detail}")


def _external(
    edge: Edge,
    check: bool,
    verdicts: Mapping[str, CardVerdict],
    previous: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> EdgeState:
    if edge.url is None:
        return EdgeState(edge, UNKNOWN, NO_URL, "the endpoint has no url: set one")
    if not edge.checkable:
        what = f"an external {edge.via} endpoint: not checked (no AgentCard)"
        return EdgeState(edge, UNKNOWN, NOT_CHECKED, what)
    if not check:
        return EdgeState(
            edge,
            UNKNOWN,
            NOT_CHECKED,
            "an external endpoint: not checked (spec.routes.check_external: true checks its "
            "AgentCard)",
        )
    verdict = verdicts.get(edge.url)
    if verdict is None:
        # No check of this operator process yet: the last result (a restart) stays
        kept = previous.get(edge.key)
        checked = kept is not None and kept.get("reason") in CHECKED_REASONS
        if kept is not None and checked and kept.get("url") == edge.url:
            return EdgeState(
                edge,
                str(kept["state"]),
                str(kept["reason"]),
                str(kept.get("message") or ""),
                kept.get("checkFailures"),
                kept.get("nextCheckTime"),
            )
        return EdgeState(edge, UNKNOWN, CHECK_PENDING, "the first AgentCard check is due")
    if verdict.ok:
        return EdgeState(edge, READY, CARD_ANSWERED, verdict.message)
    return EdgeState(
        edge,
        UNREACHABLE,
        CARD_CHECK_FAILED,
        f"{verdict.message} ({verdict.failures} failed checks in a row)",
        verdict.failures,
        verdict.next_check_time,
    )


def edge_states(
    edges: Sequence[Edge],
    agents: Mapping[str, AgentObserved],
    *,
    check: bool = False,
    verdicts: Mapping[str, CardVerdict] | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
) -> tuple[EdgeState, ...]:
    """The state of each edge. ``agents``: the deployed agents as observed; ``check``:
    ``spec.routes.check_external``; ``verdicts``: the card checks' latest results by url;
    ``previous``: the ``status.routes`` before (a checked edge keeps its last result until
    this operator process has checked it)."""
    before = {_key_of(entry): entry for entry in previous}
    out = []
    for edge in edges:
        if edge.via == IN_PROCESS:
            out.append(_in_process(edge, agents))
        elif edge.agent is not None:
            out.append(_in_cluster(edge, agents))
        else:
            out.append(_external(edge, check, verdicts or {}, before))
    return tuple(out)


def _key_of(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(entry.get("from")), str(entry.get("to")), str(entry.get("via")))


def routes_status(
    states: Sequence[EdgeState], previous: Sequence[Mapping[str, Any]], at: str
) -> list[dict[str, Any]]:
    """``status.routes``: each entry keeps its ``lastTransitionTime`` unless its state
    changed (an edge that is new gets ``at``)."""
    before = {_key_of(entry): entry for entry in previous}
    out = []
    for state in states:
        entry = state.as_status()
        old = before.get(state.edge.key)
        same = old is not None and old.get("state") == state.state
        stamp = old.get("lastTransitionTime") if same and old is not None else None
        entry["lastTransitionTime"] = stamp or at
        out.append(entry)
    return out


def edges_ready(states: Sequence[EdgeState]) -> str:
    """``3/5``: ready edges / edges (the Edges printer column)."""
    return f"{sum(1 for s in states if s.ready)}/{len(states)}"


def not_ready_summary(states: Sequence[EdgeState]) -> str:
    """For the ``Wired`` message: each edge that is Pending or Unreachable with its state
    and why, then the ones whose state is Unknown by name; empty when every edge is Ready."""
    broken = [s for s in states if s.state in (PENDING, UNREACHABLE)]
    unknown = [s for s in states if s.state == UNKNOWN]
    parts = []
    if broken:
        parts.append(
            "edges not Ready: "
            + "; ".join(f"{s.edge.describe()}: {s.state}: {s.message}" for s in broken)
        )
    if unknown:
        parts.append("state Unknown: " + ", ".join(s.edge.describe() for s in unknown))
    text = "; ".join(parts)
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


@dataclass(frozen=True)
class Transition:
    """An edge whose state changed from or to Ready since the last status."""

    edge: Edge
    was: str
    now: EdgeState


def transitions(
    states: Sequence[EdgeState], previous: Sequence[Mapping[str, Any]]
) -> tuple[Transition, ...]:
    """The edges that left Ready, or reached Ready from another state, since ``previous``
    (an edge that is new has no transition)."""
    before = {_key_of(entry): str(entry.get("state")) for entry in previous}
    out = []
    for state in states:
        was = before.get(state.edge.key)
        if was is None or was == state.state:
            continue
        if was == READY or state.ready:
            out.append(Transition(state.edge, was, state))
    return tuple(out)

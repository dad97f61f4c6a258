"""One idempotent, level-based reconcile of an Application: create, update, resume, repair.

Steps: plan the document (validate and wire); list the children that exist; when the plan
fails, touch no child and report ``Stalled`` (a bad update keeps the running children exactly
as they were); otherwise server-side apply every child (owned by the Application), delete
owned children the plan no longer has, run the conformance step
(:mod:`mas_operator.conformance.step`) and report readiness, the state of every edge
(:mod:`mas_operator.edges`, with the latest card checks the caller passes in) and, when
asked for, conformance, from what it found.
The function does blocking API I/O: handlers run it in a worker thread.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiException

from mas.infra.errors import ApplicationInvalid
from mas_operator.backoff import honour_retry_after
from mas_operator.cardchecks import CardVerdict, CardWant, CheckSettings
from mas_operator.children import CHILD_KINDS, build_children, secret_names
from mas_operator.conditions import (
    APPLY_REFUSED,
    INVALID_SPEC,
    MISSING_DELEGATION_TARGET,
    POD_LOCAL_URLS,
    STALLED,
    WIRED,
    AgentObserved,
    Observed,
    build_status,
    phase_of,
)
from mas_operator.conformance.step import reads_jobs, sync_conformance, warn_when_not_conformant
from mas_operator.disruptionbudgets import serving_floor
from mas_operator.edges import EdgeState, card_targets, edge_states, plan_edges, transitions
from mas_operator.kube import Cluster, api_message, retry_after
from mas_operator.manifests import owned
from mas_operator.names import (
    ANNOTATION_CARD_URL,
    ANNOTATION_GENERATION,
    ANNOTATION_METRICS_URL,
    ANNOTATION_URL,
    LABEL_AGENT,
    application_selector,
)
from mas_operator.noops import Applied, ChildKey, digest, memory_of, merge_patch, unchanged
from mas_operator.plan import ApiServer, Plan, plan_application

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What one reconcile did and found."""

    phase: str
    observed: Observed
    applied: Mapping[str, int] = field(default_factory=dict)
    deleted: int = 0
    versions: Mapping[tuple[str, str], str] = field(default_factory=dict)
    last_applied: Mapping[ChildKey, Applied] = field(default_factory=dict)
    # Every input was the Application and its children: no Secret and no conformance Job
    # was read, so the same Application and children give the same outcome again.
    self_contained: bool = False
    # The Application as our status patch left it (None: the status was not written).
    status_written: Mapping[str, Any] | None = None
    # The card checks this generation asks for (None: not observed, leave them as they are).
    cards: CardWant | None = None

    @property
    def stalled(self) -> bool:
        return self.observed.stalled


def _document(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata") or {}
    return {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "generation": meta.get("generation"),
            "uid": meta.get("uid"),
        },
        "spec": body.get("spec"),
    }


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def deployment_ready(dep: Mapping[str, Any]) -> tuple[int, int, bool]:
    """``(wanted replicas, ready replicas, ready)`` of an agent's Deployment.

    Ready: the Deployment has seen its current generation, every pod it runs has the
    current template (a rollout is not ready while pods of an older one are left), and at
    least :func:`~mas_operator.disruptionbudgets.serving_floor` of them are available: all
    but one of several replicas, so that a drain evicting one at a time, as their
    PodDisruptionBudget allows, leaves the agent (and its Application) Ready while the
    evicted pod is replaced; the only pod of a single replica.
    """
    spec, status = dep.get("spec") or {}, dep.get("status") or {}
    want = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    floor = serving_floor(want)
    rolled_out = (
        int(status.get("observedGeneration") or 0) >= int(dep["metadata"].get("generation") or 0)
        and updated >= floor
        and int(status.get("replicas") or 0) <= updated
    )
    serving = int(status.get("availableReplicas") or 0) >= floor and ready >= floor
    return want, ready, rolled_out and serving


def _observe_agents(
    deployments: list[dict[str, Any]], services: list[dict[str, Any]]
) -> dict[str, AgentObserved]:
    annotations = {
        (s["metadata"].get("labels") or {}).get(LABEL_AGENT): s["metadata"].get("annotations") or {}
        for s in services
    }
    out: dict[str, AgentObserved] = {}
    for dep in deployments:
        agent = (dep["metadata"].get("labels") or {}).get(LABEL_AGENT)
        if not agent:
            continue
        want, ready, complete = deployment_ready(dep)
        notes = annotations.get(agent, {})
        out[agent] = AgentObserved(
            want,
            ready,
            complete,
            notes.get(ANNOTATION_URL),
            notes.get(ANNOTATION_CARD_URL),
            notes.get(ANNOTATION_METRICS_URL),
        )
    return dict(sorted(out.items()))


def _wiring_summary(plan: Plan) -> str:
    routes = plan.wired.routes
    remote = sum(1 for r in routes.routes if r.kind == "remote")
    return (
        f"{len(routes.routes)} routes resolved ({remote} remote), "
        f"{len(plan.agents)} deployed agents"
    )


def warn_on_pod_local_urls(
    cluster: Cluster, body: Mapping[str, Any], status: Mapping[str, Any], notes: tuple[str, ...]
) -> None:
    """One Warning Event per pod-local url, when the ``Wired`` message first lists them."""

    def wired(conditions: Any) -> Mapping[str, Any]:
        return next((c for c in conditions or [] if c.get("type") == WIRED), {})

    meta = body["metadata"]
    uid = str(meta.get("uid"))
    if not notes:
        cluster.warned.pop(uid, None)
        return
    new = wired(status.get("conditions"))
    old = wired((body.get("status") or {}).get("conditions"))
    # the message also lists the edges that are not Ready: only the notes matter here
    same = old.get("reason") == new["reason"] and all(
        note in str(old.get("message")) for note in notes
    )
    if same or cluster.warned.get(uid) == notes:
        return
    cluster.warned[uid] = notes
    for note in notes:
        cluster.post_event(body, "Warning", POD_LOCAL_URLS, note)
        logger.warning("Application %s/%s: %s", meta["namespace"], meta["name"], note)


EDGE_NOT_READY = "EdgeNotReady"
EDGE_READY = "EdgeReady"


def announce_edges(
    cluster: Cluster,
    body: Mapping[str, Any],
    states: tuple[EdgeState, ...],
    previous: list[Mapping[str, Any]],
) -> None:
    """A Warning Event for each edge that left Ready since ``previous`` (the status
    before), and a Normal one when an edge warned about is Ready again."""
    meta = body["metadata"]
    warned = cluster.edges_warned.setdefault(str(meta.get("uid")), set())
    for change in transitions(states, previous):
        edge, now = change.edge, change.now
        if change.was == "Ready":
            message = f"edge {edge.describe()} is {now.state}: {now.message}"
            cluster.post_event(body, "Warning", EDGE_NOT_READY, message)
            logger.warning("Application %s/%s: %s", meta["namespace"], meta["name"], message)
            warned.add(edge.key)
        elif edge.key in warned:
            warned.discard(edge.key)
            cluster.post_event(
                body, "Normal", EDGE_READY, f"edge {edge.describe()} is Ready: {now.message}"
            )
    current = {s.edge.key for s in states}
    warned &= current  # an edge that is gone needs no recovery event


def _stall(error: ApplicationInvalid) -> tuple[str, str]:
    only_missing = bool(error.missing) and len(error.missing) == len(error.problems)
    reason = MISSING_DELEGATION_TARGET if only_missing else INVALID_SPEC
    return reason, "; ".join(str(p) for p in error.problems)


def _was_stalled(body: Mapping[str, Any]) -> tuple[str | None, int | None]:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == STALLED and cond.get("status") == "True":
            return cond.get("reason"), cond.get("observedGeneration")
    return None, None


def _apply_all(
    cluster: Cluster,
    body: Mapping[str, Any],
    desired: list[dict[str, Any]],
    digests: list[bytes],
    *,
    existing: Mapping[str, list[dict[str, Any]]],
    generation: int | None,
    summary: str,
    retry_in: float | None,
    last: Mapping[ChildKey, Applied],
    written: MutableMapping[ChildKey, str] | None,
) -> tuple[list[dict[str, Any]], set[ChildKey]]:
    """Apply every child that would change (:mod:`mas_operator.noops`); on an API failure,
    say so in the status (with when it is retried), then re-raise. Returns each child's
    object (applied, or as it exists) and the keys of those not applied."""
    found = {(k, o["metadata"]["name"]): o for k, objs in existing.items() for o in objs}
    applied = []
    skipped: set[ChildKey] = set()
    for manifest, wanted in zip(desired, digests, strict=True):
        key = (str(manifest["kind"]), str(manifest["metadata"]["name"]))
        current = found.get(key)
        if current is not None and unchanged(current, wanted, last.get(key)):
            applied.append(current)
            skipped.add(key)
            continue
        try:
            result = cluster.apply(manifest)
            applied.append(result)
            if written is not None:
                written[key] = str(result["metadata"]["resourceVersion"])
        except ApiException as exc:
            meta = body["metadata"]
            what = f"applying {manifest['kind']} {manifest['metadata']['name']} failed"
            message = f"{what}: {api_message(exc)}"
            agents = _observe_agents(existing["Deployment"], existing["Service"])
            if exc.status in (400, 422):
                seen = Observed(generation, agents, APPLY_REFUSED, message, wiring_summary=summary)
            else:
                wait = None if retry_in is None else honour_retry_after(retry_in, retry_after(exc))
                seen = Observed(
                    generation, agents, wiring_summary=summary, apply_error=message, retry_in=wait
                )
            try:
                cluster.patch_status(
                    meta["namespace"], meta["name"], build_status(seen, body.get("status"))
                )
            except ApiException as status_exc:
                logger.warning(
                    "could not report %r in the status of %s/%s: %s",
                    message,
                    meta["namespace"],
                    meta["name"],
                    api_message(status_exc),
                )
            raise
    return applied, skipped


def _changes(current: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> bool:
    """Whether merge-patching ``patch`` into the status ``current`` would change it."""
    return bool(merge_patch(current or {}, patch) != (current or {}))


def reconcile(
    cluster: Cluster,
    body: Mapping[str, Any],
    *,
    retry_in: float | None = None,
    last: Mapping[ChildKey, Applied] | None = None,
    existing: Mapping[str, list[dict[str, Any]]] | None = None,
    written: MutableMapping[ChildKey, str] | None = None,
    verdicts: Mapping[str, CardVerdict] | None = None,
    console: str | None = None,
    api_server: ApiServer | None = None,
    denial_events: bool = True,
) -> Outcome:
    """Bring the children of ``body`` to what its spec asks; write its status.

    ``retry_in``: the backoff a failure of this attempt gets, for the status to say when the
    retry comes (a server's longer ``Retry-After`` wins, as in the handlers). ``last``: the
    previous reconcile's :attr:`Outcome.last_applied`; a child that is still exactly what it
    left is not applied again, and a status that would not change is not patched.
    ``existing``: the children of ``body`` by kind, as the operator's watches see them
    (:meth:`mas_operator.indexes.ChildIndex.children_of`); without it they are listed.
    ``written``: gets each child's resourceVersion as soon as its apply returns, so that the
    watch event of our own write, often handled before this reconcile ends, is known as ours.
    ``verdicts``: the latest AgentCard checks of the external endpoints, by url
    (:meth:`mas_operator.cardchecks.CardChecks.verdicts`); :attr:`Outcome.cards` says which
    urls this generation wants checked. ``console``: the install's console subject, which
    every agent admits, and ``api_server``, where their pods reach the API server
    (:func:`~mas_operator.plan.plan_application`); ``denial_events`` False: the install
    turned the agents' denial Events off.
    """
    meta = body["metadata"]
    name, namespace, uid = meta["name"], meta["namespace"], meta["uid"]
    generation = meta.get("generation")
    if existing is None:
        selector = application_selector(name)
        existing = {
            kind.kind: [
                o for o in cluster.list_children(kind, namespace, selector) if _owned_by(o, uid)
            ]
            for kind in CHILD_KINDS
        }
    try:
        plan = plan_application(
            _document(body), namespace, console, api_server, denial_events=denial_events
        )
    except ApplicationInvalid as error:
        reason, message = _stall(error)
        deployments = existing["Deployment"]
        kept = next(
            (d["metadata"].get("annotations", {}).get(ANNOTATION_GENERATION) for d in deployments),
            None,
        )
        seen = Observed(
            generation, _observe_agents(deployments, existing["Service"]), reason, message, kept
        )
        status = build_status(seen, body.get("status"))
        written_status = None
        if _changes(body.get("status"), status):
            written_status = cluster.patch_status(namespace, name, status)
        if _was_stalled(body) != (reason, generation):
            cluster.post_event(body, "Warning", reason, message)
        logger.warning("Application %s/%s is stalled (%s): %s", namespace, name, reason, message)
        return Outcome(phase_of(seen), seen, status_written=written_status)
    self_contained = not secret_names(plan) and not reads_jobs(body, plan)
    versions = cluster.secret_versions(namespace, secret_names(plan))
    desired = [owned(m, body) for m in build_children(plan, versions)]
    digests = [digest(m) for m in desired]  # each manifest's, once: the no-op check and memory
    applied, skipped = _apply_all(
        cluster,
        body,
        desired,
        digests,
        existing=existing,
        generation=generation,
        summary=_wiring_summary(plan),
        retry_in=retry_in,
        last=last or {},
        written=written,
    )
    wanted = {(m["kind"], m["metadata"]["name"]) for m in desired}
    deleted = 0
    for kind in CHILD_KINDS:
        for obj in existing[kind.kind]:
            if (kind.kind, obj["metadata"]["name"]) not in wanted:
                cluster.delete(kind, namespace, obj["metadata"]["name"])
                deleted += 1
    agents = _observe_agents(
        [a for a in applied if a.get("kind") == "Deployment"],
        [a for a in applied if a.get("kind") == "Service"],
    )
    conformance = sync_conformance(cluster, body, plan, desired, agents)
    checks = plan.app.spec.routes
    edges = plan_edges(plan)
    previous_routes = list((body.get("status") or {}).get("routes") or [])
    states = edge_states(
        edges,
        agents,
        check=checks.check_external,
        verdicts=verdicts,
        previous=previous_routes,
    )
    seen = Observed(
        generation,
        agents,
        wiring_summary=_wiring_summary(plan),
        url_notes=tuple(str(note) for note in plan.notes),
        conformance=conformance,
        routes=states,
    )
    status = build_status(seen, body.get("status"))
    written_status = None
    if _changes(body.get("status"), status):
        written_status = cluster.patch_status(namespace, name, status)
    announce_edges(cluster, body, states, previous_routes)
    warn_on_pod_local_urls(cluster, body, status, seen.url_notes)
    warn_when_not_conformant(cluster, body, status)
    logger.debug(
        "Application %s/%s: applied %d children (%d unchanged, not applied), deleted %d, %s ready",
        namespace,
        name,
        len(applied) - len(skipped),
        len(skipped),
        deleted,
        seen.agents_ready,
    )
    pairs = [
        ((str(m["kind"]), str(m["metadata"]["name"])), d, a)
        for m, d, a in zip(desired, digests, applied, strict=True)
    ]
    applied_kinds = Counter(key[0] for key, _, _ in pairs if key not in skipped)
    written = {key: str(a["metadata"]["resourceVersion"]) for key, _, a in pairs}
    remembered = {key: memory_of(d, a) for key, d, a in pairs}
    return Outcome(
        phase_of(seen),
        seen,
        dict(applied_kinds),
        deleted,
        written,
        remembered,
        self_contained,
        written_status,
        CardWant(
            card_targets(edges),
            CheckSettings(checks.check_interval_seconds, checks.check_timeout_seconds)
            if checks.check_external
            else None,
        ),
    )

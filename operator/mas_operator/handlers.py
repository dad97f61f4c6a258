"""The kopf handlers and the reconcile the work queue runs: kopf watches, the queue decides.

- kopf handlers only watch (no create/update/resume handler, so kopf neither retries nor
  patches its own annotations; no finalizers: a kopf daemon or timer would add one, and a
  finalizer wedges namespace deletion while the operator is down). An Application's
  events keep an in-memory copy of it and enqueue it when it is new or anything a
  reconcile reads of it but its status changed (a new spec, labels, a
  ``maslab.io/conformance-run``, a deletion); its deletion forgets it. Events of the
  children we manage and of conformance Jobs enqueue their owner, but for the echo of our
  own apply.
- The :class:`~mas_operator.workqueue.WorkQueue` decides when each Application is
  reconciled and retried (:func:`serve` runs its loop); :func:`reconcile_key` is the only
  work it does: :func:`run_reconcile` on the newest copy. Every :data:`COLD_EVERY`-th full
  pass is cold: each Application, settled or not, is reconciled from its children as the
  API server lists them (the indexes can keep a child deleted while a watch re-listed).
- An invalid spec is reported (``Stalled``) and not retried: the next edit is handled. A
  child the API server refuses (400, 422) is reported and not retried either. Any other
  API failure (another answer, a connection error, a timeout) is recorded in the queue,
  which retries the Application when its backoff (:mod:`mas_operator.backoff`) or the
  server's ``Retry-After`` is due, not sooner; a new generation is tried at once.
- A reconcile reads the children of its Application from the watches' indexes
  (:mod:`mas_operator.indexes`), not with a LIST, and runs in the operator's own worker
  threads (:data:`RECONCILE_WORKERS`), so a burst of reconciles never queues the Lease
  renewals, which use the loop's default executor.
- The opt-in AgentCard checks of external endpoints (:mod:`mas_operator.cardchecks`) run
  on the loop beside the reconciles: a reconcile is given their latest verdicts and says
  which urls its Application wants checked; a verdict that changes enqueues it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import time
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kopf
import urllib3
from kubernetes.client import ApiException

from mas.infra.models import API_GROUP, API_VERSION, PLURAL
from mas.telemetry import tracing
from mas_operator import indexes
from mas_operator.backoff import (
    describe_delay,
    failure_reason,
    honour_retry_after,
)
from mas_operator.cardchecks import CardChecks
from mas_operator.children import CHILD_KINDS
from mas_operator.conformance.step import JOB_KIND
from mas_operator.indexes import ChildIndex
from mas_operator.kube import Cluster, api_message, retry_after
from mas_operator.metrics import OperatorMetrics
from mas_operator.names import (
    ANNOTATION_DIFFBASE,
    KOPF_ANNOTATIONS,
    MANAGED_BY,
)
from mas_operator.noops import digest
from mas_operator.plan import ApiServer
from mas_operator.reconcile import Outcome, reconcile
from mas_operator.status_writes import after_write, known_status
from mas_operator.workqueue import WorkQueue

logger = logging.getLogger(__name__)

RECONCILE_WORKERS = 6  # threads running reconciles (the default executor's size on 2 cores)
COLD_EVERY = 60  # every 60th full pass (30 min at the default resync) reads them from the API


@dataclass
class OperatorContext:
    """What every handler of one operator instance shares (all on the operator's loop):
    the newest copy of each Application, and the :class:`WorkQueue` that holds every
    scheduling fact about it."""

    cluster: Cluster
    metrics: OperatorMetrics
    resync: float = 30.0
    cold_every: int = COLD_EVERY  # full passes; every such one is cold (0: never)
    console: str | None = None  # the install's console subject, admitted by agents ...
    console_namespaces: tuple[str, ...] = ()  # ... of these namespaces (empty: every one)
    api_server: ApiServer = field(default_factory=ApiServer)  # agents reach it for keys
    denial_events: bool = True  # off: no agent gets the events Role (--no-denial-events)
    # uid: the newest copy of each Application (kept_copy), as compact JSON deflated: a
    # small part of its size as dicts, and read only when a reconcile or a conformance-run
    # check needs it
    apps: dict[str, bytes] = field(default_factory=dict)
    queue: WorkQueue = field(default_factory=WorkQueue)
    children: ChildIndex | None = None  # from the first handler kopf calls
    cards: CardChecks = field(init=False)  # the opt-in AgentCard checks (on_change: enqueue)
    _workers: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        self.cards = CardChecks(self.queue.enqueue)

    def console_for(self, namespace: str) -> str | None:
        """The console subject the agents of ``namespace`` admit, or None."""
        if self.console_namespaces and namespace not in self.console_namespaces:
            return None
        return self.console

    @property
    def closing(self) -> bool:
        return self.queue.closing

    def close(self) -> None:
        """Make the queue's loop return, stop the card checks and the reconcile threads."""
        self.queue.close()
        self.cards.close()
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)

    def see_indexes(self, kwargs: Mapping[str, Any]) -> None:
        """Keep the children's indexes kopf passes every handler (once)."""
        if self.children is None:
            self.children = ChildIndex.from_kwargs(kwargs)

    async def in_worker(self, call: functools.partial[Outcome]) -> Outcome:
        """Run ``call`` in one of the reconcile threads (with this task's context)."""
        if self._workers is None:
            self._workers = ThreadPoolExecutor(RECONCILE_WORKERS, "reconcile")
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers, context.run, call)

    def reads_as_settled(self, uid: str, current: Mapping[str, Any]) -> bool:
        """Whether ``uid`` is settled and ``current`` (with the status it has now, as
        :func:`~mas_operator.status_writes.known_status` gives it) reads as its last reconcile
        left it: reconciling it again would do nothing."""
        left = self.queue.settled_as(uid)
        return left is not None and application_inputs(current) == left

    def remember(self, body: Mapping[str, Any]) -> None:
        """Keep the newest copy of an Application; it is no longer settled when a reconcile
        would read it differently from what the last reconcile left."""
        uid = str(body["metadata"]["uid"])
        text = json.dumps(kept_copy(body), separators=(",", ":")).encode()
        self.apps[uid] = zlib.compress(text, zlib.Z_BEST_SPEED)
        self.queue.track(uid)
        # A version from before our status write (kopf's handler can be called with it
        # after a resync pass reconciled it) reads with the status that write left.
        if self.queue.settled_as(uid) is not None and not self.reads_as_settled(
            uid, known_status(body, self.queue.written_status(uid))
        ):
            self.queue.unsettle(uid)

    def app(self, uid: str) -> dict[str, Any] | None:
        """The newest copy of the Application ``uid`` kept by :meth:`remember`."""
        kept = self.apps.get(uid)
        if kept is None:
            return None
        copy: dict[str, Any] = json.loads(zlib.decompress(kept))
        return copy

    def forget(self, uid: str) -> None:
        """The Application ``uid`` was deleted: drop everything kept about it."""
        self.apps.pop(uid, None)
        self.queue.forget(uid)
        self.cards.forget(uid)
        self.cluster.edges_warned.pop(uid, None)
        self.metrics.set_phase(uid, None)


def kept_copy(body: Mapping[str, Any]) -> dict[str, Any]:
    """The copy of an Application the operator keeps between events: all of it but its
    ``managedFields`` and kopf's diff base (the spec again, as JSON), which no reconcile
    reads."""
    kept = dict(body)
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    annotations = meta.get("annotations")
    if annotations and ANNOTATION_DIFFBASE in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != ANNOTATION_DIFFBASE}
    kept["metadata"] = meta
    return kept


def application_inputs(body: Mapping[str, Any]) -> bytes:
    """What a reconcile reads of an Application, by content: all of it but what only
    bookkeeping changes (its ``resourceVersion``, ``managedFields`` and kopf's own
    annotations). Our status write and kopf's patch after the handler each make a new
    version; neither changes this, unless the status itself changed."""
    meta = {
        k: v
        for k, v in (body.get("metadata") or {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    # kopf's first patch adds the annotations map itself: none and only kopf's are the same
    annotations = {
        k: v for k, v in (meta.pop("annotations", None) or {}).items() if k not in KOPF_ANNOTATIONS
    }
    if annotations:
        meta["annotations"] = annotations
    return digest({**body, "metadata": meta})


def spec_inputs(body: Mapping[str, Any]) -> bytes:
    """What a reconcile reads of an Application but its status (:func:`application_inputs`
    without it): what changes when someone edits it, not when a status is written."""
    return application_inputs({**body, "status": None})


async def serve(ctx: OperatorContext) -> None:
    """Run the work queue's loop until the context closes: the one place reconciles run."""

    def full_pass(settled: int, cold: bool) -> None:
        ctx.metrics.resync_passes.inc()
        ctx.metrics.resync_settled.inc(settled)
        if cold:
            ctx.metrics.cold_passes.inc()

    await ctx.queue.run(
        functools.partial(reconcile_key, ctx),
        resync=ctx.resync,
        workers=RECONCILE_WORKERS,
        cold_every=ctx.cold_every,
        full_pass=full_pass,
    )


async def reconcile_key(ctx: OperatorContext, uid: str) -> None:
    """Reconcile the newest copy of the Application ``uid`` (the queue's work)."""
    body = ctx.app(uid)
    if body is None or body["metadata"].get("deletionTimestamp"):
        ctx.queue.finished(uid)  # nothing left to retry
        return
    await run_reconcile(ctx, body, cold=ctx.queue.is_cold(uid))


async def run_reconcile(
    ctx: OperatorContext, body: Mapping[str, Any], *, cold: bool = False
) -> Outcome | None:
    """Reconcile one Application under its lock; record the metrics and, on an API
    failure, the next retry in the queue. Then judge the children seen while it ran (no
    await in between, so no other reconcile of it has started).

    None: nothing was done, because ``body`` reads as the last reconcile left it while
    it is settled, or the reconcile failed (recorded, and logged).

    ``cold``: ignore ``settled`` and read the children from the API server, not from the
    watches' indexes (which can keep a child deleted while a watch re-listed)."""
    try:
        return await _run_reconcile(ctx, body, cold)
    finally:
        ctx.queue.judge_held(str(body["metadata"]["uid"]))


async def _run_reconcile(
    ctx: OperatorContext, body: Mapping[str, Any], cold: bool
) -> Outcome | None:
    snapshot = dict(body)
    meta = snapshot["metadata"]
    uid, generation = str(meta["uid"]), meta.get("generation")
    queue = ctx.queue
    async with queue.lock(uid):
        planned = queue.next_delay(uid)
        # A copy older than our last status write is compared with what that write left.
        snapshot = known_status(snapshot, queue.written_status(uid))
        if not cold and ctx.reads_as_settled(uid, snapshot):
            return None
        # Read on the loop, where kopf updates the indexes; None: the reconcile LISTs them.
        index = None if cold else ctx.children
        existing = index.children_of(uid) if index is not None else None
        written = queue.begin(uid)  # unsettled; filled as it applies
        checked = ctx.cards.version(uid)  # a verdict that changes meanwhile: reconcile again
        started = time.perf_counter()
        attributes = {
            "k8s.namespace.name": meta.get("namespace"),
            "mas.application": meta.get("name"),
            "mas.generation": generation,
        }
        try:
            with tracing.span("reconcile Application", attributes=attributes) as span:
                outcome = await ctx.in_worker(
                    functools.partial(
                        reconcile,
                        ctx.cluster,
                        snapshot,
                        retry_in=planned,
                        last=queue.last_applied(uid),
                        existing=existing,
                        written=written,
                        verdicts=ctx.cards.verdicts(uid),
                        console=ctx.console_for(str(meta.get("namespace"))),
                        api_server=ctx.api_server,
                        denial_events=ctx.denial_events,
                    )
                )
                if span is not None:
                    span.set_attribute("mas.phase", outcome.phase)
        except ApiException as exc:
            ctx.metrics.reconciles.labels(outcome="error").inc()
            detail = f"the API server answered {exc.status}: {api_message(exc)}"
            if exc.status in (400, 422):
                queue.refused(uid)  # its error path may have written a status
                logger.warning(
                    "Application %s/%s: a child object was refused: %s; not retried until "
                    "something it reads changes",
                    meta["namespace"],
                    meta["name"],
                    detail,
                )
                return None
            delay = honour_retry_after(planned, retry_after(exc))
            _retry_later(ctx, snapshot, exc.status, detail, delay)
            return None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            ctx.metrics.reconciles.labels(outcome="error").inc()
            detail = f"the API server could not be reached: {exc}"
            _retry_later(ctx, snapshot, None, detail, planned)
            return None
        finally:
            ctx.metrics.duration.observe(time.perf_counter() - started)
    ctx.metrics.reconciles.labels(outcome=outcome.phase.lower()).inc()
    ctx.metrics.set_phase(uid, outcome.phase)
    status = None
    if outcome.status_written is not None:
        status = after_write(snapshot, outcome.status_written, queue.written_status(uid))
    queue.finished(uid, versions=outcome.versions, last_applied=outcome.last_applied, status=status)
    if outcome.self_contained and (existing is not None or cold):
        # Settled: the next reconcile would read the Application as our status write left
        # it (or as read) and the children as our applies left them, so it would do
        # nothing. The echoes of those writes keep it settled; any other change of the
        # Application (remember) or event of a child (enqueue) unsettles it.
        settled_as = snapshot if outcome.status_written is None else outcome.status_written
        queue.settle(uid, application_inputs(settled_as))
    if outcome.cards is not None and uid in ctx.apps:  # not for one deleted meanwhile
        ctx.cards.want(uid, outcome.cards.urls, outcome.cards.settings)
    if ctx.cards.version(uid) != checked:
        queue.enqueue(uid)  # this reconcile read an older verdict
    for kind, count in outcome.applied.items():
        ctx.metrics.children_applied.labels(kind=kind).inc(count)
    return outcome


def _retry_later(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    status: int | None,
    detail: str,
    delay: float,
) -> None:
    """Record the failure in the queue (which retries it when ``delay`` is over), count
    the retry, log it."""
    meta = body["metadata"]
    failing = ctx.queue.failed(
        str(meta["uid"]), delay, generation=meta.get("generation"), message=detail
    )
    ctx.metrics.retries.labels(reason=failure_reason(status)).inc()
    message = f"{detail}; retrying in {describe_delay(delay)} (failure {failing.failures} in a row)"
    logger.warning("Application %s/%s: %s", meta["namespace"], meta["name"], message)


def register(registry: kopf.OperatorRegistry) -> None:
    """Register every handler of the operator into ``registry``."""
    resource = (API_GROUP, API_VERSION, PLURAL)
    indexes.register(registry)

    @kopf.on.event(*resource, id="track", registry=registry)
    async def track_application(
        body: kopf.Body, type: str | None, memo: kopf.Memo, **kwargs: Any
    ) -> None:
        ctx: OperatorContext = memo["ctx"]
        ctx.see_indexes(kwargs)  # before the queue can reconcile this Application
        uid = str(body.metadata.uid)
        if type == "DELETED":
            ctx.forget(uid)
            return
        before = ctx.app(uid)
        ctx.remember(body)
        if before is None or spec_inputs(before) != spec_inputs(body):
            ctx.queue.enqueue(uid, body.metadata.get("generation"))

    for kind in (*CHILD_KINDS, JOB_KIND):  # a conformance Job's status carries its verdict
        group, _, version = kind.api_version.rpartition("/")

        @kopf.on.event(
            group=group,
            version=version,
            plural=kind.plural,
            id=f"watch-{kind.plural}",
            registry=registry,
            labels={"app.kubernetes.io/managed-by": MANAGED_BY},
        )
        async def child_changed(
            body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any
        ) -> None:
            ctx: OperatorContext = memo["ctx"]
            for ref in body.metadata.get("ownerReferences") or []:
                if ref.get("kind") != "Application":
                    continue
                uid = str(ref.get("uid"))
                if type == "DELETED":
                    ctx.queue.enqueue(uid)
                else:
                    ctx.queue.child_seen(uid, body)  # drift, a status; not our own echo

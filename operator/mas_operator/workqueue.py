"""The work queue: every per-Application scheduling fact, and the one loop that reconciles.

One :class:`WorkQueue` per operator, keyed by an Application's uid, used from the
operator's event loop only (not thread-safe). It holds what decides whether and when a key
is reconciled: which keys exist, which are dirty and since when, the backoff and
``Retry-After`` of the failing ones (:class:`~mas_operator.backoff.Retries`), the versions
our own last writes returned (children and status), which keys are settled, the children
seen while a key's reconcile ran, and the lock that keeps two reconciles of one key apart.
Its :meth:`WorkQueue.run` loop is the only caller of a reconcile, first tries and retries
alike: the kopf handlers (:mod:`mas_operator.handlers`) only remember objects and
:meth:`~WorkQueue.enqueue`; kopf itself never retries anything.

Invariants:

- **Tracked keys only.** :meth:`enqueue` marks a key dirty only once :meth:`track` has
  seen it; :meth:`forget` drops every fact about a key in one call, and a forgotten key
  is never handed out again until it is tracked again.
- **A burst is one reconcile.** A dirty key is due once no :meth:`enqueue` came for
  :data:`COALESCE` seconds, or :data:`COALESCE_LIMIT` seconds after the first one, so a
  stream of edits never starves it.
- **Never before its backoff.** A key whose last reconcile failed (:meth:`failed`) is not
  handed out before its retry is due, whoever asks; it stays dirty meanwhile. An
  :meth:`enqueue` with a new generation forgets the failures: a new spec is tried at
  once. :meth:`finished` forgets them too.
- **Handed out once, one at a time.** :meth:`take` removes what it hands out from the
  dirty set and marks it active until its work is done; an active key is never handed
  out again, and an :meth:`enqueue` meanwhile makes it due again after the work ends, so
  a change seen mid-reconcile is reconciled after it, never lost nor run beside it.
- **Our own echoes are not changes.** A child event whose ``resourceVersion`` is what our
  last apply of that child returned (:meth:`is_own_write`) neither dirties nor unsettles;
  one that arrives while the key's reconcile runs is held (:meth:`child_seen`) and judged
  when it ends (:meth:`judge_held`), after the reconcile recorded what its applies
  returned.
- **Settled means nothing changed.** A key is settled (:meth:`settle`) only by a
  successful reconcile that read nothing but the Application and its children; any
  :meth:`enqueue`, :meth:`unsettle` or :meth:`begin` ends it. A full pass (every
  ``resync`` seconds) hands out every key that is not settled.
- **Full passes never overlap.** A full pass begins only once the work on every key the
  previous one handed out is done (:meth:`done`): when a pass takes longer than
  ``resync``, the next one waits for it, so once a pass has begun after some moment, the
  one before it saw everything written before that moment and has finished.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mas_operator.backoff import Backoff, Failing, Retries
from mas_operator.noops import Applied, ChildKey
from mas_operator.status_writes import WrittenStatus

logger = logging.getLogger(__name__)

Seen = tuple[str, str, str]  # a child event: (kind, name, resourceVersion)

COALESCE = 0.5  # seconds a dirty key waits for no further enqueue
COALESCE_LIMIT = 10.0  # seconds a dirty key waits at most for its burst to end


class WorkQueue:
    """Per-Application scheduling state behind one API (see the module's invariants)."""

    def __init__(
        self,
        backoff: Backoff | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        spread: Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self._retries = Retries(backoff, clock=clock, spread=spread)
        self._keys: set[str] = set()
        self._clock = clock
        self._dirty: dict[str, tuple[float, float]] = {}  # uid: (first, last) enqueue
        self._active: set[str] = set()  # handed out, its work not done yet
        self._cold: set[str] = set()  # to be handed out once with cold=True
        self._pass: set[str] = set()  # handed out by the last full pass, not done yet
        self._written: dict[str, Mapping[ChildKey, str]] = {}
        self._last_applied: dict[str, Mapping[ChildKey, Applied]] = {}
        self._settled: dict[str, bytes] = {}
        self._statuses: dict[str, WrittenStatus] = {}
        self._held: dict[str, list[Seen]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._wake = asyncio.Event()
        self.closing = False

    # -- keys ------------------------------------------------------------------------

    def track(self, uid: str) -> None:
        """Know ``uid`` (an Application that exists); :meth:`enqueue` needs it known."""
        self._keys.add(uid)

    def keys(self) -> set[str]:
        """Every tracked key (a new set)."""
        return set(self._keys)

    def __contains__(self, uid: object) -> bool:
        return uid in self._keys

    def forget(self, uid: str) -> None:
        """Drop every fact about ``uid`` (the Application was deleted)."""
        self._keys.discard(uid)
        self._dirty.pop(uid, None)
        self._cold.discard(uid)
        self._locks.pop(uid, None)
        self._written.pop(uid, None)
        self._last_applied.pop(uid, None)
        self._settled.pop(uid, None)
        self._statuses.pop(uid, None)
        self._held.pop(uid, None)
        self._retries.succeeded(uid)

    # -- asking for a reconcile ---------------------------------------------------------

    def enqueue(self, uid: str, generation: int | None = None) -> None:
        """Something ``uid`` reads changed: unsettle it and reconcile it soon. With a
        ``generation`` other than the failed one, its failures are forgotten."""
        self._settled.pop(uid, None)
        if uid not in self._keys:
            return
        failing = self._retries.state(uid)
        if generation is not None and failing is not None and failing.generation != generation:
            self._retries.succeeded(uid)
        now = self._clock()
        earlier = self._dirty.get(uid)
        self._dirty[uid] = (now if earlier is None else earlier[0], now)
        if earlier is None:  # newly dirty: the loop recomputes when to wake
            self._wake.set()

    def is_dirty(self, uid: str) -> bool:
        return uid in self._dirty

    def _due_at(self, uid: str, now: float) -> float:
        """When ``uid`` may be handed out (on the queue's clock, which reads ``now``)."""
        at = now + self._retries.wait(uid)
        if uid in self._dirty:
            first, last = self._dirty[uid]
            at = max(at, min(last + COALESCE, first + COALESCE_LIMIT))
        return at

    def take(self, full: bool = False, cold: bool = False) -> list[str]:
        """The keys due now, sorted, each removed from the dirty set and marked active:
        the dirty ones whose burst is over, the failing ones whose backoff is due, with
        ``full`` every tracked key not settled, and with ``cold`` every tracked key, each
        marked for one cold reconcile (:meth:`is_cold`). A key that is active, still
        coalescing or backing off is not handed out (and stays dirty, or cold)."""
        if cold:
            self._cold = set(self._keys)
        wanted = set(self._dirty) | {str(k) for k in self._retries.failing()} | self._cold
        if full:
            wanted |= self.unsettled()
        now = self._clock()
        due = sorted(u for u in wanted - self._active if self._due_at(u, now) <= now)
        for uid in due:
            self._dirty.pop(uid, None)
            self._active.add(uid)
        return due

    def done(self, uid: str) -> None:
        """The work on ``uid`` handed out by :meth:`take` ended (whatever its result)."""
        self._active.discard(uid)
        if uid in self._dirty:
            self._wake.set()  # enqueued meanwhile: due again
        if uid in self._pass:
            self._pass.discard(uid)
            if not self._pass:
                self._wake.set()  # the last work of a full pass: the next may begin

    def next_due(self) -> float | None:
        """Seconds until the earliest dirty or failing key that is not active may be
        handed out (``None``: none)."""
        failing = {str(k) for k in self._retries.failing()}
        waiting = (set(self._dirty) | failing | self._cold) - self._active
        if not waiting:
            return None
        now = self._clock()
        return max(0.0, min(self._due_at(u, now) for u in waiting) - now)

    def is_cold(self, uid: str) -> bool:
        """Whether the next reconcile of ``uid`` is cold: it ignores ``settled`` and reads
        the children from the API server, not from the watches' indexes."""
        return uid in self._cold

    def unsettled(self) -> set[str]:
        """Every tracked key that is not settled."""
        return {uid for uid in self._keys if uid not in self._settled}

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an :meth:`enqueue`, a :meth:`failed` or
        :meth:`close`; whether one came (then the wake-up is consumed)."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            woken = True
        except TimeoutError:
            woken = False
        self._wake.clear()
        return woken

    def close(self) -> None:
        """Make a loop waiting on :meth:`wait` return and see :attr:`closing` (a flag, not
        only a cancellation: Python 3.11's ``wait_for`` can swallow a cancellation that
        races with the event it waits for)."""
        self.closing = True
        self._wake.set()

    async def run(
        self,
        work: Callable[[str], Awaitable[None]],
        *,
        resync: float,
        workers: int,
        cold_every: int = 0,
        full_pass: Callable[[int, bool], None] = lambda settled, cold: None,
    ) -> None:
        """Hand out every key when it is due to ``work`` (at most ``workers`` at once)
        until :meth:`close`: dirty keys once their burst is over, failing ones when their
        backoff is due, and every ``resync`` seconds every key that is not settled
        (``full_pass`` is told how many it left alone), once the previous full pass's
        work is done. Every ``cold_every``-th full pass (0: never) is cold: every key is
        handed out, :meth:`is_cold` while its work runs.
        ``work`` records its own failures (:meth:`failed`); one that raises is logged and
        retried with backoff, and never ends the loop."""
        slots = asyncio.Semaphore(workers)
        tasks: set[asyncio.Task[None]] = set()
        last_full = self._clock()
        passes = 0
        try:
            while not self.closing:
                overdue = self._clock() - last_full >= resync
                full = overdue and not self._pass  # the previous pass's work is done
                cold = False
                if full:
                    last_full = self._clock()
                    passes += 1
                    cold = cold_every > 0 and passes % cold_every == 0
                    full_pass(0 if cold else len(self._keys & set(self._settled)), cold)
                handed = self.take(full=full, cold=cold)
                if full:
                    self._pass = set(handed)
                for uid in handed:
                    task = asyncio.create_task(self._work_on(uid, work, slots))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                # a pass that waits for the last one's work is woken by done()
                timeout = resync if overdue and not full else resync - (self._clock() - last_full)
                timeout = max(0.0, timeout)
                retry = self.next_due()
                await self.wait(timeout if retry is None else min(timeout, retry))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _work_on(
        self, uid: str, work: Callable[[str], Awaitable[None]], slots: asyncio.Semaphore
    ) -> None:
        try:
            async with slots:
                # what it reads from now on is the newest: an enqueue before this is covered
                self._dirty.pop(uid, None)
                await work(uid)
                if self._retries.state(uid) is None:  # a failed one stays cold for its retry
                    self._cold.discard(uid)
        except Exception as exc:  # a bug must not end the loop that repairs every key
            logger.exception("reconciling %s failed", uid)
            if uid in self._keys:  # and is not retried at every wake-up either
                self.failed(uid, self.next_delay(uid), message=f"reconciling failed: {exc!r}")
        finally:
            self.done(uid)

    # -- one reconcile -------------------------------------------------------------------

    def lock(self, uid: str) -> asyncio.Lock:
        """The lock a reconcile of ``uid`` holds while it runs."""
        return self._locks.setdefault(uid, asyncio.Lock())

    def running(self, uid: str) -> bool:
        lock = self._locks.get(uid)
        return lock is not None and lock.locked()

    def wait_before_retry(self, uid: str, generation: int | None) -> float:
        """Seconds until ``uid`` may be tried again for ``generation`` (0: now)."""
        return self._retries.wait(uid, generation)

    def failure(self, uid: str) -> Failing | None:
        """The last failure of ``uid``, while it is failing."""
        return self._retries.state(uid)

    def next_delay(self, uid: str) -> float:
        """The backoff the next failure of ``uid`` would get (a fresh jitter each call)."""
        return self._retries.next_delay(uid)

    def failed(
        self, uid: str, delay: float, *, generation: int | None = None, message: str = ""
    ) -> Failing:
        """Record a failure: ``uid`` is retried ``delay`` seconds from now, not sooner.
        Forgets the status write record (the error path may have written a status)."""
        self._statuses.pop(uid, None)
        failing = self._retries.failed(uid, delay, generation=generation, message=message)
        self._wake.set()  # a loop waiting on wait() recomputes its deadline
        return failing

    def refused(self, uid: str) -> None:
        """A reconcile of ``uid`` failed where a retry cannot help (the API server refused
        a child): forget the status write record (its error path may have written one)."""
        self._statuses.pop(uid, None)

    def begin(self, uid: str) -> dict[ChildKey, str]:
        """A reconcile of ``uid`` starts: it is no longer settled. Returns the record of
        our writes of its children, for the reconcile to fill as each apply returns."""
        self._settled.pop(uid, None)
        written = self._written[uid] = dict(self._written.get(uid, {}))
        return written

    def finished(
        self,
        uid: str,
        *,
        versions: Mapping[ChildKey, str] | None = None,
        last_applied: Mapping[ChildKey, Applied] | None = None,
        status: WrittenStatus | None = None,
    ) -> None:
        """A reconcile of ``uid`` succeeded: forget its failures; keep what its writes
        returned (``versions`` and ``last_applied`` of its children when it applied any,
        the record of its ``status`` write when it wrote one)."""
        self._retries.succeeded(uid)
        if versions:
            self._written[uid] = versions
            self._last_applied[uid] = last_applied or {}
        if status is not None:
            self._statuses[uid] = status

    def last_applied(self, uid: str) -> Mapping[ChildKey, Applied] | None:
        return self._last_applied.get(uid)

    def written_status(self, uid: str) -> WrittenStatus | None:
        """The record of our last status write of ``uid``."""
        return self._statuses.get(uid)

    # -- settled -----------------------------------------------------------------------

    def settle(self, uid: str, inputs: bytes) -> None:
        """``uid``'s last reconcile left it reading as ``inputs``
        (:func:`~mas_operator.handlers.application_inputs`) and read nothing else."""
        self._settled[uid] = inputs

    def unsettle(self, uid: str) -> None:
        self._settled.pop(uid, None)

    def settled_as(self, uid: str) -> bytes | None:
        """What ``uid`` read as when it settled (``None``: not settled)."""
        return self._settled.get(uid)

    def is_settled(self, uid: str) -> bool:
        """Whether reconciling ``uid`` again would read exactly what its last one left."""
        return uid in self._settled and uid in self._keys

    # -- child events ---------------------------------------------------------------------

    def is_own_write(self, uid: str, seen: Seen) -> bool:
        """Whether the child ``seen`` is exactly the version our last apply returned."""
        kind, name, version = seen
        return self._written.get(uid, {}).get((kind, name)) == version

    def child_seen(self, uid: str, body: Mapping[str, Any]) -> None:
        """A child of ``uid`` was added or modified: enqueue ``uid`` unless this is the
        echo of our own apply. While a reconcile of ``uid`` runs, the echo of its apply can
        arrive before the reconcile's thread has recorded the version that apply returned,
        so the child is held and judged when the reconcile ends (:meth:`judge_held`)."""
        meta = body.get("metadata") or {}
        seen = (str(body.get("kind")), str(meta.get("name")), str(meta.get("resourceVersion")))
        if self.running(uid):
            self._held.setdefault(uid, []).append(seen)
        elif not self.is_own_write(uid, seen):
            self.enqueue(uid)

    def judge_held(self, uid: str) -> None:
        """Enqueue ``uid`` if a child held during its reconcile was not our own write."""
        if not all(self.is_own_write(uid, seen) for seen in self._held.pop(uid, ())):
            self.enqueue(uid)

    def holding(self, uid: str) -> int:
        """How many child events of ``uid`` wait for its reconcile to end."""
        return len(self._held.get(uid, ()))

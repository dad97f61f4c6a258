"""The resync loop: dirty Applications soon, failing ones when due, the others each pass.

- A child event or a new ``maslab.io/conformance-run`` marks an Application dirty
  (:mod:`mas_operator.handlers`); the loop wakes, lets a burst coalesce (:data:`COALESCE`),
  and reconciles it, :data:`RESYNC_CONCURRENCY` at a time.
- An Application whose last reconcile failed is retried when its backoff is due, never
  before.
- Every ``resync`` seconds a full pass reconciles every Application that is not settled:
  one is settled when its last reconcile succeeded, read nothing but the Application and
  its children (no Secret, no conformance Job: ``Outcome.self_contained``) and neither
  has changed since but by that reconcile's own writes: no event of a child other than
  the echo of our apply, and no version of the Application that reads differently from
  what our status write left (:func:`~mas_operator.handlers.application_inputs`; kopf's
  own annotation patch after its handler is no change). Reconciling it again would read
  the same and so write nothing: at 1,000 Applications neither the pass after convergence
  nor an idle pass reconciles anything. The echoes of our writes may come long after the
  reconcile (kopf's watch lags under load); they keep it settled.
"""

from __future__ import annotations

import asyncio
import logging
import time

import kopf

from mas_operator.handlers import OperatorContext, RetryNotDue, run_reconcile

logger = logging.getLogger(__name__)

COALESCE = 0.2
RESYNC_CONCURRENCY = 4  # Applications reconciled at once by the resync loop


def is_settled(ctx: OperatorContext, uid: str) -> bool:
    """Whether reconciling ``uid`` again would read exactly what its last reconcile left."""
    return ctx.queue.is_settled(uid)


async def resync_loop(ctx: OperatorContext) -> None:
    """Reconcile dirty Applications soon, every unsettled one each ``ctx.resync`` seconds,
    and the failing ones when their backoff is due (never before)."""
    queue = ctx.queue
    last_full = time.monotonic()
    slots = asyncio.Semaphore(RESYNC_CONCURRENCY)
    while not queue.closing:
        remaining = max(0.0, ctx.resync - (time.monotonic() - last_full))
        retry = queue.next_due()
        timeout = remaining if retry is None else min(remaining, retry)
        if await queue.wait(timeout):
            await asyncio.sleep(COALESCE)  # let a burst of child events coalesce
        if queue.closing:
            return
        full = time.monotonic() - last_full >= ctx.resync
        if full:
            last_full = time.monotonic()
            ctx.metrics.resync_passes.inc()
            ctx.metrics.resync_settled.inc(len(queue.keys() - queue.unsettled()))
        due = queue.take(full=full)
        await asyncio.gather(*(_resync_one(ctx, uid, slots) for uid in due))


async def _resync_one(ctx: OperatorContext, uid: str, slots: asyncio.Semaphore) -> None:
    body = ctx.app(uid)
    if body is None or body["metadata"].get("deletionTimestamp"):
        ctx.queue.finished(uid)  # nothing left to retry
        return
    async with slots:
        meta = body["metadata"]
        try:
            await run_reconcile(ctx, body)
        except RetryNotDue:
            pass  # another path tried it meanwhile and failed; the loop waits for it
        except (kopf.PermanentError, kopf.TemporaryError) as exc:
            logger.warning("resync of %s/%s failed: %s", meta["namespace"], meta["name"], exc)
        except Exception as exc:  # a bug must not end the loop that repairs every Application
            logger.exception("resync of %s/%s failed", meta["namespace"], meta["name"])
            ctx.queue.failed(  # and is not retried at every wake-up either
                uid,
                ctx.queue.next_delay(uid),
                generation=meta.get("generation"),
                message=f"reconciling failed: {exc!r}",
            )

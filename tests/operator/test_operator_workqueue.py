"""The work queue's invariants, through its API only (pure: an injected clock, no sockets)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mas_operator.backoff import Backoff
from mas_operator.status_writes import WrittenStatus
from mas_operator.workqueue import COALESCE, COALESCE_LIMIT, WorkQueue

pytestmark = pytest.mark.timeout(10)

A, B = "uid-a", "uid-b"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(clock: Clock) -> WorkQueue:
    made = WorkQueue(Backoff(initial=1.0, cap=8.0, jitter=0.0), clock=clock, spread=lambda: 0.0)
    made.track(A)
    made.track(B)
    return made


def child(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Service", "metadata": {"name": name, "resourceVersion": version}}


def test_an_untracked_key_is_never_handed_out() -> None:
    queue = WorkQueue()
    queue.enqueue("stranger")
    assert queue.take(full=True) == []
    assert not queue.is_dirty("stranger")


def test_a_dirty_key_is_handed_out_once(queue: WorkQueue, clock: Clock) -> None:
    queue.enqueue(A)
    queue.enqueue(A)
    clock.now += COALESCE
    assert queue.take() == [A]
    assert queue.take() == []
    assert not queue.is_dirty(A)


def test_a_burst_is_handed_out_once_it_is_over(queue: WorkQueue, clock: Clock) -> None:
    for _ in range(20):  # an edit every tenth of a second for two seconds
        queue.enqueue(A)
        assert queue.next_due() == pytest.approx(COALESCE)
        clock.now += 0.1
        assert queue.take() == []
    clock.now += COALESCE
    assert queue.take() == [A]


def test_a_burst_that_never_ends_is_handed_out_at_the_limit(queue: WorkQueue, clock: Clock) -> None:
    started = clock.now
    while queue.take() == []:
        queue.enqueue(A)
        clock.now += 0.1
    assert clock.now - started == pytest.approx(COALESCE_LIMIT + 0.1)


def test_an_active_key_is_handed_out_again_only_after_its_work(
    queue: WorkQueue, clock: Clock
) -> None:
    queue.enqueue(A)
    clock.now += COALESCE
    assert queue.take() == [A]
    queue.enqueue(A)  # a change seen mid-reconcile
    clock.now += COALESCE
    assert queue.take(full=True) == [B]  # never beside its running reconcile
    assert queue.next_due() is None
    queue.done(A)
    assert queue.take() == [A]


def test_a_full_pass_hands_out_every_key_not_settled(queue: WorkQueue) -> None:
    queue.settle(A, b"inputs")
    assert queue.take() == []
    assert queue.take(full=True) == [B]


def test_a_failing_key_waits_for_its_backoff_whoever_asks(queue: WorkQueue, clock: Clock) -> None:
    queue.failed(A, queue.next_delay(A), generation=1, message="503")
    queue.enqueue(A)  # a child event meanwhile
    clock.now += COALESCE
    assert queue.take(full=True) == [B]
    assert queue.is_dirty(A)  # kept until due
    assert queue.wait_before_retry(A, 1) == pytest.approx(1.0 - COALESCE)
    assert queue.next_due() == pytest.approx(1.0 - COALESCE)
    clock.now += 1.0 - COALESCE
    assert queue.take() == [A]
    assert not queue.is_dirty(A)


def test_the_backoff_grows_and_a_success_resets_it(queue: WorkQueue, clock: Clock) -> None:
    delays = []
    for _ in range(5):
        delay = queue.next_delay(A)
        delays.append(delay)
        failing = queue.failed(A, delay, generation=1)
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert failing.failures == 5
    queue.finished(A)
    assert queue.failure(A) is None
    assert queue.next_delay(A) == 1.0


def test_a_retry_after_longer_than_the_backoff_is_kept(queue: WorkQueue, clock: Clock) -> None:
    queue.failed(A, 3.0, generation=1)  # the caller chose the server's Retry-After
    clock.now += 2.0
    assert queue.take() == []
    clock.now += 1.0
    assert queue.take() == [A]


def test_a_new_generation_is_due_at_once(queue: WorkQueue, clock: Clock) -> None:
    queue.failed(A, 5.0, generation=1)
    queue.enqueue(A, 1)  # the same spec: still backing off
    clock.now += COALESCE
    assert queue.take() == []
    queue.enqueue(A, 2)
    assert queue.failure(A) is None
    clock.now += COALESCE
    assert queue.take() == [A]


def test_an_enqueue_unsettles(queue: WorkQueue) -> None:
    queue.settle(A, b"inputs")
    assert queue.is_settled(A)
    queue.enqueue(A)
    assert not queue.is_settled(A)
    assert queue.settled_as(A) is None


def test_a_reconcile_that_begins_unsettles_and_keeps_the_write_record(queue: WorkQueue) -> None:
    queue.finished(A, versions={("Service", "a"): "7"}, last_applied={("Service", "a"): b"x"})
    queue.settle(A, b"inputs")
    written = queue.begin(A)
    assert not queue.is_settled(A)
    assert written == {("Service", "a"): "7"}
    assert queue.last_applied(A) == {("Service", "a"): b"x"}


def test_our_own_echo_neither_dirties_nor_unsettles(queue: WorkQueue) -> None:
    queue.finished(A, versions={("Service", "a"): "7"})
    queue.settle(A, b"inputs")
    queue.child_seen(A, child("a", "7"))
    assert queue.is_settled(A) and not queue.is_dirty(A)
    queue.child_seen(A, child("a", "8"))  # someone else's write
    assert not queue.is_settled(A) and queue.is_dirty(A)


async def seen_while_running(queue: WorkQueue, version: str) -> tuple[bool, int]:
    async with queue.lock(A):
        assert queue.running(A)
        queue.child_seen(A, child("a", version))
        dirty_meanwhile, held = queue.is_dirty(A), queue.holding(A)
        queue.finished(A, versions={("Service", "a"): "7"})  # its thread records the apply
        queue.settle(A, b"inputs")
    queue.judge_held(A)
    assert queue.holding(A) == 0
    return dirty_meanwhile, held


def test_an_echo_that_beats_the_record_of_its_apply_is_ours(queue: WorkQueue) -> None:
    assert asyncio.run(seen_while_running(queue, "7")) == (False, 1)
    assert queue.is_settled(A) and not queue.is_dirty(A)


def test_a_change_seen_while_running_is_reconciled_after(queue: WorkQueue) -> None:
    assert asyncio.run(seen_while_running(queue, "6")) == (False, 1)
    assert queue.is_dirty(A) and not queue.is_settled(A)


def test_a_failure_forgets_the_status_record(queue: WorkQueue) -> None:
    record = WrittenStatus("{}", "9", ("8",))
    queue.finished(A, status=record)
    assert queue.written_status(A) == record
    queue.failed(A, 1.0)
    assert queue.written_status(A) is None
    queue.finished(A, status=record)
    queue.refused(A)
    assert queue.written_status(A) is None


def test_forget_drops_every_fact(queue: WorkQueue) -> None:
    queue.finished(A, versions={("Service", "a"): "7"}, status=WrittenStatus("{}", "9", ()))
    queue.settle(A, b"inputs")
    queue.failed(A, 1.0)
    queue.enqueue(A)
    queue.forget(A)
    assert A not in queue and queue.keys() == {B}
    assert not queue.is_dirty(A) and not queue.is_settled(A)
    assert queue.failure(A) is None and queue.written_status(A) is None
    assert queue.last_applied(A) is None and not queue.is_own_write(A, ("Service", "a", "7"))
    assert queue.take(full=True) == [B]
    queue.track(A)  # the same uid seen again starts from nothing
    assert queue.take(full=True) == [A]  # B's work is not done


def test_wait_returns_on_enqueue_and_on_close(queue: WorkQueue) -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        idle = await queue.wait(0.01)
        queue.enqueue(A)
        woken = await queue.wait(5.0)
        queue.close()
        closed = await queue.wait(5.0)
        return idle, woken, closed

    assert asyncio.run(scenario()) == (False, True, True)
    assert queue.closing


class Worker:
    """The queue's work: records each call, fails the first ``failures`` of each key."""

    def __init__(self, queue: WorkQueue, failures: int = 0, raises: bool = False) -> None:
        self.queue, self.failures, self.raises = queue, failures, raises
        self.calls: list[str] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, uid: str) -> None:
        self.calls.append(uid)
        await self.release.wait()
        if self.calls.count(uid) <= self.failures:
            if self.raises:
                raise RuntimeError("a bug")
            self.queue.failed(uid, self.queue.next_delay(uid), message="503")
        else:
            self.queue.finished(uid)
            self.queue.settle(uid, b"inputs")

    async def until(self, check: Any) -> None:
        """Poll ``check`` on the loop, with a deadline."""
        async with asyncio.timeout(5):
            while not check():
                await asyncio.sleep(0.01)


def fast_queue() -> WorkQueue:
    queue = WorkQueue(Backoff(initial=0.05, cap=0.2, jitter=0.0))
    queue.track(A)
    return queue


def run_loop(queue: WorkQueue, worker: Worker, passes: list[int]) -> asyncio.Task[None]:
    return asyncio.create_task(
        queue.run(
            worker, resync=3600.0, workers=2, full_pass=lambda settled, _: passes.append(settled)
        )
    )


async def stop(queue: WorkQueue, loop: asyncio.Task[None]) -> None:
    queue.close()
    async with asyncio.timeout(5):
        await loop


def test_the_loop_retries_a_failure_until_it_succeeds() -> None:
    async def scenario() -> list[str]:
        queue = fast_queue()
        worker = Worker(queue, failures=2)
        loop = run_loop(queue, worker, [])
        queue.enqueue(A)
        await worker.until(lambda: len(worker.calls) == 3)
        assert queue.failure(A) is None and queue.is_settled(A)
        await stop(queue, loop)
        return worker.calls

    assert asyncio.run(scenario()) == [A, A, A]


def test_work_that_raises_is_retried_and_the_loop_lives_on() -> None:
    async def scenario() -> list[str]:
        queue = fast_queue()
        worker = Worker(queue, failures=1, raises=True)
        loop = run_loop(queue, worker, [])
        queue.enqueue(A)
        await worker.until(lambda: len(worker.calls) == 2)
        assert not loop.done()
        await stop(queue, loop)
        return worker.calls

    assert asyncio.run(scenario()) == [A, A]


def test_enqueues_during_a_reconcile_make_one_more() -> None:
    async def scenario() -> list[str]:
        queue = fast_queue()
        worker = Worker(queue)
        worker.release.clear()  # the first reconcile runs until released
        loop = run_loop(queue, worker, [])
        queue.enqueue(A)
        await worker.until(lambda: len(worker.calls) == 1)
        for _ in range(100):
            queue.enqueue(A)
        worker.release.set()
        await worker.until(lambda: len(worker.calls) == 2)
        await worker.until(lambda: not queue.is_dirty(A) and queue.is_settled(A))
        await stop(queue, loop)
        return worker.calls

    assert asyncio.run(scenario()) == [A, A]


def test_a_full_pass_reconciles_what_is_not_settled() -> None:
    async def scenario() -> tuple[list[str], list[int]]:
        queue = fast_queue()
        queue.track(B)
        queue.settle(B, b"inputs")
        worker = Worker(queue)
        passes: list[int] = []
        loop = asyncio.create_task(
            queue.run(
                worker, resync=0.05, workers=2, full_pass=lambda settled, _: passes.append(settled)
            )
        )
        await worker.until(lambda: len(worker.calls) == 1)
        await worker.until(lambda: len(passes) >= 3)
        await stop(queue, loop)
        return worker.calls, passes[:3]

    calls, passes = asyncio.run(scenario())
    assert calls == [A]  # B was settled, and A once its reconcile settled it
    assert passes[0] == 1 and passes[1:] == [2, 2]


def test_a_cold_pass_hands_out_every_key_once_settled_or_not(
    queue: WorkQueue, clock: Clock
) -> None:
    queue.settle(A, b"inputs")
    queue.settle(B, b"inputs")
    assert queue.take(full=True) == []
    assert queue.take(full=True, cold=True) == [A, B]
    assert queue.is_cold(A) and queue.is_cold(B)
    queue.done(A)
    queue.done(B)
    assert queue.is_cold(A)  # until its work ends well (the loop clears it)


def test_the_loop_makes_every_nth_full_pass_cold() -> None:
    async def scenario() -> tuple[list[tuple[str, bool]], list[bool]]:
        queue = fast_queue()
        seen: list[tuple[str, bool]] = []

        async def work(uid: str) -> None:
            seen.append((uid, queue.is_cold(uid)))
            queue.finished(uid)
            queue.settle(uid, b"inputs")

        passes: list[bool] = []
        loop = asyncio.create_task(
            queue.run(
                work,
                resync=0.05,
                workers=2,
                cold_every=3,
                full_pass=lambda settled, cold: passes.append(cold),
            )
        )
        async with asyncio.timeout(5):
            while len(seen) < 3:
                await asyncio.sleep(0.01)
        await stop(queue, loop)
        return seen[:3], passes[:6]

    seen, passes = asyncio.run(scenario())
    # the first pass finds A unsettled; then only the cold passes (3rd, 6th) hand it out
    assert seen == [(A, False), (A, True), (A, True)]
    assert passes == [False, False, True, False, False, True]


def test_a_full_pass_begins_only_once_the_last_ones_work_is_done() -> None:
    """A's reconcile outlasts many resync periods; B, failing with no backoff, keeps the
    loop turning meanwhile. No second pass begins until A's work is done."""

    async def scenario() -> tuple[int, int, int]:
        queue = fast_queue()
        queue.track(B)
        release = asyncio.Event()
        calls: list[str] = []

        async def work(uid: str) -> None:
            calls.append(uid)
            if uid == A:
                await release.wait()
                queue.finished(uid)
                queue.settle(uid, b"inputs")
            else:
                queue.failed(uid, 0.0, message="again")  # due again at once

        passes: list[int] = []
        loop = asyncio.create_task(
            queue.run(
                work, resync=0.001, workers=2, full_pass=lambda settled, _: passes.append(settled)
            )
        )
        async with asyncio.timeout(5):
            while calls.count(B) < 50:
                await asyncio.sleep(0)
        during = len(passes)
        release.set()
        async with asyncio.timeout(5):
            while len(passes) < 2:
                await asyncio.sleep(0.01)
        await stop(queue, loop)
        return during, calls.count(A), len(passes)

    during, reconciles_of_a, after = asyncio.run(scenario())
    assert during == 1
    assert reconciles_of_a == 1 and after >= 2

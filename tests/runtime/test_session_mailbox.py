"""The session turn mailbox: order, isolation, bounds, cancel_wait, drain, close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from runtime_support import DEADLINE, GatedRunner, collect, ended, text_of

from mas.ctl.session.mailbox import MailboxFull, SessionTurnMailbox
from mas.runtime import metrics
from mas.runtime.errors import MailboxClosed, RuntimeFailure
from mas.runtime.turns import (
    ArtifactEmitted,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
    TurnRunner,
)

pytestmark = pytest.mark.timeout(30)


def turn(session: str, turn_id: str, text: str = "hi") -> TurnInput:
    return TurnInput(session, turn_id, text)


async def test_a_turn_streams_its_events_and_resolves_its_result() -> None:
    mailbox = SessionTurnMailbox(GatedRunner())
    ticket = mailbox.submit(turn("s", "t1", "hello"))
    events = await collect(ticket.events())
    assert text_of(events) == "t1:hello"
    assert ended(events).status == "completed"
    assert (await ticket.result).text == "t1:hello"
    with pytest.raises(RuntimeError, match="only once"):
        ticket.events()
    await mailbox.aclose()


async def test_order_is_kept_per_session_under_200_concurrent_sessions() -> None:
    runner = GatedRunner()
    sessions = [f"s{i}" for i in range(200)]
    # Every session's first turn waits until all 200 are running at once: a mailbox that
    # ran sessions one after another would never get there (and the test would fail).
    runner.barrier = asyncio.Barrier(len(sessions))
    mailbox = SessionTurnMailbox(runner)
    tickets = [mailbox.submit(turn(s, f"{s}#{k}", f"m{k}")) for k in range(3) for s in sessions]
    assert mailbox.depth() == 600
    results = await asyncio.gather(*(collect(t.events()) for t in tickets))
    assert all(ended(r).status == "completed" for r in results)
    for s in sessions:
        starts = [t for what, sess, t in runner.log if sess == s and what == "start"]
        ends = [t for what, sess, t in runner.log if sess == s and what == "end"]
        assert starts == ends == [f"{s}#0", f"{s}#1", f"{s}#2"]
        # no overlap inside one session: each start comes after the previous end
        order = [(w, t) for w, sess, t in runner.log if sess == s]
        assert order == [(w, f"{s}#{k}") for k in range(3) for w in ("start", "end")]
    assert runner.max_active_per_session == 1
    assert mailbox.depth() == 0
    assert mailbox.sessions() == ()  # idle sessions are dropped with their workers
    await mailbox.aclose()


async def test_a_second_turn_waits_for_the_first_of_its_session() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    first = mailbox.submit(turn("s", "t1"))
    second = mailbox.submit(turn("s", "t2"))
    other = mailbox.submit(turn("other", "o1"))
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
        assert ended(await collect(other.events())).status == "completed"
    assert mailbox.running("s") and mailbox.depth("s") == 1
    assert not runner.started_event("t2").is_set()
    gate.set()
    assert ended(await collect(first.events())).text == "t1:hi"
    assert ended(await collect(second.events())).text == "t2:hi"
    assert [t for w, _, t in runner.log if w == "start"] == ["t1", "o1", "t2"]
    await mailbox.aclose()


async def test_cancel_wait_withdraws_a_queued_turn() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    first = mailbox.submit(turn("s", "t1"))
    queued = mailbox.submit(turn("s", "t2"))
    assert mailbox.depth("s") == 2  # the worker has not picked up t1 yet
    queued.cancel_wait()
    events = await collect(queued.events())
    assert ended(events).status == "canceled"
    assert "withdrawn" in ended(events).message
    assert mailbox.depth("s") == 1
    gate.set()
    await collect(first.events())
    assert await mailbox.drain(DEADLINE)
    assert [t for w, _, t in runner.log if w == "start"] == ["t1"]  # t2 never ran
    await mailbox.aclose()


async def test_cancel_wait_on_a_running_turn_lets_it_finish() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    ticket = mailbox.submit(turn("s", "t1", "keep me"))
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
    ticket.cancel_wait()
    events = await collect(ticket.events())
    assert ended(events).status == "canceled"
    assert "goes on in the background" in ended(events).message
    assert mailbox.running("s")
    gate.set()
    async with asyncio.timeout(DEADLINE):
        real = await ticket.result
    assert real.status == "completed" and real.text == "t1:keep me"
    assert ("end", "s", "t1") in runner.log
    await mailbox.aclose()


async def test_a_caller_that_goes_away_does_not_interrupt_the_turn() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    ticket = mailbox.submit(turn("s", "t1"))

    async def consume() -> None:
        async for _ in ticket.events():
            pass

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    gate.set()
    async with asyncio.timeout(DEADLINE):
        assert (await ticket.result).status == "completed"
    await mailbox.aclose()


async def test_a_full_session_queue_is_a_clear_error() -> None:
    runner = GatedRunner()
    runner.gate("t0")
    mailbox = SessionTurnMailbox(runner, max_pending_per_session=2, max_sessions=2)
    running = mailbox.submit(turn("s", "t0"))
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t0").wait()
    mailbox.submit(turn("s", "t1"))
    mailbox.submit(turn("s", "t2"))
    with pytest.raises(MailboxFull) as caught:
        mailbox.submit(turn("s", "t3"))
    assert isinstance(caught.value, RuntimeFailure)
    assert "session 's' of agent 'gated' already has 2 queued turns" in str(caught.value)
    assert "max_pending_per_session=2" in str(caught.value)
    runner.gate("u0")
    mailbox.submit(turn("u", "u0"))
    with pytest.raises(MailboxFull, match=r"2 active sessions \(max_sessions=2\)"):
        mailbox.submit(turn("v", "v0"))
    assert mailbox.depth() == 3
    await mailbox.aclose()
    assert (await running.result).status == "canceled"


async def test_drain_waits_for_running_and_queued_turns() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    assert await mailbox.drain(DEADLINE)  # idle: at once
    tickets = [mailbox.submit(turn("s", "t1")), mailbox.submit(turn("s", "t2"))]
    assert not await mailbox.drain(0.05)  # the gate is closed: it cannot drain
    gate.set()
    assert await mailbox.drain(DEADLINE)
    assert [t.result.result().status for t in tickets] == ["completed", "completed"]
    await mailbox.aclose()


async def test_aclose_ends_every_pending_ticket_canceled() -> None:
    runner = GatedRunner()
    runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    running = mailbox.submit(turn("s", "t1"))
    queued = mailbox.submit(turn("s", "t2"))
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
    await mailbox.aclose()
    assert ended(await collect(running.events())).status == "canceled"
    queued_end = ended(await collect(queued.events()))
    assert queued_end.status == "canceled" and "closed before it ran" in queued_end.message
    with pytest.raises(MailboxClosed, match="shutting down"):
        mailbox.submit(turn("s", "t3"))


async def test_front_turns_run_before_ordinary_ones_in_their_own_order() -> None:
    runner = GatedRunner()
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)
    tickets = [mailbox.submit(turn("s", "t1")), mailbox.submit(turn("s", "t2"))]
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
    tickets.append(mailbox.submit(turn("s", "f1"), front=True))
    tickets.append(mailbox.submit(turn("s", "f2"), front=True))
    gate.set()
    for ticket in tickets:
        await collect(ticket.events())
    assert [t for w, _, t in runner.log if w == "start"] == ["t1", "f1", "f2", "t2"]
    await mailbox.aclose()


async def test_a_runner_that_raises_fails_the_turn_and_the_mailbox_goes_on() -> None:
    class Raises(GatedRunner):
        def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
            raise ValueError("boom")

    mailbox = SessionTurnMailbox(Raises("raiser"))
    first = ended(await collect(mailbox.submit(turn("s", "t1")).events()))
    assert first.status == "failed" and "ValueError: boom" in first.message
    second = ended(await collect(mailbox.submit(turn("s", "t2")).events()))
    assert second.status == "failed"
    await mailbox.aclose()


async def test_turn_metrics_count_outcomes_and_queue_depth() -> None:
    runner = GatedRunner("metered")
    gate = runner.gate("t1")
    mailbox = SessionTurnMailbox(runner)

    def turns(outcome: str) -> float:
        value = metrics.REGISTRY.get_sample_value(
            "maslab_turns_total", {"agent": "metered", "outcome": outcome}
        )
        return value or 0.0

    before = turns("completed")
    first = mailbox.submit(turn("s", "t1"))
    mailbox.submit(turn("s", "t2"))
    async with asyncio.timeout(DEADLINE):
        await runner.started_event("t1").wait()
    depth = metrics.REGISTRY.get_sample_value("maslab_queue_depth", {"agent": "metered"})
    assert depth == 1
    gate.set()
    await collect(first.events())
    assert await mailbox.drain(DEADLINE)
    assert turns("completed") == before + 2
    count = metrics.REGISTRY.get_sample_value(
        "maslab_turn_latency_seconds_count", {"agent": "metered"}
    )
    assert count is not None and count >= 2
    assert b"maslab_turns_total" in metrics.exposition()
    await mailbox.aclose()


class _ArtifactRunner(TurnRunner):
    agent_id = "artifacts"

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        yield TextDelta("a")
        if turn.text == "with artifact":
            yield ArtifactEmitted("text", "notes", text="n")
        yield TurnEnded("completed", text="a")


async def test_a_ticket_tells_whether_its_turn_was_only_text() -> None:
    mailbox = SessionTurnMailbox(_ArtifactRunner())
    plain = mailbox.submit(turn("s1", "t1", "plain"))
    rich = mailbox.submit(turn("s2", "t2", "with artifact"))
    async with asyncio.timeout(DEADLINE):
        await asyncio.gather(plain.result, rich.result)
    assert plain.only_text and not rich.only_text
    assert [type(e).__name__ for e in await collect(rich.events())] == [
        "TextDelta",
        "ArtifactEmitted",
        "TurnEnded",
    ]
    await mailbox.aclose()


class _CountingRunner(TurnRunner):
    """Notes, as each turn starts, how many cancellations its task has pending."""

    agent_id = "counting"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelling: list[tuple[str, int]] = []

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        task = asyncio.current_task()
        assert task is not None
        self.cancelling.append((turn.text, task.cancelling()))
        yield TextDelta(turn.text)
        if turn.text == "long":
            self.started.set()
            await asyncio.Event().wait()  # held until the steer cancels it
        yield TurnEnded("completed", text=turn.text)


async def test_a_steer_leaves_no_cancellation_pending_for_what_runs_next() -> None:
    # The generation runs in the session's worker, which a steer cancels: the worker takes
    # that cancellation back, so the continuation and the next turn start with none
    # pending (asyncio.timeout and TaskGroup in a runner rely on the count).
    runner = _CountingRunner()
    mailbox = SessionTurnMailbox(runner)
    first = mailbox.submit(turn("s", "t1", "long"))
    queued = mailbox.submit(turn("s", "t2", "next"))
    async with asyncio.timeout(DEADLINE):
        await runner.started.wait()
        receipt = await mailbox.steer("s", "quick", "preempt")
        assert receipt.applied == "preempted"
        assert (await first.result).text == "longquick"
        assert (await queued.result).status == "completed"
    assert runner.cancelling == [("long", 0), ("quick", 0), ("next", 0)]
    await mailbox.aclose()

"""Steer (preempt, replace, wait) and cancel_inflight on a real agent and scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from runtime_support import DEADLINE, collect, ended, scripted, text_of, wired

from mas.ctl.session.host import RuntimeHost
from mas.ctl.session.mailbox import TurnTicket
from mas.runtime.agent import Agent
from mas.runtime.errors import ControlError
from mas.runtime.turns import TextDelta, TurnEvent, TurnInput

pytestmark = pytest.mark.timeout(30)

# A generation that holds after its first chunk until a file appears: a steer after the
# first chunk always lands mid-generation, and "short" finishes only when the test says so.
HEARD = {"reply": "heard: {input}"}


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """Created by a test to let a held "short" generation finish ("story" is never let go)."""
    return tmp_path / "release"


@pytest.fixture
async def host(tmp_path: Path, release: Path) -> AsyncIterator[RuntimeHost]:
    story = {
        "match": "^story",
        "chunks": ["one ", "two ", "three ", "four ", "five"],
        "release_file": str(tmp_path / "never"),
    }
    short = {"match": "^short", "chunks": ["a ", "b ", "c"], "release_file": str(release)}
    app = wired({"talker": {"model": scripted(story, short, default=HEARD)}})
    built = RuntimeHost.build(app, ["talker"])
    yield built
    await built.aclose()


async def first_chunks(
    ticket: TurnTicket, count: int
) -> tuple[list[TurnEvent], AsyncIterator[TurnEvent]]:
    """Read ``count`` text chunks of the ticket; returns them and the rest of the stream."""
    stream = ticket.events()
    seen: list[TurnEvent] = []
    async with asyncio.timeout(DEADLINE):
        async for event in stream:
            seen.append(event)
            if sum(isinstance(e, TextDelta) for e in seen) == count:
                break
    return seen, stream


async def history(host: RuntimeHost, session: str) -> list[tuple[str, str, bool]]:
    agent = host.runner("talker")
    assert isinstance(agent, Agent)
    return [(m.role, m.content, m.interrupted) for m in await agent.history(session)]


async def test_preempt_keeps_the_prefix_and_replaces_the_rest(host: RuntimeHost) -> None:
    mailbox = host.mailbox("talker")
    ticket = mailbox.submit(TurnInput("s", "t1", "story please"))
    seen, rest = await first_chunks(ticket, 1)
    receipt = await mailbox.steer("s", "go left", "preempt")
    assert receipt.applied == "preempted"
    events = seen + await collect(rest)
    assert text_of(events) == "one heard: go left"
    final = ended(events)
    assert final.status == "completed" and final.text == "one heard: go left"
    assert (await receipt.result).text == final.text
    assert await history(host, "s") == [
        ("user", "story please", False),
        ("assistant", "one ", True),
        ("user", "go left", False),
        ("assistant", "heard: go left", False),
    ]


async def test_replace_discards_the_prefix_and_starts_over(host: RuntimeHost) -> None:
    mailbox = host.mailbox("talker")
    ticket = mailbox.submit(TurnInput("s", "t1", "story please"))
    seen, rest = await first_chunks(ticket, 1)
    receipt = await mailbox.steer("s", "go right", "replace")
    assert receipt.applied == "replaced"
    events = seen + await collect(rest)
    final = ended(events)
    assert final.status == "completed" and final.text == "heard: go right"
    assert text_of(events) == "one heard: go right"  # streamed, then discarded
    assert await history(host, "s") == [
        ("user", "story please", False),
        ("user", "go right", False),
        ("assistant", "heard: go right", False),
    ]


async def test_wait_queues_ahead_of_other_turns_after_the_current_generation(
    host: RuntimeHost, release: Path
) -> None:
    mailbox = host.mailbox("talker")
    current = mailbox.submit(TurnInput("s", "t1", "short one"))
    later = mailbox.submit(TurnInput("s", "t2", "later"))
    seen, rest = await first_chunks(current, 1)
    receipt = await mailbox.steer("s", "by the way", "wait")
    assert receipt.applied == "queued" and mailbox.depth("s") == 2
    release.touch()
    events = seen + await collect(rest)
    assert ended(events).text == "a b c"  # the in-flight generation was not touched
    async with asyncio.timeout(DEADLINE):
        assert (await receipt.result).text == "heard: by the way"
    assert ended(await collect(later.events())).text == "heard: later"
    users = [content for role, content, _ in await history(host, "s") if role == "user"]
    assert users == ["short one", "by the way", "later"]


async def test_steer_with_nothing_in_flight_queues_a_new_turn(host: RuntimeHost) -> None:
    receipt = await host.mailbox("talker").steer("idle", "hello", "preempt")
    assert receipt.applied == "queued"
    async with asyncio.timeout(DEADLINE):
        assert (await receipt.result).text == "heard: hello"


async def test_an_unknown_steer_mode_names_the_accepted_ones(host: RuntimeHost) -> None:
    with pytest.raises(
        ControlError, match="'sideways' is not accepted; accepted: preempt, replace, wait"
    ):
        await host.mailbox("talker").steer("s", "x", "sideways")  # type: ignore[arg-type]


async def test_cancel_inflight_ends_the_running_turn_canceled(host: RuntimeHost) -> None:
    mailbox = host.mailbox("talker")
    assert not await mailbox.cancel_inflight("s")  # nothing running
    ticket = mailbox.submit(TurnInput("s", "t1", "story please"))
    seen, rest = await first_chunks(ticket, 1)
    assert await mailbox.cancel_inflight("s")
    final = ended(seen + await collect(rest))
    assert final.status == "canceled" and final.text == "one "
    assert "canceled while it ran" in final.message
    # the session goes on, and its history keeps the interrupted reply
    after = ended(await collect(mailbox.submit(TurnInput("s", "t2", "again")).events()))
    assert after.text == "heard: again"
    assert (await history(host, "s"))[:2] == [
        ("user", "story please", False),
        ("assistant", "one ", True),
    ]


async def test_a_cancel_right_after_a_preempt_wins(host: RuntimeHost) -> None:
    mailbox = host.mailbox("talker")
    ticket = mailbox.submit(TurnInput("s", "t1", "story please"))
    seen, rest = await first_chunks(ticket, 1)
    receipt = await mailbox.steer("s", "go left", "preempt")
    assert await mailbox.cancel_inflight("s")  # before the continuation could start
    final = ended(seen + await collect(rest))
    assert (final.status, final.text) == ("canceled", "one ")
    assert (await receipt.result).status == "canceled"


async def test_cancel_wait_on_a_running_turn_keeps_its_effects_in_history(
    host: RuntimeHost, release: Path
) -> None:
    mailbox = host.mailbox("talker")
    ticket = mailbox.submit(TurnInput("s", "t1", "short please"))
    seen, rest = await first_chunks(ticket, 1)
    ticket.cancel_wait()
    assert ended(seen + await collect(rest)).status == "canceled"  # the caller stopped waiting
    release.touch()  # the turn, still running in the mailbox, finishes now
    async with asyncio.timeout(DEADLINE):
        real = await ticket.result
    assert (real.status, real.text) == ("completed", "a b c")
    assert await history(host, "s") == [
        ("user", "short please", False),
        ("assistant", "a b c", False),
    ]

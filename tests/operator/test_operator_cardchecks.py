"""The opt-in AgentCard check: judging an answer, scheduling with backoff, reporting changes.

The schedule runs on injected clocks (pure); one integration test checks real cards of a
bare a2a-sdk server on loopback, and a port where nothing listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from operator_support import card_app
from tests.ports import free_port

from mas_operator.cardchecks import (
    BODY_LIMIT,
    CardChecks,
    CheckSettings,
    fetch_card,
    judge_card,
)

pytestmark = pytest.mark.timeout(30)

URL = "http://peer.example:8080"
CARD = f"{URL}/.well-known/agent-card.json"
START = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def checks(clock: Clock, changed: list[str]) -> CardChecks:
    return CardChecks(
        changed.append,
        clock=clock,
        wall=lambda: START + timedelta(seconds=clock.now - 100.0),
        spread=lambda: 0.0,
    )


def test_an_agentcard_passes_and_anything_else_says_what_it_is() -> None:
    card = json.dumps({"name": "Web Search", "version": "1.0"}).encode()
    assert judge_card(URL, 200, card) == (
        True,
        f"the AgentCard at {CARD} answered (name 'Web Search')",
    )
    assert judge_card(URL, 404, b"") == (False, f"GET {CARD} answered HTTP 404")
    assert judge_card(URL, 200, b"<html>hi</html>") == (
        False,
        f"GET {CARD} answered something that is not JSON: '<html>hi</html>'",
    )
    assert judge_card(URL, 200, b"[1]")[1].endswith("not an AgentCard (no string 'name')")
    assert judge_card(URL, 200, b'{"name": ""}')[0] is False
    assert judge_card(URL, 200, b"", truncated=True) == (
        False,
        f"GET {CARD} answered more than {BODY_LIMIT} bytes: not an AgentCard",
    )
    # a peer's text is quoted as data, clipped
    _, message = judge_card(URL, 200, json.dumps({"name": "x\n" * 100}).encode())
    assert "\n" not in message and message.endswith("...')")


def test_a_new_url_is_due_at_once_then_every_interval_while_it_answers() -> None:
    clock, changed = Clock(), []
    cards = checks(clock, changed)
    cards.want("app", [URL], CheckSettings(interval=60, timeout=5))
    assert cards.due() == [("app", URL)] and cards.next_wait() == 0.0
    verdict = cards.record("app", URL, True, "answered")
    assert verdict is not None and verdict.ok
    assert changed == ["app"] and cards.version("app") == 1
    assert cards.due() == [] and cards.next_wait() == 60.0
    clock.now += 60
    cards.record("app", URL, True, "answered")  # the same verdict: nothing to write
    assert changed == ["app"] and cards.version("app") == 1


def test_failures_back_off_exponentially_up_to_the_cap() -> None:
    clock, changed = Clock(), []
    cards = checks(clock, changed)
    cards.want("app", [URL], CheckSettings(interval=10, timeout=5))
    waits, nexts = [], []
    for _ in range(7):
        verdict = cards.record("app", URL, False, "refused")
        assert verdict is not None
        waits.append(cards.next_wait())
        nexts.append(verdict.next_check_time)
        clock.now += cards.next_wait() or 0.0
    assert waits == [10, 20, 40, 80, 160, 160, 160]  # capped at 16 intervals
    assert nexts[0] == "2026-12-04T10:00:10Z" and nexts[1] == "2026-12-04T10:00:30Z"
    assert len(changed) == 7  # each failure in a row is a new verdict (its count)
    assert cards.record("app", URL, True, "answered") is not None
    assert cards.verdicts("app")[URL].failures == 0
    assert cards.next_wait() == 10  # back to the interval


def test_wanting_less_drops_results_and_late_results_are_ignored() -> None:
    clock, changed = Clock(), []
    cards = checks(clock, changed)
    settings = CheckSettings(interval=10, timeout=5)
    cards.want("app", [URL, "http://other:1"], settings)
    cards.record("app", URL, True, "answered")
    cards.want("app", ["http://other:1"], settings)
    assert cards.verdicts("app") == {}
    assert cards.record("app", URL, True, "answered") is None  # no longer wanted
    cards.want("app", [URL], None)  # switched off
    assert cards.next_wait() is None and cards.version("app") == 0


def test_the_cap_never_exceeds_a_day() -> None:
    assert CheckSettings(interval=86400, timeout=5).backoff.cap == 86400


@contextlib.asynccontextmanager
async def card_server() -> AsyncIterator[str]:
    """A bare a2a-sdk server publishing its AgentCard on 127.0.0.1; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(card_app(url), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if serving.done():
                    serving.result()
                await asyncio.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)


@pytest.mark.integration
async def test_fetch_card_of_a_real_server_and_of_nothing() -> None:
    async with httpx.AsyncClient() as client, card_server() as url:
        ok, message = await fetch_card(client, url, 5)
        assert ok, message
        assert (
            message
            == f"the AgentCard at {url}/.well-known/agent-card.json answered (name 'Web Search')"
        )
        ok, message = await fetch_card(client, url + "/nowhere", 5)
        assert (ok, message) == (
            False,
            f"GET {url}/nowhere/.well-known/agent-card.json answered HTTP 404",
        )
    async with httpx.AsyncClient() as client:
        ok, message = await fetch_card(client, url, 5)  # the server is gone
    assert not ok
    assert message.startswith(f"GET {url}/.well-known/agent-card.json failed: ")


@pytest.mark.integration
async def test_the_loop_checks_when_due_and_reports_each_change() -> None:
    changed: asyncio.Queue[str] = asyncio.Queue()
    cards = CardChecks(changed.put_nowait)
    running = asyncio.create_task(cards.run())
    try:
        async with card_server() as url:
            cards.want("app", [url], CheckSettings(interval=1, timeout=2))
            assert await asyncio.wait_for(changed.get(), 20) == "app"
            assert cards.verdicts("app")[url].ok
        # stopped: the next check (an interval later) fails, then backs off
        assert await asyncio.wait_for(changed.get(), 20) == "app"
        first = cards.verdicts("app")[url]
        assert (first.ok, first.failures) == (False, 1)
        assert await asyncio.wait_for(changed.get(), 20) == "app"
        assert cards.verdicts("app")[url].failures == 2
    finally:
        cards.close()
        await asyncio.wait_for(running, 10)

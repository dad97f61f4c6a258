"""The console's agent badges against real ``/metrics`` answers on loopback: the runtime's
own metrics route over a registry the test counts on, a real ``mas-ctl serve`` agent, a
port nobody listens on. The badges' clock is the test's, so the TTL and the rate window
are crossed without waiting."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from console_support import one_agent_document, serving
from prometheus_client import CollectorRegistry, Counter
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from tests.ctl_client.ctl_client_support import OurAgent
from tests.ports import free_port
from tests.session_modes.session_modes_support import write_app

from library_ioa.serving.metrics import metrics_route
from mas.console.agents import AgentCalls
from mas.console.app import ConsoleOptions, build_app
from mas.console.badges import Badges
from mas.console.document_source import DocumentSource
from mas.console.views import metrics_url_of
from mas.infra.wiring import wire

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def turn_counter() -> tuple[CollectorRegistry, Any]:
    """A registry with the runtime's turn counter (as ``mas.runtime.metrics`` declares it)."""
    registry = CollectorRegistry()
    turns = Counter("maslab_turns", "Turns ended.", ["agent", "outcome"], registry=registry)
    return registry, turns


@dataclass
class Metered:
    """The runtime's metrics route over a registry of the test's, counting the reads;
    :meth:`another_replica` makes it answer with another pod's counters."""

    url: str
    turns: Any  # the maslab_turns counter
    registries: list[CollectorRegistry]
    reads: list[str] = field(default_factory=list)

    def another_replica(self) -> Any:
        registry, self.turns = turn_counter()
        self.registries[0] = registry
        return self.turns


@contextlib.asynccontextmanager
async def metered() -> AsyncIterator[Metered]:
    registry, turns = turn_counter()
    registries = [registry]
    inner = Starlette(routes=[metrics_route(registries)])
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["path"])
        await inner(scope, receive, send)

    async with serving(app, "metrics") as base:
        yield Metered(base + "/metrics", turns, registries, seen)


async def test_twenty_pages_share_one_read_per_ttl_and_the_rate_follows_the_counter() -> None:
    clock = Clock()
    async with metered() as agent:
        agent.turns.labels("desk", "completed").inc(3)
        badges = Badges(clock=clock)
        try:
            first = await asyncio.gather(*(badges.read(agent.url, "desk") for _ in range(20)))
            assert len(agent.reads) == 1  # twenty askers, one read in flight
            assert {b.text for b in first} == {"3 turns, ?/min, 0 errors"}
            clock.now += 2  # within the TTL: the cached badge
            assert (await badges.read(agent.url, "desk")).turns == 3
            assert len(agent.reads) == 1
            agent.turns.labels("desk", "completed").inc(2)
            agent.turns.labels("desk", "failed").inc(1)
            clock.now += 28  # 30 s after the first read: three more turns, 6 a minute
            badge = await badges.read(agent.url, "desk")
            assert len(agent.reads) == 2
            assert (badge.turns, badge.errors, badge.per_minute) == (6, 1, 6.0)
            assert badge.text == "6 turns, 6.0/min, 1 error"
        finally:
            await badges.aclose()


async def test_a_counter_that_falls_gives_no_rate_across_two_replicas() -> None:
    clock = Clock()
    async with metered() as agent:
        agent.turns.labels("desk", "completed").inc(40)
        badges = Badges(clock=clock)
        try:
            assert (await badges.read(agent.url, "desk")).turns == 40
            agent.another_replica().labels("desk", "completed").inc(2)
            clock.now += 10
            badge = await badges.read(agent.url, "desk")
            assert (badge.turns, badge.per_minute) == (2, None)
            agent.turns.labels("desk", "completed").inc(1)
            clock.now += 30  # the rate starts again from that replica's count
            badge = await badges.read(agent.url, "desk")
            assert (badge.turns, badge.per_minute) == (3, 2.0)
        finally:
            await badges.aclose()


async def test_what_is_not_metrics_says_why_in_one_line() -> None:
    async def page(_: Any) -> PlainTextResponse:
        return PlainTextResponse("<html><script>window.pwned=1</script></html>")

    async def missing(_: Any) -> PlainTextResponse:
        return PlainTextResponse("no", status_code=404)

    app = Starlette(routes=[Route("/html", page), Route("/missing", missing)])
    async with serving(app, "not-metrics") as base:
        badges = Badges()
        try:
            nobody = f"http://127.0.0.1:{free_port()}/metrics"
            found = await badges.read_all(
                [(base + "/html", "desk"), (base + "/missing", "desk"), (nobody, "desk")]
            )
        finally:
            await badges.aclose()
    assert {b.state for b in found.values()} == {"unreachable"}
    assert found[base + "/html"].message.startswith("not Prometheus text")
    assert found[base + "/missing"].message == f"{base}/missing answered HTTP 404"
    assert found[nobody].message == f"cannot reach {nobody}: ConnectError"


async def test_a_real_agent_counts_the_turn_the_console_sent(desk: OurAgent) -> None:
    """``mas-ctl serve`` serves /metrics on its A2A port: the laptop's metrics url."""
    url = metrics_url_of(desk.url)
    assert url == desk.url + "/metrics"
    badges = Badges(ttl=0.0)  # every ask reads
    calls = AgentCalls()
    try:
        before = await badges.read(url, "desk")
        assert before.state == "ok", before.message
        events = [e async for e in calls.turn(desk.url, "ask helper badge", "badge-test")]
        assert events[-1]["kind"] == "ended", events
        after = await badges.read(url, "desk")
        assert after.turns == before.turns + 1
    finally:
        await badges.aclose()
        await calls.aclose()


async def test_twenty_open_application_pages_share_the_reads(tmp_path: Path) -> None:
    """Twenty open Application pages (their update streams) all get the badge; the agent's
    /metrics is read once (the TTL here outlasts the test, so no second round is due)."""
    async with metered() as agent:
        agent.turns.labels("solo", "completed").inc()
        base = agent.url.removesuffix("/metrics")
        path = write_app(tmp_path / "solo.yaml", one_agent_document("solo", base))
        source = DocumentSource(wire(yaml.safe_load(path.read_text())), interval=60)
        app = build_app(source, ConsoleOptions(), badges=Badges(ttl=3600))
        async with serving(app, "console") as url, httpx.AsyncClient(timeout=30) as http:

            async def badge_seen() -> str:
                feed = f"{url}/apps/local/console-test/updates"
                async with http.stream("GET", feed) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: ") and '"1 turn, ' in line:
                            return line
                return ""

            seen = await asyncio.wait_for(asyncio.gather(*(badge_seen() for _ in range(20))), 30)
    assert all('"state": "ok"' in line for line in seen), seen
    assert agent.reads.count("/metrics") == 1


def test_the_metrics_url_of_an_agent_is_its_listeners_root() -> None:
    assert metrics_url_of("http://127.0.0.1:8401") == "http://127.0.0.1:8401/metrics"
    assert metrics_url_of("https://a.example:8443/a2a/") == "https://a.example:8443/metrics"
    assert metrics_url_of("grpc://a:1") is None
    assert metrics_url_of(None) is None

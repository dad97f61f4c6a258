"""Per-agent badges of the Application page: turns, turns per minute and errors, read from
the agent's ``/metrics`` (the runtime's Prometheus text, :mod:`mas.runtime.metrics`).

Where: an agent's :attr:`~mas.console.views.AgentNode.metrics_url`: on a laptop
``<agent url>/metrics`` (``mas-ctl serve`` serves it on the A2A port), in a cluster
``status.agents.<id>.metrics_url``, the agent's Service. Through a Service each read is one
ready pod's counters (the one the connection reached), not the sum of the replicas.

Rules :class:`Badges` keeps:

- one read per url per :data:`TTL_SECONDS`, however many pages ask: askers within the TTL get
  the cached badge, askers while a read is in flight share it;
- a read is bounded by :data:`READ_SECONDS` and :data:`BODY_LIMIT`; any failure (no answer,
  an HTTP error, a body that is not Prometheus text) is a badge in state ``unreachable``
  with the one line why, never an exception;
- ``turns``: ``maslab_turns_total`` of the agent (its ``agent`` label), every outcome but
  ``withdrawn`` (left the queue unrun); ``errors``: outcome ``failed``;
- ``per_minute``: the growth of ``turns`` since the oldest read kept (reads of the last
  :data:`WINDOW_SECONDS`, and the newest one before), scaled to a minute; unknown after a
  single read. A total that fell (a restart, or another replica behind the Service)
  starts the reads again, so no rate is made of two pods' counters;
- urls not asked for within :data:`FORGET_SECONDS` are forgotten (the cache stays bounded).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

TTL_SECONDS = 5.0
READ_SECONDS = 3.0
WINDOW_SECONDS = 60.0
FORGET_SECONDS = 600.0
BODY_LIMIT = 4 * 1024 * 1024  # bytes of a /metrics answer read
TURNS_SAMPLE = "maslab_turns_total"
NOT_RUN = "withdrawn"
FAILED = "failed"

OK, UNREACHABLE, CHECKING = "ok", "unreachable", "checking"


@dataclass(frozen=True)
class Badge:
    """What the page shows of one agent's activity."""

    state: str  # ok / unreachable / checking
    turns: int = 0
    errors: int = 0
    per_minute: float | None = None
    message: str = ""

    @property
    def text(self) -> str:
        if self.state == CHECKING:
            return "metrics: reading"
        if self.state == UNREACHABLE:
            return "metrics unreachable"
        rate = "?" if self.per_minute is None else f"{self.per_minute:.1f}"
        return (
            f"{self.turns} {'turn' if self.turns == 1 else 'turns'}, {rate}/min, "
            f"{self.errors} {'error' if self.errors == 1 else 'errors'}"
        )

    def shown(self, ready_replicas: int | None) -> str:
        """:attr:`text`, saying it is one pod's count when the agent has several ready."""
        if self.state == OK and ready_replicas is not None and ready_replicas > 1:
            return f"{self.text} (one pod of {ready_replicas})"
        return self.text

    def as_json(self, ready_replicas: int | None = None) -> dict[str, Any]:
        return {"state": self.state, "text": self.shown(ready_replicas), "message": self.message}


CHECKING_BADGE = Badge(CHECKING, message="the console has not read this agent's /metrics yet")


@dataclass
class _Entry:
    badge: Badge = CHECKING_BADGE
    read_at: float | None = None  # when the badge was read, by the clock
    asked_at: float = 0.0
    reads: deque[tuple[float, int]] = field(default_factory=deque)  # (when, turns)
    flight: asyncio.Task[Badge] | None = None


class MetricsError(Exception):
    """The agent's /metrics cannot be read; one line saying why."""


def counts(text: str, agent: str) -> tuple[int, int]:
    """``(turns, errors)`` of ``agent`` in a Prometheus text exposition (module docstring).

    Raises :class:`MetricsError` when the text is not Prometheus text.
    """
    turns = errors = 0
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name != TURNS_SAMPLE or sample.labels.get("agent") != agent:
                    continue
                outcome = sample.labels.get("outcome", "")
                if outcome == NOT_RUN:
                    continue
                turns += int(sample.value)
                if outcome == FAILED:
                    errors += int(sample.value)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MetricsError(f"not Prometheus text: {' '.join(str(exc).split())[:200]}") from None
    return turns, errors


class Badges:
    """The badges of every agent a page asks about, read at most once per TTL per url."""

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        ttl: float = TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http or httpx.AsyncClient(timeout=READ_SECONDS, follow_redirects=False)
        self._owned = http is None
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self.reads = 0  # reads made, for tests and benchmarks

    def cached(self, url: str) -> Badge:
        """The last badge read at ``url``, without waiting (``checking`` before the first)."""
        entry = self._entries.get(url)
        return entry.badge if entry is not None else CHECKING_BADGE

    async def read(self, url: str, agent: str) -> Badge:
        """The badge of ``agent`` at ``url``: cached when younger than the TTL, else read
        (one read in flight per url, shared)."""
        now = self._clock()
        self._forget(now)
        entry = self._entries.setdefault(url, _Entry())
        entry.asked_at = now
        if entry.read_at is not None and now - entry.read_at < self.ttl:
            return entry.badge
        if entry.flight is None:
            entry.flight = asyncio.create_task(self._read(url, agent, entry), name="console-badge")
        flight = entry.flight
        return await asyncio.shield(flight)

    async def read_all(self, wanted: Iterable[tuple[str, str]]) -> dict[str, Badge]:
        """``read`` of every ``(url, agent)``, at once; by url."""
        pairs = list(dict.fromkeys(wanted))
        badges = await asyncio.gather(*(self.read(url, agent) for url, agent in pairs))
        return {url: badge for (url, _), badge in zip(pairs, badges, strict=True)}

    async def aclose(self) -> None:
        flights = [e.flight for e in self._entries.values() if e.flight is not None]
        for flight in flights:
            flight.cancel()
        await asyncio.gather(*flights, return_exceptions=True)
        if self._owned:
            await self._http.aclose()

    def _forget(self, now: float) -> None:
        old = [u for u, e in self._entries.items() if now - e.asked_at > FORGET_SECONDS]
        for url in old:
            if self._entries[url].flight is None:
                del self._entries[url]

    async def _read(self, url: str, agent: str, entry: _Entry) -> Badge:
        try:
            try:
                text = await asyncio.wait_for(self._fetch(url), READ_SECONDS)
                turns, errors = counts(text, agent)
            except TimeoutError:
                raise MetricsError(f"{url} did not answer within {READ_SECONDS:.0f} s") from None
        except MetricsError as exc:
            badge = Badge(UNREACHABLE, message=str(exc))
            entry.reads.clear()
        else:
            badge = self._counted(entry, turns, errors)
        finally:
            entry.flight = None
            self.reads += 1
        entry.badge, entry.read_at = badge, self._clock()
        return badge

    def _counted(self, entry: _Entry, turns: int, errors: int) -> Badge:
        now = self._clock()
        reads = entry.reads
        if reads and turns < reads[-1][1]:
            reads.clear()  # a restart, or another replica: no rate across two counters
        reads.append((now, turns))
        while len(reads) > 2 and now - reads[1][0] >= WINDOW_SECONDS:
            reads.popleft()
        rate = None
        then, before = reads[0]
        if now > then and len(reads) > 1:
            rate = (turns - before) * 60.0 / (now - then)
        message = f"{turns} turns ended, {errors} failed, as this agent's /metrics counts them"
        return Badge(OK, turns, errors, rate, message)

    async def _fetch(self, url: str) -> str:
        try:
            async with self._http.stream("GET", url) as response:
                if response.status_code != 200:
                    raise MetricsError(f"{url} answered HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > BODY_LIMIT:
                        raise MetricsError(f"{url} answered more than {BODY_LIMIT} bytes")
        except httpx.HTTPError as exc:
            raise MetricsError(f"cannot reach {url}: {type(exc).__name__}") from None
        return body.decode("utf-8", errors="replace")

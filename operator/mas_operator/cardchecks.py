"""The opt-in AgentCard check of external endpoints (``spec.routes.check_external``).

Rules:

- A check is one ``GET <url>/.well-known/agent-card.json`` from the operator's pod, without
  the endpoint's headers (the operator never reads Secret values; a card is public), within
  ``check_timeout_seconds`` for connect and read together, reading at most
  :data:`BODY_LIMIT` bytes. It passes when the answer is 200 and a JSON object with a
  non-empty string ``name`` (an AgentCard's one field every version has).
- Checks run on the operator's event loop, beside the reconciles, never in them: a
  reconcile reads the latest verdicts from memory (:meth:`CardChecks.verdicts`) and says
  which urls it wants checked (:meth:`CardChecks.want`). A url that is new is checked at
  once; after a pass the next check comes ``check_interval_seconds`` later; after the
  ``n``-th failure in a row, ``interval * 2**(n-1)`` later (jittered by a tenth), capped at
  16 intervals (and a day).
- A verdict that changes (passed or not, its message, the failures in a row) calls
  ``on_change(uid)``, which marks the Application dirty: its next reconcile writes it. A
  card that keeps answering the same way writes nothing.
- :data:`CHECK_CONCURRENCY` checks run at once; an Application that stops wanting a url
  (or is deleted) drops its verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx

from mas_operator.backoff import Backoff
from mas_operator.names import CARD_PATH

logger = logging.getLogger(__name__)

BODY_LIMIT = 1 << 20  # bytes of a card read
CHECK_CONCURRENCY = 8
CAP_INTERVALS = 16  # the failure backoff's cap, in intervals
CAP_LIMIT = 86400.0  # and never more than a day
_QUOTED = 80  # characters of a peer's text quoted in a message


@dataclass(frozen=True)
class CheckSettings:
    """``spec.routes``'s check settings of one Application."""

    interval: float
    timeout: float

    @property
    def backoff(self) -> Backoff:
        cap = min(CAP_LIMIT, max(self.interval, self.interval * CAP_INTERVALS))
        return Backoff(initial=self.interval, factor=2.0, cap=cap, jitter=0.1)


@dataclass(frozen=True)
class CardWant:
    """What one reconcile asks to be checked: these urls, with these settings (None: no
    check at all)."""

    urls: tuple[str, ...]
    settings: CheckSettings | None


@dataclass(frozen=True)
class CardVerdict:
    """The latest check of one url: passed or not, why, and (failing) when it is retried."""

    ok: bool
    message: str
    failures: int = 0  # in a row
    next_check_time: str | None = None  # RFC 3339, only while failing


def _quote(text: str) -> str:
    clipped = text if len(text) <= _QUOTED else text[:_QUOTED] + "..."
    return repr(clipped)


def card_url(url: str) -> str:
    """Where the AgentCard of the endpoint at ``url`` is served."""
    return url.rstrip("/") + CARD_PATH


def judge_card(url: str, status: int, body: bytes, *, truncated: bool = False) -> tuple[bool, str]:
    """Whether an answer to the card GET is an AgentCard, and a one-line message saying so."""
    where = card_url(url)
    if status != 200:
        return False, f"GET {where} answered HTTP {status}"
    if truncated:
        return False, f"GET {where} answered more than {BODY_LIMIT} bytes: not an AgentCard"
    try:
        card = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        head = body[:_QUOTED].decode("utf-8", "replace")
        return False, f"GET {where} answered something that is not JSON: {_quote(head)}"
    name = card.get("name") if isinstance(card, dict) else None
    if not isinstance(name, str) or not name.strip():
        return False, f"GET {where} answered JSON that is not an AgentCard (no string 'name')"
    return True, f"the AgentCard at {where} answered (name {_quote(name)})"


async def fetch_card(client: httpx.AsyncClient, url: str, timeout: float) -> tuple[bool, str]:
    """Check the card of ``url`` once, within ``timeout`` seconds; never raises."""
    where = card_url(url)
    try:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", where, timeout=timeout) as response:
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > BODY_LIMIT:
                        return judge_card(url, response.status_code, b"", truncated=True)
                return judge_card(url, response.status_code, bytes(body))
    except TimeoutError:
        return False, f"GET {where}: no answer within {timeout:g} s"
    except httpx.HTTPError as exc:
        detail = str(exc) or type(exc).__name__
        return False, f"GET {where} failed: {detail}"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Check:
    settings: CheckSettings
    due: float  # on the monotonic clock
    verdict: CardVerdict | None = None
    running: bool = False


class CardChecks:
    """The card checks of every Application (keyed by uid, then url). Not thread-safe: used
    from the operator's event loop only."""

    def __init__(
        self,
        on_change: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        spread: Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self._on_change = on_change
        self._clock = clock
        self._wall = wall
        self._spread = spread
        self._checks: dict[str, dict[str, _Check]] = {}
        self._versions: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._closing = False

    def want(self, uid: str, urls: Iterable[str], settings: CheckSettings | None) -> None:
        """Check exactly ``urls`` for ``uid`` from now on (none when ``settings`` is None)."""
        wanted = list(dict.fromkeys(urls)) if settings is not None else []
        old = self._checks.get(uid, {})
        if not wanted:
            self.forget(uid)
            return
        assert settings is not None
        now = self._clock()
        kept = {}
        for url in wanted:
            check = old.get(url)
            if check is None:
                check = _Check(settings, due=now)
                self._wake.set()
            check.settings = settings
            kept[url] = check
        self._checks[uid] = kept

    def forget(self, uid: str) -> None:
        self._checks.pop(uid, None)
        self._versions.pop(uid, None)

    def verdicts(self, uid: str) -> dict[str, CardVerdict]:
        """The latest verdict of each url ``uid`` wants checked (a url not checked yet has
        none)."""
        checks = self._checks.get(uid, {})
        return {url: c.verdict for url, c in checks.items() if c.verdict is not None}

    def version(self, uid: str) -> int:
        """A number that changes whenever a verdict of ``uid`` changes."""
        return self._versions.get(uid, 0)

    def due(self) -> list[tuple[str, str]]:
        """The (uid, url) checks that are due and not running."""
        now = self._clock()
        return [
            (uid, url)
            for uid, checks in self._checks.items()
            for url, c in checks.items()
            if not c.running and c.due <= now
        ]

    def next_wait(self) -> float | None:
        """Seconds until the earliest check that is not running is due (None: none)."""
        dues = [c.due for checks in self._checks.values() for c in checks.values() if not c.running]
        return max(0.0, min(dues) - self._clock()) if dues else None

    def record(self, uid: str, url: str, ok: bool, message: str) -> CardVerdict | None:
        """Keep the result of a check that ran, schedule the next one, and report a change.
        None: ``uid`` no longer wants ``url`` (the result is dropped)."""
        check = self._checks.get(uid, {}).get(url)
        if check is None:
            return None
        check.running = False
        old = check.verdict
        if ok:
            delay = check.settings.interval
            verdict = CardVerdict(True, message)
        else:
            failures = (old.failures if old is not None else 0) + 1
            delay = check.settings.backoff.delay(failures, self._spread())
            when = _stamp(self._wall() + timedelta(seconds=delay))
            verdict = CardVerdict(False, message, failures, when)
        check.verdict = verdict
        check.due = self._clock() + delay
        if verdict != old:
            self._versions[uid] = self._versions.get(uid, 0) + 1
            self._on_change(uid)
        return verdict

    def close(self) -> None:
        self._closing = True
        self._wake.set()

    async def run(self, client: httpx.AsyncClient | None = None) -> None:
        """Run every check when it is due, until :meth:`close`."""
        own = client is None
        http = client or httpx.AsyncClient(follow_redirects=True, max_redirects=3)
        slots = asyncio.Semaphore(CHECK_CONCURRENCY)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while not self._closing:
                for uid, url in self.due():
                    check = self._checks[uid][url]
                    check.running = True
                    task = asyncio.create_task(self._one(http, slots, uid, url, check.settings))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.next_wait())
                self._wake.clear()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if own:
                await http.aclose()

    async def _one(
        self,
        http: httpx.AsyncClient,
        slots: asyncio.Semaphore,
        uid: str,
        url: str,
        settings: CheckSettings,
    ) -> None:
        async with slots:
            ok, message = await fetch_card(http, url, settings.timeout)
        verdict = self.record(uid, url, ok, message)
        if verdict is not None and not ok and verdict.failures == 1:
            logger.info("AgentCard check of %s failed: %s", url, message)
        self._wake.set()  # schedule its next check

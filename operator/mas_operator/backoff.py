"""Retrying failed API calls: exponential backoff per Application, with jitter.

Pure (a clock and a random source are injected). The policy only: the work queue
(:mod:`mas_operator.workqueue`) holds the operator's one :class:`Retries` and is the only
thing that decides when a failed Application is tried again.

- The first retry waits ``initial`` seconds, each further consecutive failure ``factor``
  times longer, never more than ``cap``; every delay is spread by up to ``jitter`` (a
  fraction) either way, so Applications that failed together do not retry in lockstep.
- A ``Retry-After`` the API server sent (429, 503) is honoured when it asks for longer than
  the backoff would wait (up to :data:`RETRY_AFTER_LIMIT`).
- A success forgets the failures: the next failure starts again at ``initial``.
- Until its retry is due, an Application is not reconciled again for the same generation:
  a full pass or a child's watch event that comes early waits for it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRY_AFTER_LIMIT = 600.0  # seconds; a larger Retry-After is taken as this

CONFLICT = "conflict"
THROTTLED = "throttled"
SERVER_ERROR = "server_error"
UNREACHABLE = "unreachable"
REFUSED = "refused"
REASONS = (CONFLICT, THROTTLED, SERVER_ERROR, UNREACHABLE, REFUSED)


@dataclass(frozen=True)
class Backoff:
    """The delay before the next attempt after some consecutive failures."""

    initial: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.cap:
            raise ValueError(
                f"backoff initial={self.initial!r}, cap={self.cap!r}: "
                "accepted: 0 < initial <= cap (seconds)"
            )
        if self.factor < 1:
            raise ValueError(f"backoff factor={self.factor!r}: accepted: 1 or more")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter={self.jitter!r}: accepted: 0 <= jitter < 1")

    def delay(self, failures: int, spread: float = 0.0) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (1 is the first);
        ``spread`` in [-1, 1] picks where in the jitter band the delay falls."""
        if failures < 1:
            raise ValueError(f"failures={failures!r}: accepted: 1 or more")
        exponent = min(failures - 1, 64)  # cap**64 overflows nothing we use
        base = min(self.cap, self.initial * self.factor**exponent)
        spread = max(-1.0, min(1.0, spread))
        return min(self.cap, base * (1 + self.jitter * spread))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP-date); ``None``
    when absent or unreadable. Never negative, at most :data:`RETRY_AFTER_LIMIT`."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        seconds = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, min(RETRY_AFTER_LIMIT, seconds))


def honour_retry_after(delay: float, retry_after: float | None) -> float:
    """The backoff ``delay``, or the server's ``Retry-After`` when it asks for longer."""
    return delay if retry_after is None else max(delay, retry_after)


def failure_reason(status: int | None) -> str:
    """The metric label of a failure: ``None`` is a connection error or a timeout."""
    if status is None:
        return UNREACHABLE
    if status == 409:
        return CONFLICT
    if status == 429:
        return THROTTLED
    if status >= 500:
        return SERVER_ERROR
    return REFUSED


def describe_delay(seconds: float) -> str:
    """``0.5 s``, ``12 s``: how long, for a person."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


@dataclass(frozen=True)
class Failing:
    """The retry state of one key: how many failures in a row, and when to try again."""

    failures: int
    not_before: float  # on the injected clock
    delay: float
    generation: int | None
    message: str


class Retries:
    """Consecutive failures per key (an Application's uid) and when each may be retried.

    Not thread-safe: the operator uses it from its event loop only.
    """

    def __init__(
        self,
        policy: Backoff | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        spread: Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self.policy = policy or Backoff()
        self._clock = clock
        self._spread = spread
        self._failing: dict[Hashable, Failing] = {}

    def next_delay(self, key: Hashable) -> float:
        """The backoff the next failure of ``key`` would get (a fresh jitter each call)."""
        state = self._failing.get(key)
        return self.policy.delay((state.failures if state else 0) + 1, self._spread())

    def failed(
        self, key: Hashable, delay: float, *, generation: int | None = None, message: str = ""
    ) -> Failing:
        """Record a failure of ``key``, to be retried ``delay`` seconds from now."""
        state = self._failing.get(key)
        failing = Failing(
            (state.failures if state else 0) + 1,
            self._clock() + delay,
            delay,
            generation,
            message,
        )
        self._failing[key] = failing
        return failing

    def succeeded(self, key: Hashable) -> None:
        """Forget the failures of ``key`` (also what to call when it is deleted)."""
        self._failing.pop(key, None)

    def state(self, key: Hashable) -> Failing | None:
        return self._failing.get(key)

    def wait(self, key: Hashable, generation: int | None = None) -> float:
        """Seconds until ``key`` may be retried; 0 when due, not failing, or when
        ``generation`` differs from the failed one (a new spec is tried at once)."""
        state = self._failing.get(key)
        if state is None or (generation is not None and generation != state.generation):
            return 0.0
        return max(0.0, state.not_before - self._clock())

    def failing(self) -> list[Hashable]:
        return list(self._failing)

    def next_due(self, keys: Iterable[Hashable] | None = None) -> float | None:
        """Seconds until the earliest retry among ``keys`` (default: every failing key)."""
        chosen = self._failing if keys is None else [k for k in keys if k in self._failing]
        waits = [self.wait(k) for k in chosen]
        return min(waits) if waits else None

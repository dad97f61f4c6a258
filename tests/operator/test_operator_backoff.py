"""The retry policy of the operator: pure, with an injected clock and jitter."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mas_operator.backoff import (
    RETRY_AFTER_LIMIT,
    Backoff,
    Retries,
    describe_delay,
    failure_reason,
    honour_retry_after,
    parse_retry_after,
)
from mas_operator.conditions import Observed, build_status

pytestmark = pytest.mark.timeout(10)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_delays_double_from_the_initial_one_up_to_the_cap() -> None:
    policy = Backoff(initial=1.0, factor=2.0, cap=60.0, jitter=0.0)
    assert [policy.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert policy.delay(10_000) == 60


def test_jitter_spreads_within_its_band_and_never_past_the_cap() -> None:
    policy = Backoff(initial=1.0, cap=10.0, jitter=0.1)
    assert policy.delay(3, -1.0) == pytest.approx(3.6)
    assert policy.delay(3, 1.0) == pytest.approx(4.4)
    assert policy.delay(3, 7.0) == pytest.approx(4.4)  # out-of-band spread is clamped
    assert policy.delay(5, 1.0) == 10.0
    # doubling with a 10 % jitter: the next delay is always longer than the previous one
    assert policy.delay(2, -1.0) > policy.delay(1, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"initial": 0}, "accepted: 0 < initial <= cap"),
        ({"initial": 5, "cap": 1}, "accepted: 0 < initial <= cap"),
        ({"factor": 0.5}, "factor=0.5: accepted: 1 or more"),
        ({"jitter": 1.0}, "jitter=1.0: accepted: 0 <= jitter < 1"),
    ],
)
def test_a_bad_policy_is_refused_with_what_is_accepted(
    kwargs: dict[str, float], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        Backoff(**kwargs)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:07 GMT", now) == 7.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # in the past
    assert parse_retry_after("99999") == RETRY_AFTER_LIMIT
    for unreadable in (None, "", "soon", "-1", "1.5"):
        assert parse_retry_after(unreadable) is None


def test_a_longer_retry_after_wins_over_the_backoff() -> None:
    assert honour_retry_after(1.0, None) == 1.0
    assert honour_retry_after(1.0, 5.0) == 5.0
    assert honour_retry_after(8.0, 5.0) == 8.0


def test_failure_reasons_name_the_cause() -> None:
    assert [failure_reason(s) for s in (409, 429, 500, 503, 504, 403, None)] == [
        "conflict",
        "throttled",
        "server_error",
        "server_error",
        "server_error",
        "refused",
        "unreachable",
    ]
    assert (describe_delay(0.25), describe_delay(12.4)) == ("0.2 s", "12 s")


def test_retries_back_off_per_key_and_reset_on_success() -> None:
    clock = Clock()
    retries = Retries(Backoff(initial=1.0, cap=8.0, jitter=0.0), clock=clock)
    assert retries.wait("a") == 0 and retries.next_due() is None
    delays = []
    for _ in range(5):
        delay = retries.next_delay("a")
        retries.failed("a", delay, generation=1, message="boom")
        delays.append(delay)
    assert delays == [1, 2, 4, 8, 8]
    state = retries.state("a")
    assert state is not None and (state.failures, state.message) == (5, "boom")
    assert retries.wait("a") == 8 and retries.next_due() == 8
    assert retries.wait("b") == 0  # keys are independent
    clock.now += 5
    assert retries.wait("a") == 3
    assert retries.wait("a", generation=2) == 0  # a new spec is tried at once
    clock.now += 3
    assert retries.wait("a") == 0 and retries.failing() == ["a"]
    retries.succeeded("a")
    assert retries.failing() == [] and retries.next_delay("a") == 1


def test_jitter_comes_from_the_injected_source() -> None:
    spreads = iter([1.0, -1.0])
    retries = Retries(Backoff(initial=2.0, jitter=0.5), spread=lambda: next(spreads))
    assert retries.next_delay("a") == 3.0
    assert retries.next_delay("a") == 1.0


def test_the_status_says_when_a_failed_apply_is_retried() -> None:
    seen = Observed(3, {}, apply_error="applying Deployment d failed: boom", retry_in=4.0)
    conditions = {c["type"]: c for c in build_status(seen, None)["conditions"]}
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == (
        "False",
        "ApplyFailed",
    )
    assert conditions["Ready"]["message"] == "applying Deployment d failed: boom"
    assert conditions["Reconciling"]["message"] == (
        "retrying in 4.0 s: applying Deployment d failed: boom"
    )

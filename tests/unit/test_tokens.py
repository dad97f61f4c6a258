"""The token ledger: caps at and past their limit, the delegation chain, periods, absorbing."""

from __future__ import annotations

from mas.infra.models import PeriodBudget, TokenBudget
from mas.runtime.models.base import Usage
from mas.runtime.tokens import CHAIN_METADATA_KEY, TOKENS_METADATA_KEY, TokenLedger


def test_a_turn_landing_on_its_cap_ends_well_and_the_next_call_is_refused() -> None:
    ledger = TokenLedger("a", "m", TokenBudget(turn=100))
    turn = ledger.begin("s", {})
    assert turn.exhausted() is None
    turn.add(Usage(60, 40))
    assert turn.exhausted(ending=True) is None  # exactly at the cap: not passed
    found = turn.exhausted()  # but nothing is left for another call
    assert found is not None
    assert found.message == "turn budget of 100 tokens exhausted: 100 used (model.budget)"
    turn.add(Usage(1, 0))
    assert turn.exhausted(ending=True) is not None


def test_the_session_counts_across_turns_and_sessions_are_apart() -> None:
    ledger = TokenLedger("a", "m", TokenBudget(session=150))
    first = ledger.begin("s1", {})
    first.add(Usage(100, 0))
    assert first.exhausted() is None
    second = ledger.begin("s1", {})
    second.add(Usage(40, 20))
    found = second.exhausted(ending=True)
    assert found is not None and (found.budget, found.used) == ("session", 160)
    assert ledger.begin("s2", {}).exhausted() is None


def test_the_chain_cap_travels_and_the_tightest_is_passed_on() -> None:
    ledger = TokenLedger("callee", "m", TokenBudget(session=10_000))
    turn = ledger.begin("s", {CHAIN_METADATA_KEY: {"tokens": 500, "used": 450.0}})
    turn.add(Usage(30, 10))
    assert turn.delegation_metadata() == {CHAIN_METADATA_KEY: {"tokens": 500, "used": 490}}
    turn.add(Usage(10, 0))
    found = turn.exhausted()
    assert found is not None and (found.budget, found.cap, found.used) == ("session", 500, 500)
    unbudgeted = TokenLedger("free", "m").begin("s", {})
    assert unbudgeted.delegation_metadata() == {}


def test_malformed_chain_metadata_is_ignored() -> None:
    ledger = TokenLedger("a", "m")
    for value in ("lots", {"tokens": 0, "used": 1}, {"tokens": 5, "used": -1}, {"tokens": "5"}):
        turn = ledger.begin("s", {CHAIN_METADATA_KEY: value})
        assert turn.chain is None


def test_a_period_resets_when_its_window_ends() -> None:
    now = [1000.0]
    ledger = TokenLedger(
        "a", "m", TokenBudget(period=PeriodBudget(tokens=50, seconds=100)), clock=lambda: now[0]
    )
    turn = ledger.begin("s", {})
    turn.add(Usage(50, 0))
    found = turn.exhausted()
    assert found is not None and found.message == (
        "period budget of 50 tokens per 100 s exhausted: 50 used (model.budget)"
    )
    now[0] = 1100.0  # the next window
    assert ledger.begin("s2", {}).exhausted() is None


def test_a_delegates_totals_are_absorbed_and_garbage_is_not() -> None:
    ledger = TokenLedger("a", "gpt", TokenBudget(session=1000))
    turn = ledger.begin("s", {})
    turn.add(Usage(10, 5))
    turn.absorb({TOKENS_METADATA_KEY: {"by_model": {"claude": {"input": 100.0, "output": 20}}}})
    turn.absorb({TOKENS_METADATA_KEY: {"by_model": {"x": {"input": "many", "output": -3}}}})
    turn.absorb({TOKENS_METADATA_KEY: "nonsense"})
    assert turn.metadata() == {
        TOKENS_METADATA_KEY: {
            "input": 110,
            "output": 25,
            "by_model": {
                "gpt": {"input": 10, "output": 5},
                "claude": {"input": 100, "output": 20},
            },
        }
    }
    assert ledger.session_used("s") == 135

"""Tokens counted and capped: one :class:`TokenLedger` per agent, one :class:`TurnTokens` per turn.

Counting: every :class:`~mas.runtime.models.base.Usage` a model yields is added to the
turn (:meth:`TurnTokens.add`), to the metrics ``maslab_model_tokens_total`` and
``maslab_model_call_tokens`` (:mod:`mas.runtime.metrics`), to the agent's session and to
its current period. The turn's totals go in its task metadata under
:data:`TOKENS_METADATA_KEY`: ``{"input": N, "output": N, "by_model": {MODEL: {"input": N,
"output": N}}}`` (MODEL: the named model, else the provider's model name, else the plugin),
the delegates' turns included.

Capping (``model.budget``, :class:`~mas.infra.models.TokenBudget`): a budget is exhausted
when nothing of it is left before a model call or a delegation (its use is at its cap), or
when the turn's last call passed its cap (:meth:`TurnTokens.exhausted`); the first one ends
the turn ``failed`` with :attr:`Exhausted.message` (``"session budget of 20000 tokens
exhausted: 20412 used"``), counted in ``maslab_budget_exhausted_total{agent, budget}``,
logged, and recorded on the turn's span as the event :data:`BUDGET_EVENT` (budget, cap,
use, session) beside the span's error status.
Budgets, checked in this order:

- ``turn``: this agent's model calls in this turn, its delegates' turns included;
- ``session``: this agent's turns in the session, plus, for a turn a delegation started,
  the tokens the delegating chain had used when it delegated. A delegation carries the
  chain's cap and use in its metadata (:data:`CHAIN_METADATA_KEY`: ``{"tokens": CAP,
  "used": N}``); the callee checks the chain's cap as a ``session`` budget too, and passes
  it on with its own use added, so a delegation loop runs into the cap of the session that
  started it. A delegate's turn totals come back in its task metadata and are added to the
  caller's turn and session (:meth:`TurnTokens.absorb`).
- ``period``: this agent's model calls in the current window (per process: each replica
  counts its own).

Concurrency: used from one event loop; sessions are kept for the most recent
:data:`MAX_SESSIONS` sessions.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mas.infra.models import TokenBudget
from mas.runtime import metrics
from mas.runtime.models.base import Usage
from mas.telemetry import tracing
from mas.telemetry.tracing import MAS_SESSION_ID

logger = logging.getLogger(__name__)

TOKENS_METADATA_KEY = "maslab.tokens"
BUDGET_EVENT = "maslab.budget.exhausted"  # the span event of a turn a budget stopped
CHAIN_METADATA_KEY = "maslab.session_budget"
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Exhausted:
    """A budget whose cap the tokens passed."""

    budget: str  # turn, session or period
    cap: int
    used: int
    seconds: int | None = None  # the window of a period budget

    @property
    def message(self) -> str:
        """What a person reads: the budget, its cap and its use."""
        per = f" per {self.seconds} s" if self.seconds is not None else ""
        return (
            f"{self.budget} budget of {self.cap} tokens{per} exhausted: {self.used} used "
            "(model.budget)"
        )


@dataclass
class _Counts:
    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output


class TokenLedger:
    """The tokens of one agent by session and period, against its budget."""

    def __init__(
        self,
        agent_id: str,
        model: str,
        budget: TokenBudget | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.agent_id = agent_id
        self.model = model
        self.budget = budget
        self._clock = clock
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._window = -1
        self._period_used = 0

    def begin(self, session_id: str, metadata: Mapping[str, Any]) -> TurnTokens:
        """A new turn of ``session_id``; ``metadata`` is the turn's (a delegation's chain)."""
        self._sessions.setdefault(session_id, 0)
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return TurnTokens(self, session_id, _chain(metadata.get(CHAIN_METADATA_KEY)))

    def session_used(self, session_id: str) -> int:
        """The tokens this agent's turns in ``session_id`` used (0 when forgotten)."""
        return self._sessions.get(session_id, 0)

    def period_used(self) -> int:
        """The tokens of the current window (0 without a period budget)."""
        self._roll()
        return self._period_used

    def _roll(self) -> None:
        period = self.budget.period if self.budget is not None else None
        if period is None:
            return
        window = int(self._clock() // period.seconds)
        if window != self._window:
            self._window, self._period_used = window, 0

    def _add_session(self, session_id: str, tokens: int) -> None:
        if session_id in self._sessions:
            self._sessions[session_id] += tokens

    def _add(self, session_id: str, tokens: int) -> None:
        self._add_session(session_id, tokens)
        self._roll()
        self._period_used += tokens


@dataclass
class TurnTokens:
    """The tokens of one turn (module docstring)."""

    ledger: TokenLedger
    session_id: str
    chain: tuple[int, int] | None  # the delegating chain's (cap, used), when delegated
    counts: _Counts = field(default_factory=_Counts)
    by_model: dict[str, _Counts] = field(default_factory=dict)

    def add(self, usage: Usage) -> None:
        """Count one model call's tokens (metrics, turn, session, period)."""
        ledger = self.ledger
        inputs, outputs = max(usage.input_tokens, 0), max(usage.output_tokens, 0)
        for kind, count in (("input", inputs), ("output", outputs)):
            metrics.MODEL_TOKENS.labels(ledger.agent_id, ledger.model, kind).inc(count)
            metrics.MODEL_CALL_TOKENS.labels(ledger.agent_id, ledger.model, kind).observe(count)
        self.counts.input += inputs
        self.counts.output += outputs
        mine = self.by_model.setdefault(ledger.model, _Counts())
        mine.input += inputs
        mine.output += outputs
        ledger._add(self.session_id, inputs + outputs)

    def absorb(self, metadata: Mapping[str, Any]) -> None:
        """Add a delegate's turn (its task metadata's :data:`TOKENS_METADATA_KEY`): to this
        turn's totals and this session's use, not to the metrics (the delegate counted them)
        nor to the period (the delegate's own)."""
        reported = metadata.get(TOKENS_METADATA_KEY)
        if not isinstance(reported, Mapping):
            return
        by_model = reported.get("by_model")
        for name, counts in by_model.items() if isinstance(by_model, Mapping) else ():
            if not isinstance(counts, Mapping):
                continue
            inputs, outputs = _count(counts.get("input")), _count(counts.get("output"))
            if not inputs and not outputs:
                continue
            self.counts.input += inputs
            self.counts.output += outputs
            theirs = self.by_model.setdefault(str(name), _Counts())
            theirs.input += inputs
            theirs.output += outputs
            self.ledger._add_session(self.session_id, inputs + outputs)

    def exhausted(self, *, ending: bool = False) -> Exhausted | None:
        """The first budget used up, else ``None``: before a call or a delegation, a budget
        with nothing left (use at its cap); as the turn ends (``ending``), one whose cap the
        turn's last call passed."""

        def over(used: int, cap: int) -> bool:
            return used > cap if ending else used >= cap

        budget = self.ledger.budget
        if budget is not None and budget.turn is not None and over(self.counts.total, budget.turn):
            return Exhausted("turn", budget.turn, self.counts.total)
        if budget is not None and budget.session is not None:
            used = self.ledger.session_used(self.session_id)
            if over(used, budget.session):
                return Exhausted("session", budget.session, used)
        if self.chain is not None:
            cap, before = self.chain
            if over(before + self.counts.total, cap):
                return Exhausted("session", cap, before + self.counts.total)
        if budget is not None and budget.period is not None:
            used = self.ledger.period_used()
            if over(used, budget.period.tokens):
                return Exhausted("period", budget.period.tokens, used, budget.period.seconds)
        return None

    def stop(self, found: Exhausted) -> str:
        """Count, log and trace an exhausted budget; the message that ends the turn."""
        metrics.BUDGET_EXHAUSTED.labels(self.ledger.agent_id, found.budget).inc()
        tracing.record_event(
            BUDGET_EVENT,
            {
                "maslab.budget": found.budget,
                "maslab.budget.cap": found.cap,
                "maslab.budget.used": found.used,
                MAS_SESSION_ID: self.session_id,
            },
        )
        logger.warning(
            "agent %s: session %s: %s", self.ledger.agent_id, self.session_id, found.message
        )
        return f"agent {self.ledger.agent_id!r} stopped: {found.message}"

    def metadata(self) -> dict[str, Any]:
        """The task metadata of the turn: ``{TOKENS_METADATA_KEY: {...}}`` (empty: none)."""
        if not self.by_model:
            return {}
        return {
            TOKENS_METADATA_KEY: {
                "input": self.counts.input,
                "output": self.counts.output,
                "by_model": {
                    name: {"input": c.input, "output": c.output}
                    for name, c in self.by_model.items()
                },
            }
        }

    def delegation_metadata(self) -> dict[str, Any]:
        """What a delegation from this turn carries: the session cap and the chain's use."""
        budget = self.ledger.budget
        caps: list[tuple[int, int]] = []
        if budget is not None and budget.session is not None:
            caps.append((budget.session, self.ledger.session_used(self.session_id)))
        if self.chain is not None:
            caps.append((self.chain[0], self.chain[1] + self.counts.total))
        if not caps:
            return {}
        cap, used = min(caps, key=lambda c: c[0] - c[1])  # the one with the least left
        return {CHAIN_METADATA_KEY: {"tokens": cap, "used": used}}


def _count(value: Any) -> int:
    """A token count from a peer's metadata (JSON numbers may arrive as floats)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return 0


def _chain(value: Any) -> tuple[int, int] | None:
    """A delegation's chain budget, when its metadata carries a well-formed one."""
    if not isinstance(value, Mapping):
        return None
    cap, used = value.get("tokens"), value.get("used")
    if isinstance(cap, int | float) and isinstance(used, int | float) and cap > 0 and used >= 0:
        return int(cap), int(used)
    return None

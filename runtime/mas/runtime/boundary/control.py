"""``ControlContract``: steer and cancel a session's turns from outside the conversation.

A2A has no steer RPC (extra A2A messages on a working task are only queued); the control
protocol (``mas-ctl steer`` / ``mas-ctl cancel``) reaches this contract instead. The session
turn mailbox (:class:`mas.ctl.session.mailbox.SessionTurnMailbox`) implements it.

Rules for implementations:

- ``steer(session_id, text, mode)`` with a generation in flight on that session:

  - ``preempt``: stop the in-flight generation at its next suspension point (between
    chunks), keep the prefix generated so far, and replace the rest: the same turn goes on,
    the model runs again with the steer text as new input after the prefix. The turn's
    consumer sees the prefix, then the continuation, then one ``TurnEnded`` whose text is
    prefix + continuation. History keeps the prefix.
  - ``replace``: stop the in-flight generation and discard its prefix: a new generation
    starts from the steer text in the same turn slot. The consumer keeps receiving events;
    the final ``TurnEnded`` text holds only the new generation, and history drops the
    discarded prefix.
  - ``wait``: never touch the in-flight generation; the text is queued at the FRONT of the
    session's queue (after earlier front-queued steers, before ordinary turns) and runs
    when the current generation finishes.

  With nothing in flight, every mode queues the text at the front (``applied='queued'``).
  An unknown mode raises :class:`~mas.runtime.errors.ControlError` naming the accepted ones.
  A second preempt/replace that arrives before the first one took effect is queued too.
- ``cancel_inflight(session_id)`` interrupts the running turn of that session: it ends
  ``canceled`` (its consumers see ``TurnEnded(status='canceled')``, with the text generated
  so far). It returns ``False`` when nothing was running. Queued turns are not touched. A
  cancel that arrives after a preempt/replace stopped the generation, before its
  continuation started, wins: the turn ends ``canceled``.
- Unknown session ids are not errors: nothing is running there (``cancel_inflight`` returns
  ``False``; ``steer`` queues a new turn, which creates the session).
- Both may be called from any task of the loop that owns the implementation.

Runners learn that a generation was interrupted through the next turn's metadata:
``mas.steer`` is ``"preempt"`` (the previous generation's prefix stays in history) or
``"replace"`` (the runner drops the interrupted partial reply from history).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from mas.runtime.turns import TurnEnded

SteerMode = Literal["preempt", "replace", "wait"]
STEER_MODES: tuple[SteerMode, ...] = ("preempt", "replace", "wait")
SteerApplied = Literal["preempted", "replaced", "queued"]

# TurnInput metadata key telling a runner that the previous generation was interrupted.
STEER_METADATA_KEY = "mas.steer"


@dataclass(frozen=True)
class SteerReceipt:
    """What a steer did.

    ``turn_id`` is the turn that carries the steer text (the in-flight turn for
    ``preempted``/``replaced``, a new front-queued turn for ``queued``); ``result`` resolves
    with that turn's ``TurnEnded``.
    """

    session_id: str
    mode: SteerMode
    applied: SteerApplied
    turn_id: str
    result: asyncio.Future[TurnEnded]


class ControlContract(ABC):
    """Steer and cancel (see the module docstring for the rules)."""

    @abstractmethod
    async def steer(self, session_id: str, text: str, mode: SteerMode) -> SteerReceipt:
        """Apply one steer to ``session_id``."""

    @abstractmethod
    async def cancel_inflight(self, session_id: str) -> bool:
        """Interrupt the running turn of ``session_id``; ``False`` when none was running."""

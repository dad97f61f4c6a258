"""A conversation with a remote agent: one A2A context, turn after turn (``chat``, ``tui``).

Each line the person types is one turn (:func:`~mas.ctl.client.exchange.send_turn`) in the
conversation's context. When the agent asked for input, the next line goes on the task that
waits (it resumes that task); a conversation resumed with ``--context`` looks that task up
first (``ListTasks`` of the context, state ``input-required``). :meth:`interrupt` cancels
the running turn's task (Ctrl-C).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from mas.ctl.client.connection import Connection
from mas.ctl.client.exchange import TurnIds, cancel_turn, send_turn, waiting_task
from mas.runtime.turns import TurnEnded, TurnEvent


class RemoteConversation:
    """The conversation's context, the task waiting for an answer, the running turn."""

    def __init__(self, conn: Connection, context_id: str | None) -> None:
        self.conn = conn
        self.resumed = context_id is not None
        self.context_id = context_id or str(uuid.uuid4())
        self.waiting: str | None = None  # the task that asked for input
        self.last: TurnIds | None = None  # the ids of the latest turn

    async def resume(self) -> str | None:
        """A resumed conversation: the task that waits for an answer, if any."""
        if self.resumed:
            self.waiting = await waiting_task(self.conn, self.context_id)
        return self.waiting

    async def turn(self, text: str) -> AsyncIterator[TurnEvent]:
        """One turn's events (the last a TurnEnded)."""
        ids = TurnIds(self.context_id)
        self.last = ids
        async for event in send_turn(self.conn, text, ids, self.waiting):
            if isinstance(event, TurnEnded):
                asked = event.status == "input_required"
                self.waiting = ids.task_id if asked else None
            yield event

    async def interrupt(self, ids: TurnIds) -> list[tuple[str, str]]:
        """Cancel the task of the turn ``ids`` names; per task, its state or the failure."""
        return await cancel_turn(self.conn, ids)

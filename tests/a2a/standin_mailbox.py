"""A minimal stand-in for ``mas.ctl.session.mailbox.SessionTurnMailbox`` (same API).

Used only until the runtime core lands; the conftest prefers the real mailbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from mas.runtime.turns import TurnEnded, TurnEvent, TurnInput, TurnRunner


class StandInTicket:
    def __init__(self, turn: TurnInput) -> None:
        self.turn = turn
        self.queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        self.state = "queued"
        self.detached = False
        self.result: asyncio.Future[TurnEnded] = asyncio.get_running_loop().create_future()

    async def events(self) -> AsyncIterator[TurnEvent]:
        while True:
            event = await self.queue.get()
            yield event
            if isinstance(event, TurnEnded):
                return

    def cancel_wait(self) -> None:
        if not self.detached:
            self.detached = True
            self.queue.put_nowait(TurnEnded("canceled", message="stopped waiting"))


class StandInMailbox:
    def __init__(self, runner: TurnRunner) -> None:
        self._runner = runner
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, turn: TurnInput, *, front: bool = False) -> StandInTicket:
        ticket = StandInTicket(turn)
        lock = self._locks.setdefault(turn.session_id, asyncio.Lock())
        task = asyncio.get_running_loop().create_task(self._run(lock, ticket))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return ticket

    async def _run(self, lock: asyncio.Lock, ticket: StandInTicket) -> None:
        async with lock:
            if ticket.detached:
                return
            ticket.state = "running"
            async for event in self._runner.run(ticket.turn):
                if not ticket.detached:
                    ticket.queue.put_nowait(event)
                if isinstance(event, TurnEnded):
                    ticket.result.set_result(event)
            ticket.state = "done"

    def running(self, session_id: str) -> bool:
        lock = self._locks.get(session_id)
        return lock is not None and lock.locked()

    async def drain(self, timeout: float) -> bool:
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=timeout)
        return not self._tasks

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

"""A terminal state is final: guards around the SDK's task stores.

The SDK's stores take any write. :class:`FinalStateTaskStore` (around an unversioned store,
in memory) and :class:`FinalStateVersionedStore` (around the versioned database store) refuse
a write that would move a stored COMPLETED, CANCELED, FAILED or REJECTED task to another
state, with the SDK's own ``ConcurrentTaskModificationError``: the SDK then reloads the task,
sees it ended, and stops. So a turn that goes on after ``CancelTask`` never overwrites
CANCELED, on one replica or several. (Without the guard it does, across replicas: after a
conflicting write the SDK reloads, sees CANCELED, and still applies the turn's next event at
the fresh version.)

The versioned guard and the event stream's are in
:mod:`~library_ioa.plugins.a2a.server.stores.sql_guards` (a database store only).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol, runtime_checkable

from a2a.server.cluster import (
    ConcurrentTaskModificationError,
)
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState

logger = logging.getLogger(__name__)

TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


INTERRUPTED_STATES = frozenset(
    {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
)
MAX_REMEMBERED = 50_000


def refuses(stored: TaskState | None, task: Task) -> bool:
    """Whether writing ``task`` over a task stored in state ``stored`` leaves a terminal state."""
    return stored is not None and stored in TERMINAL_STATES and task.status.state != stored


def _refusal(stored: TaskState, task: Task) -> ConcurrentTaskModificationError:
    logger.info(
        "task %s is %s: a write moving it to %s is refused (a terminal state is final)",
        task.id,
        TaskState.Name(stored),
        TaskState.Name(task.status.state),
    )
    return ConcurrentTaskModificationError(task.id)


@runtime_checkable
class StoredStates(Protocol):
    """A task store that tells the state of a task it holds without reading the task out."""

    def stored_state(self, task_id: str, context: ServerCallContext) -> TaskState | None:
        """The stored task's state; ``None`` when no such task is stored."""
        ...


class FinalStateTaskStore(TaskStore):
    """An unversioned store (in memory) that never lets a terminal state be overwritten.

    Each save checks the state stored before it: asked of the inner store when it is
    :class:`StoredStates` (the bounded memory store is), else read with ``get``.
    """

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self._states = inner if isinstance(inner, StoredStates) else None
        self._lock = asyncio.Lock()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        async with self._lock:  # one process: the check and the write are one step
            if self._states is not None:
                state = self._states.stored_state(task.id, context)
            else:
                stored = await self.inner.get(task.id, context)
                state = None if stored is None else stored.status.state
            if refuses(state, task):
                assert state is not None
                raise _refusal(state, task)
            await self.inner.save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self.inner.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self.inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.inner.delete(task_id, context)


__all__ = [
    "INTERRUPTED_STATES",
    "TERMINAL_STATES",
    "FinalStateTaskStore",
    "StoredStates",
    "refuses",
]

"""A terminal state is final, on the SDK's database stores (``a2a.task_store`` type ``sql``).

:class:`FinalStateVersionedStore` guards the versioned database store as
:class:`~library_ioa.plugins.a2a.server.stores.final_state.FinalStateTaskStore` guards the memory
one. It also records which replica runs each in-flight task
(:class:`~library_ioa.plugins.a2a.server.stores.runs.RunBook`) and turns database errors into the
A2A ``InternalError`` "the task store is unavailable" (details go to the log, not to clients).
A failed write of a task also notes it in the run book (``RunBook.broke``): the SDK has
ended that task's stream with the error, and the heartbeat writes it FAILED once the
database is back (``RunBook.recover``). :class:`GuardedEventStream` does the same for the
cross-replica event stream.

Loaded with a database store only: it imports SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from a2a.server.cluster import (
    StoredTask,
    TaskEventStream,
    TaskVersion,
    VersionedTaskStore,
)
from a2a.server.cluster.event_stream import VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.errors import InternalError, InvalidParamsError
from sqlalchemy.exc import SQLAlchemyError

from library_ioa.plugins.a2a.server.stores.final_state import (
    INTERRUPTED_STATES,
    MAX_REMEMBERED,
    TERMINAL_STATES,
    _refusal,
    refuses,
)
from library_ioa.plugins.a2a.server.stores.runs import RunBook

logger = logging.getLogger(__name__)
# The length of the SDK's id columns (a2a.server.models: String(36), a UUID's text).
ID_CHARS = 36


class FinalStateVersionedStore(VersionedTaskStore):
    """A versioned store that refuses to overwrite a terminal state and records who runs what.

    No extra read per write: the inner store commits a write only at ``prev_version`` (a
    writer that has not seen the latest version fails with the SDK's conflict error and
    reloads), and a writer learns the latest version only through this store's ``get`` and
    ``save``. So the terminal states this store has handed out or written (the last
    :data:`MAX_REMEMBERED` tasks) are all it needs to check. A database error reaches the
    client as the A2A ``InternalError`` "the task store is unavailable" (the details, which
    name the database, go to the log).
    """

    def __init__(self, inner: VersionedTaskStore, runs: RunBook | None = None) -> None:
        self.inner = inner
        self.runs = runs
        self._ended: OrderedDict[str, TaskState] = OrderedDict()

    def _note(self, task: Task) -> None:
        if task.status.state in TERMINAL_STATES:
            self._ended[task.id] = task.status.state
            self._ended.move_to_end(task.id)
            while len(self._ended) > MAX_REMEMBERED:
                self._ended.popitem(last=False)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        too_long = _too_long(task)
        if too_long is not None:
            raise too_long
        ended = self._ended.get(task.id)
        if refuses(ended, task):
            assert ended is not None
            raise _refusal(ended, task)
        terminal = task.status.state in TERMINAL_STATES
        try:
            async with _unavailable_on_error("save", task.id, self._broke(task, context, terminal)):
                if self.runs is not None and not terminal:
                    await self.runs.claim(task.id, context.user.user_name)
                version = await self.inner.save(
                    task, event=event, prev=prev, prev_version=prev_version, context=context
                )
                if self.runs is not None and terminal:
                    await self.runs.release(task.id)
                elif self.runs is not None and task.status.state in INTERRUPTED_STATES:
                    self.runs.forget(task.id)
        except InternalError:
            if self.runs is None or not self._deferred(task):
                raise
            return prev_version  # FAILED, written by RunBook.recover once the store is back
        self._note(task)
        return version

    def _deferred(self, task: Task) -> bool:
        """Whether a failed write of ``task`` is its FAILED end after a lost write: the run
        book writes that once the store is back, so the writer (the SDK, ending the task's
        stream after the first failure) goes on as if it were written."""
        assert self.runs is not None
        deferred = task.status.state == TaskState.TASK_STATE_FAILED and task.id in self.runs.broken
        if deferred:
            logger.info("task %s: FAILED is written once the task store is back", task.id)
        return deferred

    def _broke(
        self, task: Task, context: ServerCallContext, terminal: bool
    ) -> Callable[[], None] | None:
        """What to do when this write fails: note the task's lost write in the run book."""
        runs = self.runs
        if runs is None:
            return None
        return lambda: runs.broke(task.id, context.user.user_name, terminal=terminal)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        async with _unavailable_on_error("get", task_id):
            stored = await self.inner.get(task_id, context)
        if stored is not None:
            self._note(stored.task)
        return stored

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        async with _unavailable_on_error("list", ""):
            return await self.inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        async with _unavailable_on_error("delete", task_id):
            await self.inner.delete(task_id, context)


class GuardedEventStream(TaskEventStream):
    """The cross-replica event stream, its database errors turned into the A2A
    ``InternalError`` "the task store is unavailable" (a subscriber whose tail loses the
    database ends with that error; the details, which name the database, go to the log)."""

    def __init__(self, inner: TaskEventStream) -> None:
        self.inner = inner

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        async with _unavailable_on_error("publish", task_id):
            await self.inner.publish(task_id, event)

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        events = self.inner.subscribe(task_id, after=after)
        try:
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
                except (SQLAlchemyError, OSError) as exc:
                    raise _unavailable("subscribe", task_id, exc) from None
                yield event
        finally:
            await events.aclose()

    async def destroy(self, task_id: str) -> None:
        async with _unavailable_on_error("destroy", task_id):
            await self.inner.destroy(task_id)


@contextlib.asynccontextmanager
async def _unavailable_on_error(
    operation: str, task_id: str, failed: Callable[[], None] | None = None
) -> AsyncIterator[None]:
    try:
        yield
    except (SQLAlchemyError, OSError) as exc:
        if failed is not None:
            failed()
        raise _unavailable(operation, task_id, exc) from None


def _too_long(task: Task) -> InvalidParamsError | None:
    """The client's error for an id the SDK's tables cannot hold (:data:`ID_CHARS`), if any.

    PostgreSQL refuses a longer value, which would otherwise reach the client as "the task
    store is unavailable"; SQLite would keep it silently. Task ids are the server's own
    UUIDs, but a client chooses its contextId.
    """
    for field, value in (("contextId", task.context_id), ("taskId", task.id)):
        if len(value) > ID_CHARS:
            shown = value if len(value) <= 80 else value[:80] + "..."
            return InvalidParamsError(
                message=f"{field} {shown!r} has {len(value)} characters; this agent's task "
                f"store keeps ids of at most {ID_CHARS} (a UUID fits)"
            )
    return None


def _unavailable(operation: str, task_id: str, exc: BaseException) -> InternalError:
    """The A2A error a client gets for a database error; the details go to the log."""
    logger.warning("task store %s %s failed: %s", operation, task_id, _reason(exc))
    return InternalError(message="the task store is unavailable; try again later")


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


__all__ = ["FinalStateVersionedStore", "GuardedEventStream"]

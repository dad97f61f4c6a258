"""``TaskBook`` (server/fast/stream.py): what it reads from and writes to the task store."""

from __future__ import annotations

from a2a.server.cluster.task_store import LegacyTaskStoreAdapter
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import TaskState, TaskStatus, TaskStatusUpdateEvent

from library_ioa.plugins.a2a.server.fast.stream import TaskBook


class CountingStore(LegacyTaskStoreAdapter):
    """The SDK's in-memory store, counting the reads."""

    def __init__(self) -> None:
        super().__init__(InMemoryTaskStore())
        self.reads = 0

    async def get(self, task_id: str, context: ServerCallContext):  # type: ignore[no-untyped-def]
        self.reads += 1
        return await super().get(task_id, context)


def working(task_id: str) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )


async def test_a_new_tasks_book_never_reads_the_store_before_its_first_save() -> None:
    """Fails before ``new``: the first read of a new task asked the store (a certain miss)."""
    store = CountingStore()
    context = ServerCallContext()
    book = TaskBook(store, context, "t-new", None, new=True)
    assert await book.get_task() is None
    await book.apply(working("t-new"))  # creates the SUBMITTED task, then applies WORKING
    assert store.reads == 0
    stored = await store.get("t-new", context)
    assert stored is not None and stored.task.status.state == TaskState.TASK_STATE_WORKING


async def test_after_invalidate_the_store_is_read_again() -> None:
    store = CountingStore()
    context = ServerCallContext()
    book = TaskBook(store, context, "t-new", None, new=True)
    book.invalidate()  # e.g. a concurrent modification: the store has the last word
    assert await book.get_task() is None
    assert store.reads == 1
    other = TaskBook(store, context, "t-new", None)  # not new: reads at once
    await other.apply(working("t-new"))
    book.invalidate()
    task = await book.get_task()
    assert task is not None and task.status.state == TaskState.TASK_STATE_WORKING

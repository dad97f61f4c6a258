"""A terminal state is final on one replica too: the guard around the in-memory store, and a
turn that goes on after ``CancelTask`` on a SQL store never overwrites CANCELED."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import CancelTaskRequest, Task, TaskState, TaskStatus
from durable_support import STEP, get_task, serve_on_store
from tests.a2a.a2a_support import sdk_client, send, user_message, wait_for

from library_ioa.plugins.a2a.server.stores.endpoint import FinalStateTaskStore

CONTEXT = ServerCallContext()


def _task(state: TaskState) -> Task:
    return Task(id="t", context_id="c", status=TaskStatus(state=state))


@pytest.mark.parametrize(
    "terminal",
    [
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    ],
)
async def test_the_memory_guard_refuses_to_leave_a_terminal_state(terminal: TaskState) -> None:
    sdk = InMemoryTaskStore()
    await sdk.save(_task(terminal), CONTEXT)
    await sdk.save(_task(TaskState.TASK_STATE_WORKING), CONTEXT)  # the SDK's store takes it
    overwritten = await sdk.get("t", CONTEXT)
    assert overwritten is not None
    assert overwritten.status.state == TaskState.TASK_STATE_WORKING

    guarded = FinalStateTaskStore(InMemoryTaskStore())
    await guarded.save(_task(TaskState.TASK_STATE_WORKING), CONTEXT)
    await guarded.save(_task(terminal), CONTEXT)
    with pytest.raises(ConcurrentTaskModificationError):
        await guarded.save(_task(TaskState.TASK_STATE_WORKING), CONTEXT)
    await guarded.save(_task(terminal), CONTEXT)  # the same terminal state may be rewritten
    kept = await guarded.get("t", CONTEXT)
    assert kept is not None and kept.status.state == terminal


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_cancel_then_the_turn_ends_on_one_replica(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    async with serve_on_store(url) as served, sdk_client(served) as client:
        [started] = await send(
            client, user_message("late g the answer", context_id="c"), return_immediately=True
        )
        await wait_for(served.runner.started["g"])
        canceled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        served.runner.gates["g"].set()
        async with asyncio.timeout(STEP):
            while served.runner.history["c"] != ["late g the answer"]:
                await asyncio.sleep(0.02)
            assert await served.mailbox.drain(STEP)
            # The cancel was answered once the SDK had stopped consuming the task's events,
            # and the turn has ended: the last hop is the call that followed the turn for
            # the task, which stops at the cancel. Once it has returned, nothing of the turn
            # can reach the store.
            while served.exposure.executor.canceled(started.task.id):
                await asyncio.sleep(0.02)
        task = await get_task(client, started.task.id)
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert not any(a.name == "late.txt" for a in task.artifacts)  # nothing after the cancel

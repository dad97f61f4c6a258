"""The bounded in-memory task store: count, bytes and TTL, never a running task."""

from __future__ import annotations

import random

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import apply_history_length, encode_page_token
from pydantic import ValidationError

from library_ioa.plugins.a2a.server.stores.final_state import FinalStateTaskStore
from library_ioa.plugins.a2a.server.stores.memory import (
    TASK_STORE_EVICTIONS,
    BoundedMemoryTaskStore,
)
from library_ioa.serving.principals import Principal
from mas.infra.models import TaskStoreOptions

pytestmark = [pytest.mark.timeout(30)]

CONTEXT = ServerCallContext()
CONTEXT_B = ServerCallContext(user=Principal("bob"))
DONE = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
ASKING = TaskState.TASK_STATE_INPUT_REQUIRED


def task(task_id: str, state: TaskState, payload: int = 0) -> Task:
    made = Task(id=task_id, context_id="c", status=TaskStatus(state=state))
    if payload:
        made.artifacts.append(Artifact(artifact_id="a", parts=[Part(text="x" * payload)]))
    return made


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def evictions(agent: str, reason: str) -> float:
    return TASK_STORE_EVICTIONS.labels(agent, reason)._value.get()


async def present(store: BoundedMemoryTaskStore, *ids: str) -> list[str]:
    return [i for i in ids if await store.get(i, CONTEXT) is not None]


async def test_past_max_tasks_the_oldest_ended_tasks_go_and_running_ones_stay() -> None:
    store = BoundedMemoryTaskStore(agent_id="count-agent", max_tasks=3)
    await store.save(task("w0", WORKING), CONTEXT)
    for index in range(1, 5):
        await store.save(task(f"c{index}", DONE), CONTEXT)
    assert await present(store, "w0", "c1", "c2", "c3", "c4") == ["w0", "c3", "c4"]
    assert len(store) == 3
    assert evictions("count-agent", "count") == 2


async def test_an_ended_task_written_again_is_young_again() -> None:
    store = BoundedMemoryTaskStore(agent_id="touch-agent", max_tasks=2)
    await store.save(task("a", DONE), CONTEXT)
    await store.save(task("b", DONE), CONTEXT)
    await store.save(task("a", DONE), CONTEXT)
    await store.save(task("c", DONE), CONTEXT)
    assert await present(store, "a", "b", "c") == ["a", "c"]


async def test_past_max_bytes_big_ended_tasks_go() -> None:
    store = BoundedMemoryTaskStore(agent_id="bytes-agent", max_bytes=250_000)
    for index in range(5):
        await store.save(task(f"big{index}", DONE, payload=100_000), CONTEXT)
    assert await present(store, *(f"big{i}" for i in range(5))) == ["big3", "big4"]
    assert store.bytes <= 250_000
    assert evictions("bytes-agent", "bytes") == 3


async def test_waiting_tasks_go_only_when_no_ended_task_is_left() -> None:
    store = BoundedMemoryTaskStore(agent_id="wait-agent", max_tasks=2)
    await store.save(task("ask", ASKING), CONTEXT)
    await store.save(task("done", DONE), CONTEXT)
    await store.save(task("run", WORKING), CONTEXT)
    assert await present(store, "ask", "done", "run") == ["ask", "run"]
    await store.save(task("run2", WORKING), CONTEXT)
    assert await present(store, "ask", "run", "run2") == ["run", "run2"]


async def test_running_tasks_are_never_evicted_even_over_the_limits() -> None:
    store = BoundedMemoryTaskStore(agent_id="busy-agent", max_tasks=2, max_bytes=10_000)
    for index in range(4):
        await store.save(task(f"w{index}", WORKING, payload=5_000), CONTEXT)
    assert len(await present(store, "w0", "w1", "w2", "w3")) == 4


async def test_the_ttl_evicts_ended_and_waiting_tasks_not_running_ones() -> None:
    clock = Clock()
    store = BoundedMemoryTaskStore(agent_id="ttl-agent", ttl_seconds=60, clock=clock)
    await store.save(task("done", DONE), CONTEXT)
    await store.save(task("ask", ASKING), CONTEXT)
    await store.save(task("run", WORKING), CONTEXT)
    clock.now += 59
    assert await present(store, "done", "ask", "run") == ["done", "ask", "run"]
    await store.save(task("fresh", DONE), CONTEXT)
    clock.now += 2
    assert await present(store, "done", "ask", "run", "fresh") == ["run", "fresh"]
    assert evictions("ttl-agent", "ttl") == 2
    listed = await store.list(ListTasksRequest(), CONTEXT)
    assert sorted(t.id for t in listed.tasks) == ["fresh", "run"]


async def test_deleting_a_task_frees_its_bytes() -> None:
    store = BoundedMemoryTaskStore(agent_id="delete-agent")
    await store.save(task("a", DONE, payload=1000), CONTEXT)
    await store.delete("a", CONTEXT)
    assert store.bytes == 0
    assert len(store) == 0


def test_the_bounds_belong_to_the_memory_store() -> None:
    assert TaskStoreOptions(max_tasks=5, ttl_seconds=1).max_tasks == 5
    with pytest.raises(ValidationError, match="type 'sql' takes no max_tasks"):
        TaskStoreOptions(type="sql", url="sqlite+aiosqlite:///x.db", max_tasks=5)
    with pytest.raises(ValidationError, match="max_bytes"):
        TaskStoreOptions(max_bytes=10)


# -- the SDK's answers: the bounded store lists and isolates tasks as InMemoryTaskStore does --


def _stamped(task_id: str, rng: random.Random) -> Task:
    made = Task(
        id=task_id,
        context_id=rng.choice(["c1", "c2", "c3"]),
        status=TaskStatus(state=rng.choice([WORKING, DONE, ASKING, TaskState.TASK_STATE_FAILED])),
    )
    for index in range(rng.randint(0, 3)):  # some have a history
        made.history.append(Message(message_id=f"{task_id}-{index}", parts=[Part(text="h")]))
    if rng.random() < 0.8:  # some tasks have no timestamp; some share one
        made.status.timestamp.FromSeconds(1_700_000_000 + rng.randint(0, 5))
        made.status.timestamp.nanos = rng.choice([0, 0, 500])
    if rng.random() < 0.5:
        made.artifacts.append(
            Artifact(artifact_id="a", parts=[Part(text="x" * rng.randint(1, 50))])
        )
    if rng.random() < 0.3:
        made.metadata.update({"k": rng.randint(0, 9), "j": "v"})
    return made


def _requests(rng: random.Random, ids: list[str]) -> list[ListTasksRequest]:
    requests = [ListTasksRequest(), ListTasksRequest(page_size=100)]
    requests += [ListTasksRequest(history_length=1, include_artifacts=True)]
    requests += [ListTasksRequest(history_length=0)]
    for context_id in ("c1", "c2", "missing"):
        requests.append(ListTasksRequest(context_id=context_id))
    for state in (WORKING, DONE, ASKING):
        requests.append(ListTasksRequest(status=state, page_size=rng.randint(1, 4)))
    after = ListTasksRequest(page_size=3)
    after.status_timestamp_after.FromSeconds(1_700_000_002)
    requests.append(after)
    for task_id in rng.sample(ids, 3):  # the SDK's legacy token: the first task of the page
        requests.append(ListTasksRequest(page_token=encode_page_token(task_id), page_size=2))
    return requests


async def _answer(
    store: TaskStore, request: ListTasksRequest, context: ServerCallContext
) -> ListTasksResponse | str:
    """The store's page as the SDK's handler returns it, or the error the store raised.

    Ours trims each task (artifacts, history) as it parses it, as the handler then does.
    """
    try:
        page = await store.list(request, context)
    except InvalidParamsError as exc:
        return f"InvalidParamsError: {exc}"
    for task in page.tasks:
        if not request.include_artifacts:
            task.ClearField("artifacts")
        task.CopyFrom(apply_history_length(task, request))
    return page


@pytest.mark.parametrize("seed", range(12))
async def test_list_answers_what_the_sdk_store_answers(seed: int) -> None:
    rng = random.Random(seed)
    ours = BoundedMemoryTaskStore(agent_id="list-agent")
    sdk = InMemoryTaskStore()
    ids = [f"t{index:02d}" for index in range(rng.randint(5, 25))]
    for _ in range(len(ids) * 2):  # writes, rewrites and deletes in a random order
        task_id = rng.choice(ids)
        context = rng.choice([CONTEXT, CONTEXT_B])
        if rng.random() < 0.15:
            await ours.delete(task_id, context)
            await sdk.delete(task_id, context)
            continue
        written = _stamped(task_id, rng)
        await ours.save(written, context)
        await sdk.save(written, context)
    for first in _requests(rng, ids):
        for context in (CONTEXT, CONTEXT_B):
            request, pages = first, 0
            while True:  # every page, following the tokens
                mine, theirs = (
                    await _answer(ours, request, context),
                    await _answer(sdk, request, context),
                )
                assert mine == theirs, request
                pages += 1
                if isinstance(theirs, str) or not theirs.next_page_token:
                    break
                assert pages < 50
                request = ListTasksRequest()
                request.CopyFrom(first)
                request.page_token = theirs.next_page_token
    for task_id in ids:
        for context in (CONTEXT, CONTEXT_B):
            assert await ours.get(task_id, context) == await sdk.get(task_id, context)


async def test_a_page_token_naming_no_task_is_refused_as_the_sdk_refuses_it() -> None:
    ours, sdk = BoundedMemoryTaskStore(), InMemoryTaskStore()
    for store in (ours, sdk):
        await store.save(task("a", DONE), CONTEXT)
    bad = ListTasksRequest(page_token=encode_page_token("never-issued"))
    messages = []
    for store in (ours, sdk):
        with pytest.raises(InvalidParamsError) as raised:
            await store.list(bad, CONTEXT)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


async def test_the_caller_owns_what_it_saves_and_what_it_reads() -> None:
    store = BoundedMemoryTaskStore()
    written = task("t", WORKING, payload=10)
    await store.save(written, CONTEXT)
    written.status.state = DONE  # changed after the save, never saved
    written.artifacts[0].parts.add(text="more")
    read = await store.get("t", CONTEXT)
    assert read is not None
    assert read.status.state == WORKING
    assert len(read.artifacts[0].parts) == 1
    read.history.add(message_id="m")  # changed after the read, never saved
    listed = await store.list(ListTasksRequest(), CONTEXT)
    listed.tasks[0].ClearField("artifacts")
    again = await store.get("t", CONTEXT)
    assert again == task("t", WORKING, payload=10)
    assert store.bytes == again.ByteSize()


async def test_the_stored_state_is_known_without_reading_the_task() -> None:
    clock = Clock()
    store = BoundedMemoryTaskStore(ttl_seconds=60, clock=clock)
    await store.save(task("t", ASKING), CONTEXT)
    assert store.stored_state("t", CONTEXT) == ASKING
    assert store.stored_state("t", CONTEXT_B) is None  # another owner's task
    assert store.stored_state("never", CONTEXT) is None
    clock.now += 61
    assert store.stored_state("t", CONTEXT) is None  # past the TTL: evicted


class _CountingReads(BoundedMemoryTaskStore):
    reads = 0

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        self.reads += 1
        return await super().get(task_id, context)


async def test_the_final_state_guard_checks_the_memory_store_without_a_read() -> None:
    inner = _CountingReads()
    guarded = FinalStateTaskStore(inner)
    await guarded.save(task("t", WORKING), CONTEXT)
    await guarded.save(task("t", DONE), CONTEXT)
    with pytest.raises(ConcurrentTaskModificationError):
        await guarded.save(task("t", WORKING), CONTEXT)
    await guarded.save(task("t", DONE), CONTEXT)  # the same terminal state may be rewritten
    assert inner.reads == 0
    stored = await guarded.get("t", CONTEXT)
    assert stored is not None and stored.status.state == DONE


async def test_an_out_of_range_timestamp_is_saved_and_fails_listing_as_in_the_sdk_store() -> None:
    odd = task("odd", DONE)
    odd.status.timestamp.nanos = -1
    messages = []
    for store in (BoundedMemoryTaskStore(), InMemoryTaskStore()):
        await store.save(odd, CONTEXT)
        with pytest.raises(ValueError) as raised:
            await store.list(ListTasksRequest(), CONTEXT)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]

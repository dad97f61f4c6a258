"""The bounded in-memory task store (``a2a.task_store: {type: memory}``, the default).

:class:`BoundedMemoryTaskStore` answers as the SDK's ``InMemoryTaskStore`` does (owner
scoping, ``ListTasks`` filters, order and page tokens), with limits, so that a client
sending task after task cannot grow the process without end. One difference: ``list``
trims each task of its page as the SDK's handler then trims it (artifacts unless
``include_artifacts``, history to ``history_length``) while it parses it, so a page never
holds every task's whole history at once (``server/list_pages.py``).

- ``max_tasks`` and ``max_bytes`` (a task's size is its serialized protobuf size, history
  and artifacts included): after a save that passes either, the least recently written
  tasks that have **ended** (COMPLETED, CANCELED, FAILED, REJECTED) are evicted, oldest
  first, until both hold again; when no ended task is left, those waiting for input (or
  auth) go next, oldest first;
- ``ttl_seconds``: an ended or waiting task not written for that long is evicted (checked
  on every save and read, oldest first, so the cost is the number evicted).

A task still SUBMITTED or WORKING is **never** evicted: while more of them are running
than the limits allow, the store stays over its limits (the session mailbox bounds how
many turns run at once). Every eviction counts in
``maslab_a2a_task_store_evictions_total{agent, reason}`` (reason ``count``, ``bytes`` or
``ttl``) and logs at DEBUG.

What a client sees for an evicted task is what it sees for a task id never issued:
``GetTask``, ``CancelTask``, ``SubscribeToTask``, the push-config methods and a message
naming the task answer the A2A ``TaskNotFoundError`` (JSON-RPC -32001, HTTP+JSON 404,
gRPC NOT_FOUND), and ``ListTasks`` no longer lists it (docs/a2a.md).

**A task is kept serialized.** A save stores the task's protobuf bytes (which its size
needs anyway) and every read parses a new ``Task``: as with the SDK's copying store, a
caller owns what it passes in and what it gets back, and may change either without a
save. The SDK's store copies on the way in and again on the way out, and measures the
size by serializing a third time; here a write costs one serialization. The state, the
context id and the status timestamp are kept beside the bytes, so ``ListTasks`` parses
only the page it returns and the final-state guard
(:class:`~library_ioa.plugins.a2a.server.stores.final_state.FinalStateTaskStore`) learns the
stored state without reading the task (:meth:`BoundedMemoryTaskStore.stored_state`).

Tasks are kept per owner (the SDK's owner scoping); the bookkeeping here is keyed by owner
and task id. The clock is injectable (``clock``) so the TTL is testable without waiting.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    apply_history_length,
    decode_list_tasks_cursor,
    decode_page_token,
    encode_list_tasks_cursor,
)
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import Counter

from library_ioa.plugins.a2a.server.metrics import A2A_REGISTRY
from library_ioa.plugins.a2a.server.stores.final_state import INTERRUPTED_STATES, TERMINAL_STATES
from mas.infra.models import (
    DEFAULT_MEMORY_MAX_BYTES,
    DEFAULT_MEMORY_MAX_TASKS,
    DEFAULT_MEMORY_TTL_SECONDS,
)

logger = logging.getLogger(__name__)

TASK_STORE_EVICTIONS = Counter(
    "maslab_a2a_task_store_evictions",
    "Tasks evicted from the in-memory task store, by agent and reason (count, bytes, ttl).",
    ("agent", "reason"),
    registry=A2A_REGISTRY,
)

_Key = tuple[str, str]  # (owner, task id)


@dataclass(slots=True)
class _Entry:
    """One stored task: its bytes and what listing, bounds and the guard read of it."""

    task_id: str
    data: bytes
    state: TaskState
    context_id: str
    timestamp: tuple[int, int] | None  # the status timestamp (seconds, nanos), if it has one
    written: float

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def waiting(self) -> bool:
        return self.state in INTERRUPTED_STATES

    @property
    def timestamp_ns(self) -> int | None:
        """The status timestamp in nanoseconds (``ValueError`` when out of range, as the SDK)."""
        if self.timestamp is None:
            return None
        seconds, nanos = self.timestamp
        nanoseconds: int = Timestamp(seconds=seconds, nanos=nanos).ToNanoseconds()
        return nanoseconds

    def sort_key(self) -> tuple[bool, int, str]:
        """The SDK's ``ListTasks`` order, descending: (has timestamp, timestamp, id)."""
        stamp = self.timestamp_ns
        return (stamp is not None, stamp or 0, self.task_id)


class BoundedMemoryTaskStore(TaskStore):
    """An in-memory ``TaskStore`` bounded by task count, bytes and age (module docstring)."""

    def __init__(
        self,
        *,
        agent_id: str = "",
        max_tasks: int = DEFAULT_MEMORY_MAX_TASKS,
        max_bytes: int = DEFAULT_MEMORY_MAX_BYTES,
        ttl_seconds: float = DEFAULT_MEMORY_TTL_SECONDS,
        owner_resolver: OwnerResolver = resolve_user_scope,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_tasks < 1 or max_bytes < 1 or ttl_seconds <= 0:
            raise ValueError(
                f"max_tasks {max_tasks!r}, max_bytes {max_bytes!r}, ttl_seconds "
                f"{ttl_seconds!r}: each must be positive"
            )
        self.agent_id = agent_id
        self.max_tasks = max_tasks
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._resolve = owner_resolver
        self._clock = clock
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()  # least recently written first
        self._owners: dict[str, dict[str, _Entry]] = {}  # what ListTasks walks
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        owner = self._resolve(context)
        status = task.status
        stamp = None
        if status.HasField("timestamp"):
            stamp = (status.timestamp.seconds, status.timestamp.nanos)
        entry = _Entry(
            task.id, task.SerializeToString(), status.state, task.context_id, stamp, self._clock()
        )
        key = (owner, task.id)
        self._drop(key)
        self._entries[key] = entry
        self._owners.setdefault(owner, {})[task.id] = entry
        self.bytes += len(entry.data)
        self._expire()
        self._enforce(keep=key)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        self._expire()
        entry = self._entries.get((self._resolve(context), task_id))
        return None if entry is None else Task.FromString(entry.data)

    def stored_state(self, task_id: str, context: ServerCallContext) -> TaskState | None:
        """The state of the stored task (``None``: none stored), without reading it."""
        self._expire()
        entry = self._entries.get((self._resolve(context), task_id))
        return None if entry is None else entry.state

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The SDK's ``InMemoryTaskStore.list``: filters, order, page and page tokens."""
        self._expire()
        entries = list(self._owners.get(self._resolve(context), {}).values())
        if params.context_id:
            entries = [e for e in entries if e.context_id == params.context_id]
        if params.status:
            entries = [e for e in entries if e.state == params.status]
        if params.HasField("status_timestamp_after"):
            after_ns = params.status_timestamp_after.ToNanoseconds()
            entries = [e for e in entries if (ns := e.timestamp_ns) is not None and ns >= after_ns]
        entries.sort(key=_Entry.sort_key, reverse=True)
        total = len(entries)
        start = 0
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None:
                start = _legacy_start(entries, params.page_token)
            else:
                after = cursor.sort_key()
                start = next((i for i, e in enumerate(entries) if e.sort_key() < after), total)
        page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        end = start + page_size
        token = None
        if end < total:
            last = entries[end - 1]
            token = encode_list_tasks_cursor(
                ListTasksCursor(timestamp_ns=last.timestamp_ns, task_id=last.task_id)
            )
        response = ListTasksResponse(next_page_token=token, total_size=total, page_size=page_size)
        for entry in entries[start:end]:
            # Trimmed as the SDK's handler will trim it, one task at a time: the page never
            # holds every task's whole history at once (server/list_pages.py).
            task = Task.FromString(entry.data)
            if not params.include_artifacts:
                task.ClearField("artifacts")
            response.tasks.append(apply_history_length(task, params))
        return response

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        key = (self._resolve(context), task_id)
        if key not in self._entries:
            logger.warning(
                "Attempted to delete nonexistent task with id: %s for owner %s", task_id, key[0]
            )
        self._drop(key)

    def _drop(self, key: _Key) -> _Entry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.bytes -= len(entry.data)
        owner, task_id = key
        tasks = self._owners[owner]
        del tasks[task_id]
        if not tasks:
            del self._owners[owner]
        return entry

    def _over(self) -> str | None:
        if len(self._entries) > self.max_tasks:
            return "count"
        if self.bytes > self.max_bytes:
            return "bytes"
        return None

    def _expire(self) -> None:
        """Evict ended and waiting tasks older than the TTL (the oldest come first)."""
        cutoff = self._clock() - self.ttl_seconds
        expired = []
        for key, entry in self._entries.items():
            if entry.written > cutoff:
                break
            if entry.ended or entry.waiting:
                expired.append(key)
        for key in expired:
            self._evict(key, "ttl")

    def _enforce(self, *, keep: _Key) -> None:
        """While over a limit: evict ended tasks oldest first, then waiting ones."""
        while (reason := self._over()) is not None:
            key = self._oldest(keep, waiting=False) or self._oldest(keep, waiting=True)
            if key is None:
                logger.debug(
                    "agent %s: the task store holds %d tasks (%d bytes), over its limits, "
                    "none of them evictable",
                    self.agent_id,
                    len(self._entries),
                    self.bytes,
                )
                return
            self._evict(key, reason)

    def _oldest(self, keep: _Key, *, waiting: bool) -> _Key | None:
        for key, entry in self._entries.items():
            if key != keep and (entry.waiting if waiting else entry.ended):
                return key
        return None

    def _evict(self, key: _Key, reason: str) -> None:
        self._drop(key)
        TASK_STORE_EVICTIONS.labels(self.agent_id, reason).inc()
        logger.debug("agent %s: task %s evicted (%s)", self.agent_id, key[1], reason)


def _legacy_start(entries: list[_Entry], page_token: str) -> int:
    """The SDK's legacy page token: the base64 id of the page's first task."""
    first = decode_page_token(page_token)
    for index, entry in enumerate(entries):
        if entry.task_id == first:
            return index
    raise InvalidParamsError(f"Invalid page token: {page_token}")

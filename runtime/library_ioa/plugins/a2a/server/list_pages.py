"""``ListTasks`` pages that cannot exceed a stated size (``a2a.responses``).

The SDK pages ``ListTasks`` (50 tasks by default, at most 100) and drops artifacts unless
``includeArtifacts`` is set, but without ``historyLength`` it returns every task's whole
history, so a small request can draw an answer of a page's worth of whole histories (a
measured case: docs/performance.md, "Where the time goes"). Two rules here, on every
transport and every task store:

- ``historyLength`` absent: ``list_history_length`` (``a2a.responses.list_history_length``)
  is applied, as if the client had sent it; a client that wants more asks for it
  (``historyLength`` is honoured as given) or reads the task with ``GetTask``.
- A page holds at most ``max_bytes`` (``a2a.responses.max_bytes``) of tasks, counted as
  their serialized protobuf size after the trimming above. A page the store returns over
  that is asked for again with a ``pageSize`` of the tasks that fit, so its
  ``nextPageToken`` is the store's own and the next page starts after the last task
  returned. A page always holds at least one task, so a single task larger than
  ``max_bytes`` is returned alone (its history cut to ``historyLength``).

The store parses a page's tasks before the SDK trims them; the memory store trims each
task as it parses it (:mod:`.stores.memory`), so a ``ListTasks`` holds at most one whole
task beyond its page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a.types import ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.errors import InvalidParamsError

from mas.infra.models import DEFAULT_LIST_HISTORY_LENGTH, DEFAULT_MAX_RESPONSE_BYTES

__all__ = ["ListLimits", "bounded_list", "status_refusal"]

_STATES = TaskState.DESCRIPTOR.values_by_name
_NUMBERS = TaskState.DESCRIPTOR.values_by_number
ACCEPTED_STATES = ", ".join(name for name in _STATES if name != "TASK_STATE_UNSPECIFIED")


def status_refusal(value: object) -> str | None:
    """Why ``value`` is no ``ListTasks`` ``status`` filter (``None``: it is one).

    The SDK parses JSON-RPC params and REST queries with unknown values ignored, so an
    unknown state name became no filter and listed every task; a number naming no state
    (gRPC) listed none. Each transport refuses it as invalid params instead: JSON-RPC
    (``limits.RequestLimits``, on the fast path and the SDK's alike), HTTP+JSON
    (``corrections``) and every transport's numbers here.
    """
    if isinstance(value, bool):
        pass
    elif (
        isinstance(value, str)
        and (value in _STATES or (value.isdigit() and int(value) in _NUMBERS))
    ) or (isinstance(value, int) and value in _NUMBERS):
        return None
    shown = repr(value)[:40]
    return f"status {shown} is not a task state; accepted: {ACCEPTED_STATES}"


@dataclass(frozen=True, slots=True)
class ListLimits:
    """``a2a.responses``' bounds on a ``ListTasks`` page."""

    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    history_length: int = DEFAULT_LIST_HISTORY_LENGTH


def fitting(page: ListTasksResponse, max_bytes: int) -> int:
    """How many of the page's first tasks fit in ``max_bytes`` (at least one)."""
    total = 0
    for count, task in enumerate(page.tasks):
        total += task.ByteSize()
        if total > max_bytes:
            return max(count, 1)
    return len(page.tasks)


async def bounded_list(
    list_page: Callable[[ListTasksRequest], Awaitable[ListTasksResponse]],
    params: ListTasksRequest,
    limits: ListLimits,
) -> ListTasksResponse:
    """A page of ``list_page`` (the SDK's ``on_list_tasks``) within ``limits``."""
    if params.status and (refusal := status_refusal(int(params.status))) is not None:
        raise InvalidParamsError(message=refusal)
    if not params.HasField("history_length"):
        bounded = ListTasksRequest()
        bounded.CopyFrom(params)
        bounded.history_length = limits.history_length
        params = bounded
    page = await list_page(params)
    count = fitting(page, limits.max_bytes)
    if count == len(page.tasks):
        return page
    smaller = ListTasksRequest()
    smaller.CopyFrom(params)
    smaller.page_size = count
    page = await list_page(smaller)
    if len(page.tasks) > count:  # a store that ignores page_size: cut it here
        del page.tasks[count:]
    return page

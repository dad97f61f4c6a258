"""One turn with an agent, and following one task, as the runtime's turn events.

:func:`send_turn` sends one user message and yields what a person sees of the agent's turn,
in the runtime's own types (:mod:`mas.runtime.turns`), so the console transcript and the TUI
render a remote agent as they render a hosted one:

- :class:`~mas.runtime.turns.TextDelta`: text as it arrives. Streamed text is the text of a
  streamed artifact: our own ``response`` artifact from its first chunk, any other artifact
  from its first ``append`` on (its first chunk shows with the second: on the wire a first
  chunk looks like a whole artifact, whose text the answer reader passes on as an artifact
  instead). A blocking send streams nothing. When the turn ends, whatever of the reply was
  not streamed yet comes as one last delta.
- :class:`~mas.runtime.turns.Delegated`: a delegation or a tool call the agent reported
  (our agents put ``mas.delegated`` in a ``working`` status update's metadata).
- :class:`~mas.runtime.turns.ArtifactEmitted`: the artifacts passed on to the user, then
  :class:`~mas.runtime.turns.TurnEnded` with the reply (``completed``, ``input_required``
  with the question, ``failed`` or ``canceled`` with the message).

The reply and the artifacts are read by :mod:`library_ioa.plugins.a2a.answers`, the one
reader of a peer's answer, from the task as the events built it (or as ``GetTask`` reads
it when a stream ends before the task does). A task left working by a blocking send, or by
a stream that broke off, is followed: subscribed to when the agent streams, else read with
``GetTask`` every :data:`POLL_FIRST` seconds, doubling up to :data:`POLL_MAX`.

:func:`follow_task` yields the same events for a task that already exists
(``SubscribeToTask``; an ended task is read and shown as it ended).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from a2a.types import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.struct_pb2 import Struct

from library_ioa.plugins.a2a.answers import (
    FINAL_STATUS,
    RESPONSE_ARTIFACT,
    check_task,
    reply_of_message,
    reply_of_task,
)
from library_ioa.plugins.a2a.parts import struct_to_dict, text_of
from mas.ctl.client.connection import Connection
from mas.ctl.client.errors import ClientError
from mas.runtime.boundary.agentcomm import CommReply
from mas.runtime.turns import Delegated, TextDelta, TurnEnded, TurnEvent

POLL_FIRST = 0.1  # seconds before the first GetTask of a task left working
POLL_MAX = 2.0  # the longest wait between two GetTask of a followed task
DELEGATED = "mas.delegated"  # our agents' status-update metadata for a delegation or tool call
OPEN_STATES = (
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_WORKING,
)


@dataclass
class TurnIds:
    """What the caller may need while the turn runs (to cancel it on Ctrl-C)."""

    context_id: str
    task_id: str | None = None
    on_task: Callable[[str], None] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # the task's, as last seen

    def seen(self, task_id: str) -> None:
        if task_id and task_id != self.task_id:
            self.task_id = task_id
            if self.on_task is not None:
                self.on_task(task_id)


@dataclass
class TaskFold:
    """The task as its events build it, which of its artifacts stream text, and how much of
    each a person has seen.

    What is shown of a streamed artifact is always its text as the fold holds it, less what
    was shown before: a task read whole (``GetTask``, or the snapshot a subscription starts
    with) catches the display up with what it holds. A subscription may also re-send chunks
    its snapshot already holds (the server read the task before it tapped the events): the
    appends after a snapshot that repeat the snapshot's last parts, in order, are taken as
    those and not added again.
    """

    task: Task | None = None
    streams: set[str] = field(default_factory=set)  # artifact ids sent in chunks
    streamed: list[str] = field(default_factory=list)  # the text shown so far, in order
    _shown: dict[str, str] = field(default_factory=dict)  # per streamed artifact
    _replay: dict[str, tuple[list[Part], int | None]] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        return self.task is not None and self.task.status.state in FINAL_STATUS

    def fold(self, response: StreamResponse, ids: TurnIds) -> list[TurnEvent]:
        """One event of the task's stream; the progress it shows."""
        kind = response.WhichOneof("payload")
        if kind == "task":
            ids.seen(response.task.id)
            return self.snapshot(response.task)
        if kind == "status_update":
            update = response.status_update
            ids.seen(update.task_id)
            task = self._current(update.task_id, update.context_id)
            task.status.CopyFrom(update.status)
            if not update.HasField("metadata"):
                return []
            task.metadata.update(update.metadata)  # as the agent's task store merges it
            return _reported(update.metadata)
        if kind == "artifact_update":
            update = response.artifact_update
            ids.seen(update.task_id)
            task = self._current(update.task_id, update.context_id)
            self._artifact(task, update.artifact, append=update.append)
            return self._catch_up()
        return []

    def snapshot(self, task: Task) -> list[TurnEvent]:
        """The task read whole: it replaces the fold's; the text it adds is shown."""
        if self.task is not None:
            self._replay = {a.artifact_id: (list(a.parts), None) for a in task.artifacts}
        self.task = Task()
        self.task.CopyFrom(task)
        for artifact in self.task.artifacts:
            if artifact.name == RESPONSE_ARTIFACT:
                self.streams.add(artifact.artifact_id)
        return self._catch_up()

    def _current(self, task_id: str, context_id: str) -> Task:
        if self.task is None:
            self.task = Task(id=task_id, context_id=context_id)
        return self.task

    def _artifact(self, task: Task, artifact: Artifact, *, append: bool) -> None:
        artifact_id = artifact.artifact_id
        known = next((a for a in task.artifacts if a.artifact_id == artifact_id), None)
        if append or artifact.name == RESPONSE_ARTIFACT:
            self.streams.add(artifact_id)
        if known is not None and append:
            if not self._replayed(artifact_id, list(artifact.parts)):
                known.parts.extend(artifact.parts)
        elif known is not None:
            known.CopyFrom(artifact)
            self._shown[artifact_id] = text_of(artifact.parts)  # replaced: nothing to add
        else:
            task.artifacts.append(artifact)

    def _replayed(self, artifact_id: str, chunk: list[Part]) -> bool:
        """Whether ``chunk`` re-sends parts the snapshot holds (see the class docstring)."""
        window = self._replay.get(artifact_id)
        if window is None:
            return False
        parts, at = window
        size = len(chunk)
        if at is None:  # the first append after the snapshot: from its end backwards
            starts = [k for k in range(len(parts) - size, -1, -1) if parts[k : k + size] == chunk]
            at = starts[0] if starts else None
        elif parts[at : at + size] != chunk:
            at = None
        if at is None:
            del self._replay[artifact_id]
            return False
        if at + size >= len(parts):
            del self._replay[artifact_id]
        else:
            self._replay[artifact_id] = (parts, at + size)
        return True

    def _catch_up(self) -> list[TurnEvent]:
        """The text the streamed artifacts hold beyond what was shown."""
        if self.task is None:
            return []
        events: list[TurnEvent] = []
        for artifact in self.task.artifacts:
            artifact_id = artifact.artifact_id
            if artifact_id not in self.streams:
                continue
            text, shown = text_of(artifact.parts), self._shown.get(artifact_id, "")
            if len(text) > len(shown) and text.startswith(shown):
                events.append(TextDelta(text[len(shown) :]))
                self.streamed.append(text[len(shown) :])
            self._shown[artifact_id] = text
        return events


def _reported(metadata: Struct) -> list[TurnEvent]:
    """The delegation or tool call a status update's metadata reports, if any."""
    values = struct_to_dict(metadata)
    found = values.get(DELEGATED)
    if not isinstance(found, dict):
        return []
    kind: Literal["delegate", "tool"] = "tool" if found.get("kind") == "tool" else "delegate"
    return [
        Delegated(
            target=str(found.get("target", "?")),
            call_id=str(found.get("call_id", "")),
            ok=bool(found.get("ok", True)),
            detail=str(found.get("detail", "")),
            kind=kind,
        )
    ]


def _ending(reply: CommReply, streamed: str) -> list[TurnEvent]:
    """The last events of a turn whose reply is ``reply`` (``streamed``: text shown already)."""
    events: list[TurnEvent] = []
    if reply.status in ("completed", "input_required") and reply.text.startswith(streamed):
        rest = reply.text[len(streamed) :]
        if rest:
            events.append(TextDelta(rest))
    events.extend(reply.artifacts)
    if reply.status in ("completed", "input_required"):
        events.append(TurnEnded(reply.status, text=reply.text))
    else:
        events.append(TurnEnded(reply.status, message=reply.text))
    return events


def user_message(text: str, context_id: str, task_id: str | None = None) -> Message:
    """The A2A message of one user turn."""
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        parts=[Part(text=text)],
    )
    if task_id:
        message.task_id = task_id
    return message


async def waiting_task(conn: Connection, context_id: str) -> str | None:
    """The task of ``context_id`` that waits for the user's input, if the agent lists one
    (an agent that cannot list tasks gets the message on the context alone)."""
    request = ListTasksRequest(
        context_id=context_id, status=TaskState.TASK_STATE_INPUT_REQUIRED, page_size=10
    )
    try:
        listed = await conn.client.list_tasks(request, context=conn.context())
    except Exception as exc:
        error = conn.failure(exc, "ListTasks")
        if type(error) is not ClientError:  # unreachable, refused: say so now
            raise error from None
        return None
    waiting = [t for t in listed.tasks if t.status.state == TaskState.TASK_STATE_INPUT_REQUIRED]
    return waiting[0].id if waiting else None


async def open_tasks(conn: Connection, context_id: str) -> list[str]:
    """The ids of the tasks of ``context_id`` that have not ended (best effort)."""
    found: list[str] = []
    for state in (*OPEN_STATES, TaskState.TASK_STATE_INPUT_REQUIRED):
        request = ListTasksRequest(context_id=context_id, status=state, page_size=50)
        try:
            listed = await conn.client.list_tasks(request, context=conn.context())
        except Exception:
            return found
        found.extend(t.id for t in listed.tasks if t.id not in found)
    return found


async def send_turn(
    conn: Connection, text: str, ids: TurnIds, task_id: str | None = None
) -> AsyncIterator[TurnEvent]:
    """One user turn (``task_id``: the task that waits for this answer); see the module doc."""
    request = SendMessageRequest(message=user_message(text, ids.context_id, task_id))
    fold = TaskFold()
    try:
        async for response in conn.client.send_message(request, context=conn.context()):
            if response.HasField("message"):
                where = f"{conn.url} answered SendMessage"
                for event in _ending(reply_of_message(response.message, where), ""):
                    yield event
                return
            for event in fold.fold(response, ids):
                yield event
            if fold.ended:
                break
        async for event in _finish(conn, fold, ids):
            yield event
    except (ClientError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise conn.failure(exc, "SendMessage", task_id) from None


async def follow_task(
    conn: Connection, task_id: str, *, wait: bool, ids: TurnIds | None = None
) -> AsyncIterator[TurnEvent]:
    """The events of an existing task: its reply when it has ended; else, with ``wait``,
    what it streams until it ends (nothing without ``wait``). ``ids.metadata`` ends as the
    task's metadata as last read."""
    ids = ids if ids is not None else TurnIds(context_id="", task_id=task_id)
    fold = TaskFold()
    try:
        for event in fold.snapshot(await _get(conn, task_id)):
            yield event
        ids.metadata = struct_to_dict(fold.task.metadata) if fold.task is not None else {}
        if not fold.ended and not wait:
            return
        async for event in _finish(conn, fold, ids):
            yield event
    except (ClientError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise conn.failure(exc, "SubscribeToTask", task_id) from None


async def _get(conn: Connection, task_id: str) -> Task:
    task = await conn.client.get_task(GetTaskRequest(id=task_id), context=conn.context())
    return check_task(task, f"{conn.url} answered GetTask")


async def _finish(conn: Connection, fold: TaskFold, ids: TurnIds) -> AsyncIterator[TurnEvent]:
    """Follow the task until it ends; then its reply."""
    if fold.task is None:
        raise ClientError(f"{conn.url} answered SendMessage with neither a task nor a message")
    task_id = fold.task.id
    if not fold.ended and conn.streaming:
        try:
            request = SubscribeToTaskRequest(id=task_id)
            async for response in conn.client.subscribe(request, context=conn.context()):
                for event in fold.fold(response, ids):
                    yield event
                if fold.ended:
                    break
        except UnsupportedOperationError:  # it ended before the subscription
            pass
    if not fold.ended:
        for event in fold.snapshot(await _get(conn, task_id)):
            yield event
    delay = POLL_FIRST
    while not fold.ended:
        await asyncio.sleep(delay)
        delay = min(2 * delay, POLL_MAX)
        for event in fold.snapshot(await _get(conn, task_id)):
            yield event
    ids.metadata = struct_to_dict(fold.task.metadata)
    reply = reply_of_task(fold.task, f"{conn.url} answered")
    for event in _ending(reply, "".join(fold.streamed)):
        yield event


async def cancel(conn: Connection, task_id: str) -> Task:
    """``CancelTask``; the task as the agent answered."""
    try:
        return await conn.client.cancel_task(CancelTaskRequest(id=task_id), context=conn.context())
    except Exception as exc:
        raise conn.failure(exc, "CancelTask", task_id) from None


async def cancel_turn(conn: Connection, ids: TurnIds) -> list[tuple[str, str]]:
    """Cancel the task of an interrupted turn (found by its context when the send has not
    named it yet); per task, its state after the call (``canceled``) or why it failed."""
    found = [ids.task_id] if ids.task_id else await open_tasks(conn, ids.context_id)
    outcomes = []
    for task_id in found:
        try:
            task = await cancel(conn, task_id)
        except ClientError as exc:
            outcomes.append((task_id, f"CancelTask failed: {exc}"))
            continue
        state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
        outcomes.append((task_id, state.replace("_", "-")))
    return outcomes

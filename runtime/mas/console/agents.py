"""The console's calls to an agent, on :mod:`mas.ctl.client` (the official a2a-sdk client).

Each call opens a connection to the agent's url (its card first), makes one call, and closes
it; every failure is a :class:`~mas.ctl.client.errors.ClientError` whose one line the page
shows. Answers are read by :mod:`library_ioa.plugins.a2a.answers` (through
:mod:`mas.ctl.client.exchange`), never here.

:func:`turn` is one chat turn as JSON events, one per line of the chat stream:

- ``{"kind": "context", "context_id"}`` first; ``{"kind": "task", "task_id"}`` when known;
- ``{"kind": "text", "text"}`` as the agent streams;
- ``{"kind": "delegated", "target", "ok", "detail", "tool"}``: a delegation or tool call;
- ``{"kind": "artifact", "name", "type", ...}``: text (``text``, cut at
  :data:`ARTIFACT_TEXT_LIMIT`), data (``data``), url (``url``), file (``size``,
  ``media_type``, and with the task known ``task_id`` and ``index``: its place among the
  artifacts of the task's answer, which :func:`file_of` finds again for a download);
- ``{"kind": "ended", "status", "text"}`` last, or ``{"kind": "error", "message"}``.

In a cluster the console calls agents as its own ServiceAccount: :class:`AgentCalls` given a
:class:`~mas.runtime.identity.token_file.TokenFile` (the console's projected token for the
agents' audience, re-read when the kubelet rotates it) sends its current token in the header
:data:`~mas.infra.identity.IDENTITY_HEADER` (gRPC: metadata) on every call: the card, sends
and streams, ``ListTasks``, ``GetTask``, ``CancelTask``. Without one (``mas-ctl console -f``
on a laptop) it sends only the credentials it was given.

A turn is canceled by :meth:`AgentCalls.cancel` (the page's Cancel button: ``CancelTask``,
after which the agent ends the turn's stream ``canceled``). A turn whose page goes away
mid-stream is canceled too, on a connection of its own, in a task :meth:`AgentCalls.aclose`
waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from a2a.types import AgentCard, GetTaskRequest, ListTasksRequest, Task
from google.protobuf.json_format import MessageToDict

from library_ioa.plugins.a2a.answers import reply_of_task
from library_ioa.plugins.a2a.parts import text_of
from mas.ctl.client.connection import Connection, connect
from mas.ctl.client.credentials import Credentials, resolve_credentials
from mas.ctl.client.errors import AuthRefused, ClientError
from mas.ctl.client.exchange import TurnIds, cancel_turn, send_turn, waiting_task
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.turns import ArtifactEmitted, Delegated, TextDelta, TurnEnded

if TYPE_CHECKING:
    from mas.runtime.identity.token_file import TokenFile

ARTIFACT_TEXT_LIMIT = 64 * 1024  # characters of a text artifact a page shows
DATA_LIMIT = 64 * 1024  # characters of a data artifact's JSON a page shows
TASKS_SHOWN = 20
CANCEL_SECONDS = 5.0  # for the CancelTask of a turn the page left
IDENTITY_REFUSED = (
    "the console called as its own ServiceAccount; an agent admits it when the chart's "
    "console.admittedByAgents is true (the default) or the agent's a2a.allow lists it"
)


@dataclass
class CardRead:
    card: AgentCard
    card_json: dict[str, Any]
    interface: str  # the binding the console uses


def _args(url: str) -> argparse.Namespace:
    return argparse.Namespace(
        target=url, namespace=None, kube_context=None, kubeconfig=None, transport=None
    )


class AgentCalls:
    """Calls to agents with the console's own credentials (none, or ``$MAS_CTL_TOKEN``...)
    and, given ``identity``, its workload token (see the module docstring)."""

    def __init__(
        self, credentials: Credentials | None = None, identity: TokenFile | None = None
    ) -> None:
        self.credentials = credentials or resolve_credentials([], None, None)
        self.identity = identity
        self._leftovers: set[asyncio.Task[object]] = set()

    def _credentials(self) -> Credentials:
        """The credentials of one call: the token as the kubelet last wrote it, if any."""
        token = self.identity.current() if self.identity is not None else None
        if not token:
            return self.credentials
        return replace(
            self.credentials, headers={**self.credentials.headers, IDENTITY_HEADER: token}
        )

    async def aclose(self) -> None:
        """Wait (at most :data:`CANCEL_SECONDS`) for the cancels of turns a page left."""
        if self._leftovers:
            await asyncio.wait(self._leftovers, timeout=CANCEL_SECONDS)
        for task in self._leftovers:
            task.cancel()

    @contextlib.asynccontextmanager
    async def _connect(self, url: str) -> AsyncIterator[Connection]:
        credentials = self._credentials()
        try:
            async with connect(_args(url), credentials) as conn:
                yield conn
        except AuthRefused as exc:
            if IDENTITY_HEADER not in credentials.headers:
                raise
            # the CLI's hint (--token-file ...) is not what a console's operator can change
            refused = str(exc).partition("; ")[0]
            raise AuthRefused(f"{refused}; {IDENTITY_REFUSED}") from None
        except ClientError:
            raise
        except Exception as exc:  # anything else the connection raised, as one line
            from mas.ctl.client.connection import failure

            raise failure(exc, url, "the connection") from None

    async def card(self, url: str) -> CardRead:
        async with self._connect(url) as conn:
            return CardRead(conn.card, conn.card_json, conn.binding)

    async def tasks(self, url: str, context_id: str | None = None) -> list[Task]:
        """The agent's latest tasks (one page of ``ListTasks``)."""
        async with self._connect(url) as conn:
            request = ListTasksRequest(page_size=TASKS_SHOWN)
            if context_id:
                request.context_id = context_id
            try:
                page = await conn.client.list_tasks(request, context=conn.context())
            except Exception as exc:
                raise conn.failure(exc, "ListTasks") from None
            return list(page.tasks)

    async def task(self, url: str, task_id: str) -> Task:
        async with self._connect(url) as conn:
            try:
                request = GetTaskRequest(id=task_id)
                return await conn.client.get_task(request, context=conn.context())
            except Exception as exc:
                raise conn.failure(exc, "GetTask", task_id) from None

    async def turn(self, url: str, text: str, context_id: str) -> AsyncIterator[dict[str, Any]]:
        """One chat turn as events (see the module docstring); never raises a ClientError."""
        yield {"kind": "context", "context_id": context_id}
        try:
            async with self._connect(url) as conn:
                waiting = await waiting_task(conn, context_id)
                ids = TurnIds(context_id=context_id)
                told: list[str] = []
                artifacts = 0  # the answer's artifacts come in its order (file_of)
                try:
                    async for event in send_turn(conn, text, ids, waiting):
                        if ids.task_id and ids.task_id not in told:
                            told.append(ids.task_id)
                            yield {"kind": "task", "task_id": ids.task_id}
                        record = event_record(event)
                        if record is None:
                            continue
                        if record["kind"] == "artifact":
                            if record["type"] == "file" and ids.task_id:
                                record.update(task_id=ids.task_id, index=artifacts)
                            artifacts += 1
                        yield record
                except (asyncio.CancelledError, GeneratorExit):
                    # the page went away: cancel the task it started, on a connection of its
                    # own (this one closes with the stream)
                    self._leave(self._cancel_quietly(url, ids))
                    raise
        except ClientError as exc:
            yield {"kind": "error", "message": str(exc)}

    async def cancel(self, url: str, context_id: str, task_id: str | None) -> list[dict[str, str]]:
        """``CancelTask`` of a turn's task (found by its context when ``task_id`` is not
        known yet); per task, its state after the call or why the call failed."""
        async with self._connect(url) as conn:
            outcomes = await cancel_turn(conn, TurnIds(context_id=context_id, task_id=task_id))
        return [{"task_id": task, "state": state} for task, state in outcomes]

    def _leave(self, call: Any) -> None:
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(call)
        self._leftovers.add(task)
        task.add_done_callback(self._leftovers.discard)

    async def _cancel_quietly(self, url: str, ids: TurnIds) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.cancel(url, ids.context_id, ids.task_id), CANCEL_SECONDS)


def event_record(event: object) -> dict[str, Any] | None:
    """One turn event as the chat stream's JSON."""
    if isinstance(event, TextDelta):
        return {"kind": "text", "text": event.text}
    if isinstance(event, Delegated):
        return {
            "kind": "delegated",
            "target": event.target,
            "ok": event.ok,
            "detail": event.detail,
            "tool": event.kind == "tool",
        }
    if isinstance(event, ArtifactEmitted):
        return artifact_json(event)
    if isinstance(event, TurnEnded):
        return {"kind": "ended", "status": event.status, "text": event.text or event.message}
    return None


def artifact_json(artifact: ArtifactEmitted) -> dict[str, Any]:
    """An artifact for a page: large text and data cut (the size said), file bytes not sent."""
    record: dict[str, Any] = {"kind": "artifact", "name": artifact.name, "type": artifact.kind}
    if artifact.media_type:
        record["media_type"] = artifact.media_type
    if artifact.kind == "text":
        body = artifact.text or ""
        record["text"] = body[:ARTIFACT_TEXT_LIMIT]
        record["size"] = len(body)
        record["cut"] = len(body) > ARTIFACT_TEXT_LIMIT
    elif artifact.kind == "data":
        body = json.dumps(dict(artifact.data or {}), indent=2, ensure_ascii=False, default=str)
        record["text"] = body[:DATA_LIMIT]
        record["size"] = len(body)
        record["cut"] = len(body) > DATA_LIMIT
    elif artifact.kind == "url":
        record["url"] = artifact.url or ""
    else:
        record["size"] = len(artifact.content or b"")
    return record


def file_of(task: Task, index: int, where: str) -> ArtifactEmitted | None:
    """The ``index``-th artifact of the task's answer when it is a file with its bytes."""
    try:
        artifacts = reply_of_task(task, where).artifacts
    except Exception:  # a task the answer reader refuses has no file to give
        return None
    if not 0 <= index < len(artifacts):
        return None
    found = artifacts[index]
    return found if found.kind == "file" and found.content is not None else None


def task_record(task: Task, where: str) -> dict[str, Any]:
    """A task for the task page: state, time, history (role and text), reply, artifacts."""
    status = MessageToDict(task.status)
    history = [
        {"role": "user" if m.role == 1 else "agent", "text": text_of(m.parts)} for m in task.history
    ]
    try:
        reply = reply_of_task(task, where)
        artifacts = [dict(artifact_json(a), index=i) for i, a in enumerate(reply.artifacts)]
        said = reply.text
    except Exception as exc:  # a task the answer reader refuses: say why, show the rest
        artifacts, said = [], f"(the task cannot be read as an answer: {exc})"
    return {
        "id": task.id,
        "context_id": task.context_id,
        "state": str(status.get("state", "")).removeprefix("TASK_STATE_").lower(),
        "updated": str(status.get("timestamp", "")),
        "history": history,
        "reply": said,
        "artifacts": artifacts,
        "trace_id": _trace_id(task),
    }


def _trace_id(task: Task) -> str:
    """The trace id the task's metadata carries (``trace_id`` or a W3C ``traceparent``)."""
    meta = MessageToDict(task.metadata) if task.HasField("metadata") else {}
    for key in ("trace_id", "traceId", "mas.trace_id"):
        if isinstance(meta.get(key), str):
            return str(meta[key])
    parent = meta.get("traceparent")
    if isinstance(parent, str) and parent.count("-") == 3:
        return parent.split("-")[1]
    return ""

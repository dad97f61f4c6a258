"""The checks run on one advertised interface, each through the official a2a-sdk client.

Order matters: ``send-message`` makes the task that ``get-task``, ``cancel-task`` and
``push-config`` use. Every call has its own deadline; a check never raises, it records
``fail`` with what went wrong (the SDK's error type and message).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import httpx
from a2a.client import (
    A2AClientTimeoutError,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.types.a2a_pb2 import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

from mas.infra.conformance import CheckStatus, ConformanceCheck
from mas.infra.identity import IDENTITY_HEADER

logger = logging.getLogger(__name__)

T = TypeVar("T")

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}
UNSUPPORTED_VERSION = "99.0"
PROBE_TEXT = "mas-ctl conformance probe"


def state_name(state: int) -> str:
    """``TASK_STATE_COMPLETED`` -> ``completed``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower()


def grpc_target(url: str) -> str:
    """A gRPC interface url (``host:port``, maybe with a scheme) as a channel target."""
    for scheme in ("grpc://", "grpcs://", "http://", "https://"):
        if url.startswith(scheme):
            return url[len(scheme) :].rstrip("/")
    return url


def describe(exc: BaseException) -> str:
    """An error as a person reads it: its type and message."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError | A2AClientTimeoutError):
        return "no answer before the deadline (--timeout)"
    text = str(getattr(exc, "message", "") or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


@dataclass
class InterfaceProbe:
    """The checks of one interface of ``card``."""

    card: AgentCard
    interface: AgentInterface
    http: httpx.AsyncClient
    timeout: float
    push_urls: tuple[str, ...]  # offered in turn until the server accepts one
    checks: list[ConformanceCheck] = field(default_factory=list)
    task: Task | None = None
    identity: str | None = None  # the probe's own A2A token, sent on every call when set

    @property
    def binding(self) -> str:
        """The interface's protocol binding, as the card names it."""
        return self.interface.protocol_binding

    def record(self, check: str, status: CheckStatus, detail: str) -> None:
        """Add one check result."""
        logger.info("%s %s: %s %s", self.binding, check, status, detail)
        self.checks.append(
            ConformanceCheck(interface=self.binding, check=check, status=status, detail=detail)
        )

    def client(self, *, streaming: bool) -> Client:
        """An SDK client bound to this interface only."""
        card = AgentCard()
        card.CopyFrom(self.card)
        del card.supported_interfaces[:]
        card.supported_interfaces.append(self.interface)
        config = ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            grpc_channel_factory=lambda url: grpc.aio.insecure_channel(grpc_target(url)),
            supported_protocol_bindings=[self.binding],
        )
        return ClientFactory(config).create(card)

    def context(self, **params: str) -> ClientCallContext:
        """A call context with our deadline, our identity and any service parameters."""
        if self.identity:
            params = {IDENTITY_HEADER: self.identity, **params}
        return ClientCallContext(timeout=self.timeout, service_parameters=params or None)

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """Await ``make()`` under the deadline (a little over the transport's own)."""
        return await asyncio.wait_for(make(), timeout=self.timeout + 1)

    async def run(self) -> list[ConformanceCheck]:
        """Every check, in order; returns the results."""
        async with self.client(streaming=False) as client:
            await self.check_send(client)
            await self.check_streaming()
            await self.check_get(client)
            await self.check_cancel(client)
            await self.check_unknown_task(client)
            await self.check_push(client)
            await self.check_version(client)
        return self.checks

    def request(self) -> SendMessageRequest:
        """A fresh probe message."""
        message = Message(
            role=Role.ROLE_USER,
            message_id=f"conformance-{uuid.uuid4()}",
            parts=[Part(text=PROBE_TEXT)],
        )
        return SendMessageRequest(message=message)

    async def check_send(self, client: Client) -> None:
        """SendMessage answers with a Task or a Message."""

        async def first() -> Any:
            async for event in client.send_message(self.request(), context=self.context()):
                return event
            return None

        try:
            event = await self.call(first)
        except Exception as exc:
            self.record("send-message", "fail", describe(exc))
            return
        if event is not None and event.HasField("task"):
            self.task = event.task
            state = state_name(event.task.status.state)
            self.record("send-message", "pass", f"task {event.task.id} {state}")
        elif event is not None and event.HasField("message"):
            made = await self.task_for_later_checks(client)
            after = f"; a returnImmediately send made task {made.id}" if made else ""
            self.record("send-message", "pass", f"answered with a Message{after}")
        else:
            self.record("send-message", "fail", "the answer holds neither a Task nor a Message")

    async def task_for_later_checks(self, client: Client) -> Task | None:
        """A task for GetTask, CancelTask and push config when the agent answers with Messages.

        A send with ``returnImmediately`` asks the server for the task at once; an agent that
        still answers with a Message leaves those checks skipped.
        """
        request = self.request()
        request.configuration.return_immediately = True

        async def first() -> Any:
            async for event in client.send_message(request, context=self.context()):
                return event
            return None

        try:
            event = await self.call(first)
        except Exception as exc:
            logger.info("%s: a returnImmediately send failed: %s", self.binding, describe(exc))
            return None
        if event is not None and event.HasField("task"):
            self.task = event.task
            return self.task
        return None

    async def check_streaming(self) -> None:
        """SendStreamingMessage delivers events and ends, when the card declares streaming."""
        if not self.card.capabilities.streaming:
            self.record("streaming", "skip", "the card does not declare streaming")
            return

        async def drain() -> tuple[int, str]:
            count, last = 0, "no event"
            async with self.client(streaming=True) as client:
                async for event in client.send_message(self.request(), context=self.context()):
                    count += 1
                    if event.HasField("message"):
                        last = "a Message"
                    elif event.HasField("task"):
                        last = f"task {state_name(event.task.status.state)}"
                    elif event.HasField("status_update"):
                        last = f"status {state_name(event.status_update.status.state)}"
                    elif event.HasField("artifact_update"):
                        last = "an artifact update"
            return count, last

        try:
            count, last = await self.call(drain)
        except Exception as exc:
            self.record("streaming", "fail", describe(exc))
            return
        if count == 0:
            self.record("streaming", "fail", "the stream ended without an event")
        else:
            self.record("streaming", "pass", f"{count} events, the last {last}")

    async def check_get(self, client: Client) -> None:
        """GetTask returns the task SendMessage made."""
        if self.task is None:
            self.record("get-task", "skip", "SendMessage made no task to read back")
            return
        task_id = self.task.id
        try:
            got = await self.call(
                lambda: client.get_task(GetTaskRequest(id=task_id), context=self.context())
            )
        except Exception as exc:
            self.record("get-task", "fail", describe(exc))
            return
        if got.id != task_id:
            self.record("get-task", "fail", f"asked for task {task_id}, got {got.id or '(no id)'}")
        else:
            self.record("get-task", "pass", f"task {task_id} {state_name(got.status.state)}")

    async def check_cancel(self, client: Client) -> None:
        """CancelTask cancels a live task, or refuses a finished one with TaskNotCancelableError."""
        if self.task is None:
            self.record("cancel-task", "skip", "SendMessage made no task to cancel")
            return
        task_id = self.task.id
        try:
            got = await self.call(
                lambda: client.cancel_task(CancelTaskRequest(id=task_id), context=self.context())
            )
        except TaskNotCancelableError:
            self.record(
                "cancel-task", "pass", "the finished task is refused: TaskNotCancelableError"
            )
            return
        except Exception as exc:
            self.record("cancel-task", "fail", describe(exc))
            return
        state = got.status.state
        if state == TaskState.TASK_STATE_CANCELED:
            self.record("cancel-task", "pass", f"task {task_id} canceled")
        else:
            self.record(
                "cancel-task", "fail", f"task {task_id} is {state_name(state)}, not canceled"
            )

    async def check_unknown_task(self, client: Client) -> None:
        """GetTask of an id nobody made answers TaskNotFoundError."""
        missing = f"conformance-missing-{uuid.uuid4()}"
        try:
            got = await self.call(
                lambda: client.get_task(GetTaskRequest(id=missing), context=self.context())
            )
        except TaskNotFoundError:
            self.record("unknown-task-error", "pass", "TaskNotFoundError")
            return
        except Exception as exc:
            self.record(
                "unknown-task-error", "fail", f"expected TaskNotFoundError, got {describe(exc)}"
            )
            return
        self.record(
            "unknown-task-error",
            "fail",
            f"expected TaskNotFoundError, got task {got.id or '(no id)'}",
        )

    async def check_push(self, client: Client) -> None:
        """A push-notification config can be set, read back and deleted, when declared."""
        if not self.card.capabilities.push_notifications:
            self.record("push-config", "skip", "the card does not declare pushNotifications")
            return
        if self.task is None:
            self.record("push-config", "skip", "SendMessage made no task to configure")
            return
        refused: list[str] = []
        for url in self.push_urls:
            try:
                made = await self.call(functools.partial(self.create_push, client, url))
            except UnsupportedOperationError as exc:  # no standalone create without auth
                try:
                    made = await self.call(functools.partial(self.send_with_push, client, url))
                except Exception as inline:
                    refused.append(f"{url}: {describe(exc)}; inline: {describe(inline)}")
                    continue
                refused.append(f"standalone create: {describe(exc)}; set inline with SendMessage")
            except Exception as exc:  # a server screening push URLs refuses some
                refused.append(f"{url}: {describe(exc)}")
                continue
            await self.read_back_and_delete(client, made, url, refused)
            return
        self.record("push-config", "fail", "create: " + "; ".join(refused))

    async def create_push(self, client: Client, url: str) -> TaskPushNotificationConfig:
        """Set a push config with ``url`` on the probe's task."""
        assert self.task is not None
        wanted = TaskPushNotificationConfig(
            task_id=self.task.id, url=url, token=f"probe-{uuid.uuid4().hex[:8]}"
        )
        made = await client.create_task_push_notification_config(wanted, context=self.context())
        made.task_id = made.task_id or self.task.id
        return made

    async def send_with_push(self, client: Client, url: str) -> TaskPushNotificationConfig:
        """A ``returnImmediately`` send with the config inline, for a server that refuses a
        standalone create without auth; the config as set, on the task the send made."""
        request = self.request()
        request.configuration.return_immediately = True
        wanted = request.configuration.task_push_notification_config
        wanted.id, wanted.url = f"probe-{uuid.uuid4().hex[:8]}", url
        wanted.token = f"probe-{uuid.uuid4().hex[:8]}"
        async for event in client.send_message(request, context=self.context()):
            if event.HasField("task"):
                made = TaskPushNotificationConfig()
                made.CopyFrom(wanted)
                made.task_id = event.task.id
                return made
            break
        raise UnsupportedOperationError(message="the inline send made no task")

    async def read_back_and_delete(
        self, client: Client, made: TaskPushNotificationConfig, url: str, refused: list[str]
    ) -> None:
        """The rest of the push-config check, once a config was created."""
        task_id, ctx = made.task_id, self.context()
        step = "get"
        try:
            get = GetTaskPushNotificationConfigRequest(task_id=task_id, id=made.id)
            got = await self.call(
                lambda: client.get_task_push_notification_config(get, context=ctx)
            )
            step = "delete"
            delete = DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=made.id)
            await self.call(
                lambda: client.delete_task_push_notification_config(delete, context=ctx)
            )
        except Exception as exc:
            self.record("push-config", "fail", f"{step}: {describe(exc)}")
            return
        if got.url != url:
            self.record("push-config", "fail", f"set url {url!r}, read back {got.url!r}")
            return
        tried = f" (refused first: {'; '.join(refused)})" if refused else ""
        self.record("push-config", "pass", f"created, read back and deleted{tried}")

    async def check_version(self, client: Client) -> None:
        """The interface speaks 1.0 and refuses an unsupported A2A-Version."""
        declared = self.interface.protocol_version
        if declared and declared.split(".")[0] != PROTOCOL_VERSION_CURRENT.split(".")[0]:
            self.record(
                "version-header", "fail",
                f"the card advertises protocolVersion {declared!r}; "
                f"expected {PROTOCOL_VERSION_CURRENT}",
            )  # fmt: skip
            return
        ctx = self.context(**{VERSION_HEADER: UNSUPPORTED_VERSION})
        missing = f"conformance-version-{uuid.uuid4()}"
        try:
            await self.call(lambda: client.get_task(GetTaskRequest(id=missing), context=ctx))
        except VersionNotSupportedError:
            self.record(
                "version-header", "pass",
                f"{VERSION_HEADER} {PROTOCOL_VERSION_CURRENT} served, "
                f"{UNSUPPORTED_VERSION} refused",
            )  # fmt: skip
            return
        except Exception as exc:
            self.record(
                "version-header", "fail",
                f"{VERSION_HEADER}: {UNSUPPORTED_VERSION} should get VersionNotSupportedError, "
                f"got {describe(exc)}",
            )  # fmt: skip
            return
        self.record(
            "version-header",
            "fail",
            f"{VERSION_HEADER}: {UNSUPPORTED_VERSION} was served as supported",
        )

"""Push notifications are delivered off the event path, per config, with retries.

Receivers are real HTTP listeners on loopback, and a "black hole": a TCP server that
accepts and reads a push request but never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types import (
    GetTaskRequest,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_support import STEP, eventually, sdk_client, serve_agent, user_message, wait_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from library_ioa.plugins.a2a.server.push.delivery import QueuedPushSender, shown_url
from library_ioa.serving.listeners import HttpListener

pytestmark = [pytest.mark.timeout(60)]


@dataclass
class BlackHole:
    """Accepts connections and reads what comes, never answers."""

    url: str = ""
    requests: int = 0
    open: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[BlackHole]:
    hole = BlackHole()
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        hole.open += 1
        try:
            while data := await reader.read(65536):
                if b"POST " in data:
                    hole.requests += 1
                    hole.arrived.set()
        finally:
            hole.open -= 1

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    hole.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    try:
        yield hole
    finally:
        server.close()
        for writer in held:
            writer.close()
        await server.wait_closed()


@dataclass
class Receiver:
    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)  # statuses to answer first, then 204
    completed: asyncio.Event = field(default_factory=asyncio.Event)


@contextlib.asynccontextmanager
async def receiver(*answers: int) -> AsyncIterator[Receiver]:
    got = Receiver(answers=list(answers))

    async def hook(request: Request) -> Response:
        body = await request.json()
        got.bodies.append(body)
        got.headers.append(dict(request.headers))
        status = got.answers.pop(0) if got.answers else 204
        state = body.get("statusUpdate", {}).get("status", {}).get("state")
        if status == 204 and state == "TASK_STATE_COMPLETED":
            got.completed.set()
        return Response(status_code=status)

    listener = HttpListener(
        Starlette(routes=[Route("/hook", hook, methods=["POST"])]), "127.0.0.1", 0
    )
    await listener.start()
    got.url = f"http://127.0.0.1:{listener.port}/hook"
    try:
        yield got
    finally:
        await listener.aclose()


def status_event(task_id: str, state: TaskState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task_id, context_id="c", status=TaskStatus(state=state))


@contextlib.asynccontextmanager
async def sender(*urls: str, **options: Any) -> AsyncIterator[QueuedPushSender]:
    store = InMemoryPushNotificationConfigStore()
    for index, url in enumerate(urls):
        config = TaskPushNotificationConfig(id=f"c{index}", task_id="t1", url=url, token="tok-9")
        await store.set_info("t1", config, ServerCallContext())
    made = QueuedPushSender(
        lambda n: httpx.AsyncClient(timeout=STEP, limits=httpx.Limits(max_connections=n)),
        store,
        agent_id="push-test",
        **options,
    )
    try:
        yield made
    finally:
        await made.aclose(grace=0)


async def test_a_receiver_that_never_answers_does_not_slow_the_task() -> None:
    async with black_hole() as hole, serve_agent(pushNotifications=True) as served:
        message = user_message("quick done at once")
        async with sdk_client(served) as client:
            request_config = TaskPushNotificationConfig(url=hole.url, token="t")
            request = SendMessageRequest(message=message)
            request.configuration.return_immediately = True
            request.configuration.task_push_notification_config.CopyFrom(request_config)
            async with asyncio.timeout(STEP):
                [response] = [r async for r in client.send_message(request)]
            task_id = response.task.id

            async def completed() -> bool:
                task = await client.get_task(GetTaskRequest(id=task_id))
                return task.status.state == TaskState.TASK_STATE_COMPLETED

            await eventually(completed, "the task completes")
            await wait_for(hole.arrived)
        assert hole.open >= 1  # its first push is still unanswered, and the task is done


async def test_a_slow_receiver_does_not_delay_another_config_of_the_task() -> None:
    async with black_hole() as hole, receiver() as good, sender(hole.url, good.url) as push:
        await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_WORKING))
        await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_COMPLETED))
        await wait_for(good.completed)
        await wait_for(hole.arrived)
        assert hole.open == 1 and hole.requests == 1  # still waiting on the first one
    states = [b["statusUpdate"]["status"]["state"] for b in good.bodies]
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]  # in order
    assert all(h["x-a2a-notification-token"] == "tok-9" for h in good.headers)


async def test_a_failing_receiver_is_retried_with_backoff_until_it_accepts() -> None:
    async with receiver(503, 429) as flaky, sender(flaky.url, backoff=0.01) as push:
        await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_COMPLETED))
        await wait_for(flaky.completed)
    assert len(flaky.bodies) == 3  # two refusals, then the same event accepted


async def test_a_final_failure_logs_one_line_without_query_or_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with receiver(500, 500) as broken:
        url = broken.url + "?sig=do-not-log-me"
        async with sender(url, attempts=2, backoff=0.01) as push:
            await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_FAILED))

            async def given_up() -> bool:
                return push.pending == 0 and len(broken.bodies) == 2 and not push._workers

            await eventually(given_up, "both attempts are made")
    failures = [r for r in caplog.records if "failed after" in r.getMessage()]
    assert len(failures) == 1
    line = failures[0].getMessage()
    assert "HTTP 500" in line and "2 attempt(s)" in line and broken.url in line
    assert all(r.exc_info is None for r in caplog.records)
    assert not any("do-not-log-me" in r.getMessage() for r in caplog.records)
    assert not any("tok-9" in r.getMessage() for r in caplog.records)


async def test_a_client_error_is_not_retried() -> None:
    async with receiver(404) as gone, sender(gone.url, backoff=0.01) as push:
        await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_WORKING))
        await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_COMPLETED))
        await wait_for(gone.completed)
    assert len(gone.bodies) == 2  # the 404 was final: the next event went next


async def test_a_full_queue_drops_the_oldest_events() -> None:
    async with black_hole() as hole, sender(hole.url, queue_size=3) as push:
        for _ in range(10):
            await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_WORKING))
        assert push.pending <= 3 + 3  # the task's queue and the config's, each bounded


async def test_a_receiver_that_never_answers_does_not_delay_another_receivers_push() -> None:
    store = InMemoryPushNotificationConfigStore()
    async with black_hole() as hole, receiver() as good:
        for index in range(30):  # one task, many configs, all on the silent receiver
            config = TaskPushNotificationConfig(id=f"h{index}", task_id="t1", url=hole.url)
            await store.set_info("t1", config, ServerCallContext())
        other = TaskPushNotificationConfig(id="g", task_id="t2", url=good.url)
        await store.set_info("t2", other, ServerCallContext())
        async with sender(receiver_connections=2) as push:
            push._store = store
            await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_WORKING))

            async def silent_receiver_full() -> bool:
                return hole.open == 2 and push.receiver_pending(hole.url) == 30

            await eventually(silent_receiver_full, "two POSTs held, all 30 pending")
            await push.send_notification("t2", status_event("t2", TaskState.TASK_STATE_COMPLETED))
            await wait_for(good.completed)
            assert hole.open == 2 and hole.requests == 2  # its own two slots, still held
    assert [b["statusUpdate"]["taskId"] for b in good.bodies] == ["t2"]


async def test_a_receivers_queue_is_bounded_across_its_configs() -> None:
    async with black_hole() as hole:
        urls = [f"{hole.url}?n={n}" for n in range(5)]
        async with sender(*urls, receiver_connections=1, receiver_queue_size=3) as push:
            for _ in range(4):
                await push.send_notification("t1", status_event("t1", TaskState.TASK_STATE_WORKING))

            async def dispatched() -> bool:
                return not push._tasks and hole.open == 1

            await eventually(dispatched, "every event reached its config's queue")
            assert push.receiver_pending(hole.url) <= 3


def test_urls_are_shown_without_credentials_query_or_fragment() -> None:
    assert (
        shown_url("https://u:p@hooks.example:8443/a/b?sig=x#f") == "https://hooks.example:8443/a/b"
    )
    assert shown_url("http://[::1]:9/h?x") == "http://[::1]:9/h"

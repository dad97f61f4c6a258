"""Faults injected into a served agent, and what its client sees: a delegated peer that is
down, slow past its timeout, or answers garbage on a raw TCP socket (a clear tool error,
the turn goes on); a model plugin that raises (the task ends failed with a message, the
server stays up). The agent keeps its tasks in SQLite: nothing is lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.types import SendMessageRequest, Task, TaskState
from durable_support import STEP, client_for, get_task, list_tasks
from tests.a2a.a2a_support import free_port, serve_agent, user_message
from tests.fast_path import fast_path_document

from mas.ctl.session.exposure import bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.infra.wiring import wire
from mas.runtime.models.base import ModelOutput, ModelPlugin, ModelRequest, TextChunk
from mas.runtime.registry import builtin_registry

pytestmark = pytest.mark.integration

RULES = [
    {
        "match": "^remote (?P<q>.+)",
        "delegate": {"to": "peer", "message": "{q}"},
        "reply": "peer: {result}",
    },
]


class RaisingModel(ModelPlugin):
    """A model plugin with a bug: ``boom`` raises, anything else is echoed."""

    def __init__(self, **_: Any) -> None:
        pass

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        if request.last_user_text.startswith("boom"):
            yield TextChunk("about to ")
            raise RuntimeError("the plugin tripped over its own feet")
        yield TextChunk(f"fine: {request.last_user_text}")


def application(port: int, peer_url: str, db: Path, *, timeout: float = 1.0) -> dict[str, Any]:
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "faults"},
            "spec": {
                "agency": {
                    "entry": "front",
                    "agents": {
                        "front": {
                            "spec": {
                                "delegates_to": ["peer"],
                                "model": {
                                    "type": "scripted",
                                    "params": {"rules": RULES, "default": {"reply": "ok {input}"}},
                                },
                            }
                        },
                        "fragile": {"spec": {"model": {"type": "raising"}}},
                    },
                },
                "endpoints": {
                    "front": {
                        "url": f"http://127.0.0.1:{port}",
                        "usage": "deploy",
                        "a2a": {"task_store": {"type": "sql", "url": f"sqlite+aiosqlite:///{db}"}},
                    },
                    "fragile": {
                        "url": f"http://127.0.0.1:{free_port()}",
                        "usage": "deploy",
                        "a2a": {"task_store": {"type": "sql", "url": f"sqlite+aiosqlite:///{db}2"}},
                    },
                    "peer": {"url": peer_url, "usage": "use", "timeout": timeout},
                },
            },
        }
    )


@contextlib.asynccontextmanager
async def served(
    tmp_path: Path, peer_url: str, agent: str = "front"
) -> AsyncIterator[tuple[Client, str]]:
    registry = builtin_registry()
    registry.register("model", "raising", RaisingModel)
    document = application(free_port(), peer_url, tmp_path / "tasks.db")
    wired = wire(document, registry.known_plugins())
    host = RuntimeHost.build(wired, [agent], registry=registry)
    listeners = await bind_listeners(
        wired, host, agents=[agent], drain_timeout=2, registry=registry
    )
    url = listeners.get(agent).exposure.url
    try:
        async with client_for(url) as client:
            yield client, url
    finally:
        await listeners.aclose()
        await host.aclose()


@contextlib.asynccontextmanager
async def garbage_server() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A raw TCP server on loopback that answers every connection with bytes that are not
    HTTP, then closes it."""
    received: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            async with asyncio.timeout(2):
                received.append(await reader.read(4096))
        writer.write(b"\x00\x17\xfe not http at all {{{\r\n\r\n\xff")
        with contextlib.suppress(OSError):
            await writer.drain()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.close()
        await server.wait_closed()


async def _send(client: Client, text: str) -> Task:
    """The task of one blocking send (a delegation always makes one)."""
    request = SendMessageRequest(message=user_message(text, context_id="user"))
    async with asyncio.timeout(STEP):
        [response] = [r async for r in client.send_message(request)]
    assert response.HasField("task"), response
    return response.task


async def _reply(client: Client, text: str) -> str:
    """The reply text of one blocking send (a quick turn may answer with a Message)."""
    request = SendMessageRequest(message=user_message(text, context_id="user"))
    async with asyncio.timeout(STEP):
        [response] = [r async for r in client.send_message(request)]
    if response.HasField("message"):
        return get_message_text(response.message)
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED, response
    return get_message_text(response.task.status.message)


async def _fault_then_recovery(client: Client, reason: str) -> None:
    faulty = await _send(client, "remote are you there?")
    assert faulty.status.state == TaskState.TASK_STATE_COMPLETED  # the turn went on
    text = get_message_text(faulty.status.message)
    assert text.startswith("peer: delegation to 'peer' failed: "), text
    assert reason in text, text
    assert await _reply(client, "still here") == "ok still here"
    stored = await get_task(client, faulty.id)  # nothing lost: the task is in the store
    assert get_message_text(stored.status.message) == text
    assert get_message_text(stored.history[0]) == "remote are you there?"


async def test_a_peer_that_is_down(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    async with served(tmp_path, down) as (client, _):
        await _fault_then_recovery(client, f"peer {down} is unavailable")


async def test_a_peer_slow_past_its_timeout(tmp_path: Path) -> None:
    async with serve_agent(grpc_on=False) as slow:
        try:
            async with served(tmp_path, slow.url) as (client, _):
                # The peer's scripted runner waits on a gate nobody opens.
                faulty = await _send(client, "remote wait never-opened hello")
                text = get_message_text(faulty.status.message)
                assert faulty.status.state == TaskState.TASK_STATE_COMPLETED
                assert text.startswith("peer: delegation to 'peer' failed: "), text
                assert slow.url in text and "1s" in text, text
                assert await _reply(client, "still here") == "ok still here"
        finally:
            slow.runner.gates["never-opened"].set()


async def test_a_peer_answering_garbage_on_a_raw_socket(tmp_path: Path) -> None:
    async with garbage_server() as (url, received), served(tmp_path, url) as (client, _):
        await _fault_then_recovery(client, url)
    assert received and received[0].startswith(b"GET /.well-known/agent-card.json")


async def test_a_raising_model_fails_the_task_and_the_server_stays_up(tmp_path: Path) -> None:
    async with served(tmp_path, "http://127.0.0.1:9", agent="fragile") as (client, _):
        failed = await _send(client, "boom now")
        after = await _reply(client, "and now?")
        stored = await get_task(client, failed.id)
        listed = await list_tasks(client)
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(failed.status.message) == (
        "the model of agent 'fragile' failed: the plugin tripped over its own feet"
    )
    assert after == "fine: and now?"
    assert stored.status.state == TaskState.TASK_STATE_FAILED
    assert failed.id in {t.id for t in listed}

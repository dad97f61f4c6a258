"""``mas-ctl serve`` killed with SIGKILL mid-stream, then restarted: the streaming client
gets an error (not a hang), every task comes back with its history and artifacts, and the
task whose turn died with the process is FAILED with a message that says so. With several
replicas on PostgreSQL, a live replica fails the task of a killed one within the lease."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a.client import Client
from a2a.helpers import get_message_text
from a2a.types import SendMessageRequest, StreamResponse, SubscribeToTaskRequest, TaskState
from durable_support import (
    START,
    STEP,
    client_for,
    get_task,
    list_tasks,
    serve_command,
    serve_on_store,
    serve_process,
)
from tests.a2a.a2a_support import free_port, user_message
from tests.fast_path import fast_path_document

from library_ioa.plugins.a2a.server.stores.runs import LOST_TURN

pytestmark = pytest.mark.integration

RULES = [
    {
        "match": "^report (?P<what>.+)",
        "artifacts": [
            {"kind": "text", "name": "notes", "text": "about {what}"},
            {"kind": "data", "name": "facts", "data": {"rows": 42}},
        ],
        "reply": "report on {what} is ready",
    },
    {"match": "^book", "ask": "Which day?"},
    {
        "match": "^slow",
        "chunks": ["one ", "two ", "three ", "four ", "five ", "six"],
        "chunk_delay_ms": 400,
    },
]


def application(port: int, store_url: str) -> dict[str, Any]:
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "durable"},
            "spec": {
                "agency": {
                    "agents": {
                        "front": {
                            "spec": {
                                "model": {
                                    "type": "scripted",
                                    "params": {"rules": RULES, "default": {"reply": "hi {input}"}},
                                }
                            }
                        }
                    }
                },
                "endpoints": {
                    "front": {
                        "url": f"http://127.0.0.1:{port}",
                        "usage": "deploy",
                        "a2a": {"task_store": {"type": "sql", "url": store_url}},
                    }
                },
            },
        }
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    return str(request.getfixturevalue("pg_url"))


async def _send(client: Client, text: str, context_id: str) -> StreamResponse:
    request = SendMessageRequest(message=user_message(text, context_id=context_id))
    async with asyncio.timeout(STEP):
        [response] = [r async for r in client.send_message(request)]
    return response


async def _stream_until_killed(client: Client, kill: Any) -> tuple[str, list[StreamResponse]]:
    """Stream a slow turn, SIGKILL the server after its first chunk; the task id and events."""
    request = SendMessageRequest(message=user_message("slow please", context_id="s"))
    seen: list[StreamResponse] = []
    with pytest.raises(Exception) as caught:
        async with asyncio.timeout(STEP):
            async for response in client.send_message(request):
                seen.append(response)
                if response.HasField("artifact_update"):
                    kill()
    assert not isinstance(caught.value, TimeoutError), "the client hung after the kill"
    task_ids = {r.task.id for r in seen if r.HasField("task")} | {
        r.artifact_update.task_id for r in seen if r.HasField("artifact_update")
    }
    [task_id] = task_ids
    return task_id, seen


async def test_sigkill_mid_stream_then_restart(tmp_path: Path, store_url: str) -> None:
    port = free_port()
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(application(port, store_url)))
    url = f"http://127.0.0.1:{port}"
    env = {"MAS_REPLICA_ID": "front-0"}

    async with serve_process(app, "front", env) as first:
        async with client_for(url) as client:
            report = await _send(client, "report sales", "r")
            booked = await _send(client, "book a table", "b")
        async with client_for(url, streaming=True) as streaming:
            slow_id, seen = await _stream_until_killed(streaming, first.kill)
        async with asyncio.timeout(STEP):
            await first.process.wait()
        assert first.process.returncode == -signal.SIGKILL
    assert report.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert booked.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert any(r.HasField("artifact_update") for r in seen)

    async with serve_process(app, "front", env) as second, client_for(url) as client:
        again = await get_task(client, report.task.id)
        waiting = await get_task(client, booked.task.id)
        lost = await get_task(client, slow_id)
        listed = await list_tasks(client)
        second.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STEP):
            assert await second.process.wait() == 0

    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(again.status.message) == "report on sales is ready"
    assert get_message_text(again.history[0]) == "report sales"
    assert {a.name for a in again.artifacts} == {"notes", "facts", "response"}
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_message_text(waiting.status.message) == "Which day?"
    assert lost.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(lost.status.message) == LOST_TURN
    assert get_message_text(lost.history[0]) == "slow please"
    streamed = "".join(p.text for a in lost.artifacts for p in a.parts)
    assert streamed.startswith("one ")  # what was streamed before the kill is kept
    assert {t.id for t in listed} == {report.task.id, booked.task.id, slow_id}


async def test_a_live_replica_fails_the_task_of_a_killed_one(tmp_path: Path, pg_url: str) -> None:
    port = free_port()
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(application(port, pg_url)))
    url = f"http://127.0.0.1:{port}"
    lease = {"MAS_TASK_LEASE_SECONDS": "1.2", "MAS_REPLICA_ID": "front-a"}
    async with (
        serve_on_store(pg_url, agent_id="front", heartbeat=0.2, lease=1.2) as other,
        serve_process(app, "front", lease) as killed,
    ):
        async with client_for(url, streaming=True) as streaming:
            request = SendMessageRequest(message=user_message("slow please", context_id="k"))
            async with asyncio.timeout(STEP):
                async for response in streaming.send_message(request):
                    if response.HasField("artifact_update"):
                        task_id = response.artifact_update.task_id
                        break
        async with client_for(other.url, streaming=True) as on_other:
            events: list[StreamResponse] = []

            async def follow() -> None:
                async for event in on_other.subscribe(SubscribeToTaskRequest(id=task_id)):
                    events.append(event)

            follower = asyncio.create_task(follow())
            async with asyncio.timeout(STEP):
                while not events:
                    await asyncio.sleep(0.02)
            killed.kill()
            async with asyncio.timeout(STEP):
                await follower  # ends when the live replica fails the task
            failed = await get_task(on_other, task_id)
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_FAILED
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(failed.status.message) == LOST_TURN


async def test_serve_with_a_store_it_cannot_open_is_one_line_and_exit_1(tmp_path: Path) -> None:
    app = tmp_path / "app.yaml"
    store = f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'tasks.db'}"
    app.write_text(yaml.safe_dump(application(free_port(), store)))
    process = await asyncio.create_subprocess_exec(
        *serve_command(app, "front"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(START):
        out, err = await process.communicate()
    assert process.returncode == 1
    assert out == b""
    [line] = err.decode().splitlines()
    assert line.startswith(f"error: agent 'front': a2a.task_store: cannot open {store}: ")
    assert "does not exist" in line

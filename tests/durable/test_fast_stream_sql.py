"""The fast streaming path on the SDK's database stores streams what the SDK's path streams.

The same request goes to an agent served with the fast path (the default) and to one with
``fast_send=False``, each on a task store of its own; the SSE frames are compared as text
(generated ids and times replaced), then the stored task. With PostgreSQL, a cancel from
another replica while the turn streams ends both streams alike (the write the turn makes
next is refused, and the stored CANCELED task is the stream's last event).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from durable_support import QuietRunner, serve_on_store
from pg_server import Postgres
from tests.a2a.a2a_support import STEP

pytestmark = pytest.mark.integration

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SUFFIX = re.compile(r"-[0-9a-f]{12}\b")
_TIME = re.compile(r'"(timestamp|createdAt|lastModified)": "[^"]+"')
_names = itertools.count()


def scrubbed(text: str) -> str:
    text = _TIME.sub(r'"\1": "<time>"', text)
    return _SUFFIX.sub("-<hex>", _UUID.sub("<uuid>", text))


def stream_request(text: str) -> bytes:
    message = {"role": "ROLE_USER", "messageId": "s-1", "contextId": "c", "parts": []}
    message["parts"] = [{"text": text}]
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    request["params"] = {"message": message}
    return json.dumps(request).encode()


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: Any) -> Any:
    request = {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}
    return (await http.post(url + "/", json=request, headers=V1)).json()


async def frames_of(
    http: httpx.AsyncClient,
    url: str,
    text: str,
    on_working: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[str, list[str]]:
    """The task id and the scrubbed frames of one stream; ``on_working(task_id)`` once."""
    frames: list[str] = []
    task_id = ""
    async with (
        asyncio.timeout(STEP),
        http.stream("POST", url + "/", content=stream_request(text), headers=V1) as reply,
    ):
        buffer = ""
        async for chunk in reply.aiter_text():
            buffer += chunk
            while "\r\n\r\n" in buffer:
                frame, buffer = buffer.split("\r\n\r\n", 1)
                result = json.loads(frame.split("data: ", 1)[1]).get("result", {})
                task_id = task_id or result.get("task", {}).get("id", "")
                frames.append(scrubbed(frame))
                if on_working is not None and "TASK_STATE_WORKING" in frame:
                    await on_working(task_id)
                    on_working = None
    return task_id, frames


def database(postgres: Postgres) -> str:
    name = f"fs{os.getpid()}_{next(_names)}"
    postgres.create_database(name)
    return postgres.url(name)


async def test_a_stream_on_sqlite_is_the_sdks(tmp_path: Path) -> None:
    seen = []
    for fast in (True, False):
        url = f"sqlite+aiosqlite:///{tmp_path / f'tasks-{fast}.db'}"
        async with (
            serve_on_store(url, fast_send=fast) as served,
            httpx.AsyncClient(timeout=STEP) as http,
        ):
            task_id, frames = await frames_of(http, served.url, "echo stored on disk")
            found = await rpc(http, served.url, "GetTask", {"id": task_id})
            seen.append((frames, scrubbed(json.dumps(found))))
    assert seen[0] == seen[1]
    assert len(seen[0][0]) == 8 and "TASK_STATE_COMPLETED" in seen[0][1], seen[0]


async def test_a_cancel_from_another_replica_ends_the_stream_alike(postgres: Postgres) -> None:
    seen = []
    for fast in (True, False):
        url = database(postgres)
        runner = QuietRunner()
        async with (
            serve_on_store(url, runner=runner, fast_send=fast) as one,
            serve_on_store(url) as two,
            httpx.AsyncClient(timeout=STEP) as http,
        ):
            canceled: dict[str, Any] = {}

            async def cancel_elsewhere(
                task_id: str, out: dict[str, Any] = canceled, runner: QuietRunner = runner
            ) -> None:
                out["it"] = await rpc(http, two.url, "CancelTask", {"id": task_id})
                runner.gates["g1"].set()  # the turn goes on: its next write is refused

            task_id, frames = await frames_of(http, one.url, "late g1 words", cancel_elsewhere)
            found = await rpc(http, one.url, "GetTask", {"id": task_id})
            seen.append((frames, scrubbed(json.dumps(canceled["it"])), scrubbed(json.dumps(found))))
    assert seen[0] == seen[1]
    frames, _, found = seen[0]
    assert "TASK_STATE_CANCELED" in frames[-1] and '"task"' in frames[-1], frames
    assert '"state": "TASK_STATE_CANCELED"' in found, found

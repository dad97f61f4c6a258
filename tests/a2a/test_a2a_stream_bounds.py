"""A stream subscriber that stops reading is dropped when its bounded buffer fills; the task
and the other subscribers go on (``a2a.responses.stream_buffer_*``, ``fast.stream.Listener``).

The never-reading client is a real socket with a small receive buffer that sends its
``SubscribeToTask`` and reads nothing until the end; the reading client is httpx. The turn
publishes one 32 KB artifact chunk at a time, each let out by the test once the reading
client has the one before, so the reader is never behind by more than one event.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a_support import STEP, ScriptRunner, serve_agent

from library_ioa.plugins.a2a.server.metrics import A2A_REGISTRY
from mas.runtime.turns import ArtifactEmitted, TurnEnded, TurnEvent, TurnInput

pytestmark = [pytest.mark.timeout(90)]

CHUNK = 32_000
MOST_CHUNKS = 600  # far more than loopback socket buffers hold of a client that never reads


@dataclass
class Flood(ScriptRunner):
    """Publishes chunk after chunk (each when ``next`` is set) until ``stop``."""

    next: asyncio.Event = field(default_factory=asyncio.Event)
    stop: bool = False

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        for number in range(MOST_CHUNKS):
            text = f"{number:05d}" + "x" * CHUNK
            yield ArtifactEmitted("text", "flood", text=text, artifact_id="flood")
            await self.next.wait()
            self.next.clear()
            if self.stop:
                break
        yield TurnEnded("completed", text="done")


def rpc(method: str, params: dict[str, Any]) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return json.dumps(body).encode()


def drops() -> float:
    value = A2A_REGISTRY.get_sample_value(
        "maslab_a2a_stream_subscribers_dropped_total", {"agent": "scripted"}
    )
    return value or 0.0


async def sse_items(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:])


def pumps() -> int:
    return sum(t.get_name() == "bounded-events" for t in asyncio.all_tasks())


@pytest.mark.parametrize("path", ["fast", "sdk"])
async def test_a_subscriber_that_never_reads_is_dropped_and_another_is_served(path: str) -> None:
    """``fast``: the reader streams the task it started (``StreamRun``); ``sdk``: the task is
    started with ``returnImmediately`` and both clients subscribe to the SDK's task."""
    flood = Flood()
    responses = {"stream_buffer_events": 8, "stream_buffer_bytes": 128 * 1024}
    a2a: dict[str, Any] = {"responses": responses}
    if path == "fast":  # the fast path's StreamRun is the subject, whatever MAS_A2A_FAST_PATH
        a2a["fast_path"] = True
    async with (
        serve_agent(runner=flood, a2a_options=a2a) as served,
        httpx.AsyncClient(base_url=served.url, timeout=STEP) as http,
    ):
        before = drops()
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "go"}]}
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        if path == "fast":
            request = rpc("SendStreamingMessage", {"message": message})
        else:
            started = rpc(
                "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
            )
            reply = await http.post("/", content=started, headers=headers)
            request = rpc("SubscribeToTask", {"id": reply.json()["result"]["task"]["id"]})
        async with http.stream("POST", "/", content=request, headers=headers) as stream:
            items = sse_items(stream)
            first = await anext(items)
            task_id = first["result"]["task"]["id"]

            async def next_chunk() -> int:
                while "artifactUpdate" not in (item := (await anext(items))["result"]):
                    pass
                return int(item["artifactUpdate"]["artifact"]["parts"][0]["text"][:5])

            artifacts = first["result"]["task"].get("artifacts")
            if artifacts:  # subscribed after the first chunk: the task holds it
                numbers = [int(artifacts[0]["parts"][0]["text"][:5])]
            else:
                numbers = [await next_chunk()]

            # The subscriber that never reads: a socket with a small receive buffer.
            silent = socket.socket()
            silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            silent.setblocking(False)
            loop = asyncio.get_running_loop()
            host, port = served.url.removeprefix("http://").rstrip("/").split(":")
            await loop.sock_connect(silent, (host, int(port)))
            subscribe = rpc("SubscribeToTask", {"id": task_id})
            head = (
                f"POST / HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 1.0\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(subscribe)}\r\n\r\n"
            )
            await loop.sock_sendall(silent, head.encode() + subscribe)
            async with asyncio.timeout(STEP):  # until the silent client listens too
                if path == "fast":
                    run = served.exposure.handler._runs[task_id]
                    while len(run._listeners) < 2:
                        await asyncio.sleep(0.01)
                else:
                    while pumps() < 2:
                        await asyncio.sleep(0.01)

            async with asyncio.timeout(60):
                while drops() == before:
                    assert len(numbers) < MOST_CHUNKS - 1, "the silent subscriber was never dropped"
                    flood.next.set()
                    numbers.append(await next_chunk())
                flood.stop = True
                flood.next.set()
                rest = [item["result"] async for item in items]
            assert drops() == before + 1
            assert numbers == list(range(len(numbers)))  # every chunk, in order
            assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

        # The dropped subscriber, reading at last: what was in its pipes, then the error.
        received = b""
        async with asyncio.timeout(STEP):
            while b"stream dropped" not in received:
                data = await loop.sock_recv(silent, 1 << 20)
                assert data, "closed without the error"
                received += data
        silent.close()
    assert b"stream_buffer_events" in received


async def test_subscriptions_past_the_cap_are_refused_until_one_ends() -> None:
    """``a2a.responses.max_subscriptions``: each open SubscribeToTask stream holds its own
    copy of its task, so one past the cap is refused before it holds anything."""
    runner = ScriptRunner()
    async with (
        serve_agent(runner=runner, a2a_options={"responses": {"max_subscriptions": 2}}) as served,
        httpx.AsyncClient(base_url=served.url, timeout=STEP) as http,
    ):
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": ""}]}
        message["parts"][0]["text"] = "wait held still working"
        start = rpc(
            "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
        task_id = (await http.post("/", content=start, headers=headers)).json()["result"]["task"][
            "id"
        ]
        subscribe = rpc("SubscribeToTask", {"id": task_id})

        async def refused() -> dict[str, Any] | None:
            """The error a new subscription gets, or None when it is let in (then closed)."""
            async with http.stream("POST", "/", content=subscribe, headers=headers) as answer:
                if answer.headers["content-type"].startswith("application/json"):
                    return dict(json.loads(await answer.aread())["error"])  # before any event
                first = await anext(sse_items(answer))
            return first.get("error")

        async with (
            http.stream("POST", "/", content=subscribe, headers=headers) as one,
            http.stream("POST", "/", content=subscribe, headers=headers) as two,
        ):
            for stream in (one, two):
                assert "task" in (await anext(sse_items(stream)))["result"]
            error = await refused()
            assert error is not None and error["code"] == -32004, error
            assert "a2a.responses.max_subscriptions" in error["message"]
        async with asyncio.timeout(STEP):  # the two closed: a new one is let in
            while await refused() is not None:
                await asyncio.sleep(0.05)
        runner.gates["held"].set()

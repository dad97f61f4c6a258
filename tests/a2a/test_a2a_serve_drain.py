"""SIGTERM on ``mas-ctl serve`` while a stream outlasts ``--drain-timeout``: the stream gets
its final event and a clean end, the log has no traceback, and the exit code says the drain
was cut short (``EXIT_DRAIN_CUT_SHORT``)."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from a2a_support import STEP, free_port
from test_a2a_serve import START, command, environment
from tests.fast_path import fast_path_document

from mas.ctl.commands.serve import EXIT_DRAIN_CUT_SHORT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def long_stream_app(port: int) -> dict[str, Any]:
    # One chunk, then a pause far past the drain timeout: the stream is open at the deadline.
    rule = {"match": "^long", "chunks": ["first ", "never"], "chunk_delay_ms": 60_000}
    model = {"type": "scripted", "params": {"rules": [rule], "default": {"reply": "hi"}}}
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "drain"},
            "spec": {
                "agency": {"agents": {"front": {"spec": {"model": model}}}},
                "endpoints": {"front": {"url": f"http://127.0.0.1:{port}", "usage": "deploy"}},
            },
        }
    )


def stream_request(text: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }


async def test_a_stream_open_at_the_drain_deadline_ends_with_its_final_event(
    tmp_path: Path,
) -> None:
    port = free_port()
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(long_stream_app(port)))
    args = ("serve", "-f", str(app), "--agent", "front", "--no-control", "--drain-timeout", "1")
    process = await asyncio.create_subprocess_exec(
        *command(*args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(tmp_path),
    )
    assert process.stdout is not None and process.stderr is not None
    events: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(START):
            assert (await process.stdout.readline()).startswith(b"serving front")
        async with (
            httpx.AsyncClient(timeout=STEP * 3) as http,
            http.stream(
                "POST", f"http://127.0.0.1:{port}/", json=stream_request("long"), headers=V1
            ) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():  # ends cleanly, or raises
                if not line.startswith("data:"):
                    continue
                events.append(json.loads(line.removeprefix("data:")))
                if len(events) == 1:
                    process.send_signal(signal.SIGTERM)  # the stream is open and running
        async with asyncio.timeout(START):
            code = await process.wait()
            stderr = (await process.stderr.read()).decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    last = events[-1]["result"]
    assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", events
    parts = last["statusUpdate"]["status"]["message"]["parts"]
    assert "shut down" in parts[0]["text"], parts
    assert code == EXIT_DRAIN_CUT_SHORT, stderr
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert "--drain-timeout 1s" in stderr and "canceled" in stderr, stderr

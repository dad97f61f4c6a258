"""``mas-ctl serve`` as a real subprocess: ready line, A2A on three transports, metrics,
control endpoint, SIGTERM drain with exit 0, and the error lines and exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import SendMessageRequest, TaskState
from a2a_support import STEP, free_port, user_message
from tests.deadlines import COLD_START
from tests.fast_path import fast_path_document

pytestmark = pytest.mark.integration

START = COLD_START


def application(port: int, grpc_port: int) -> dict[str, Any]:
    rules = [
        {"match": "^slow (?P<q>.+)", "wait_ms": 1500, "reply": "slowly: {q}"},
        {
            "match": "^ask worker (?P<q>.+)",
            "delegate": {"to": "worker", "message": "{q}"},
            "reply": "worker said: {result}",
        },
    ]
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "served"},
            "spec": {
                "agency": {
                    "entry": "front",
                    "agents": {
                        "front": {
                            "metadata": {"name": "Front desk"},
                            "spec": {
                                "delegates_to": ["worker"],
                                "model": {
                                    "type": "scripted",
                                    "params": {"rules": rules, "default": {"reply": "hi {input}"}},
                                },
                            },
                        },
                        "worker": {"spec": {"model": {"type": "echo"}}},
                    },
                },
                "endpoints": {
                    "front": {
                        "url": f"http://127.0.0.1:{port}",
                        "usage": "deploy",
                        "a2a": {"grpc_port": grpc_port},
                    },
                },
            },
        }
    )


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mas.ctl.cli", *args]


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MAS_CONTROL_DIR": str(tmp_path / "control"), "PYTHONUNBUFFERED": "1"}


async def run(tmp_path: Path, *args: str) -> Run:
    process = await asyncio.create_subprocess_exec(
        *command(*args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(tmp_path),
    )
    async with asyncio.timeout(START):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


@pytest.fixture
def app_file(tmp_path: Path) -> tuple[Path, int, int]:
    port, grpc_port = free_port(), free_port()
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(application(port, grpc_port)))
    return path, port, grpc_port


@pytest.fixture
async def serving(
    tmp_path: Path, app_file: tuple[Path, int, int]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, int]]:
    path, _, _ = app_file
    metrics_port = free_port()
    process = await asyncio.create_subprocess_exec(
        *command(
            "serve",
            "-f",
            str(path),
            "--agent",
            "front",
            "--metrics-port",
            str(metrics_port),
            "--drain-timeout",
            "20",
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(tmp_path),
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START):
            line = (await process.stdout.readline()).decode().strip()
        yield process, line, metrics_port
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_serve_end_to_end(
    tmp_path: Path,
    app_file: tuple[Path, int, int],
    serving: tuple[asyncio.subprocess.Process, str, int],
) -> None:
    process, line, metrics_port = serving
    _, port, grpc_port = app_file
    url = f"http://127.0.0.1:{port}"
    assert (
        line
        == (
            f"serving front: A2A {url} (JSON-RPC), {url}/a2a/rest (HTTP+JSON), "
            f"grpc 127.0.0.1:{grpc_port}, card {url}/.well-known/agent-card.json, "
            f"metrics http://127.0.0.1:{metrics_port}/metrics, control "
        )
        + line.rsplit("control ", 1)[-1]
    )
    [advert] = list((tmp_path / "control").glob("front.*.json"))
    assert json.loads(advert.read_text())["address"] == line.rsplit("control ", 1)[-1]

    channels: list[grpc.aio.Channel] = []

    def channel(target: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(target))
        return channels[-1]

    async with httpx.AsyncClient(timeout=STEP) as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        assert card["name"] == "Front desk"
        replies = {}
        for binding in ("JSONRPC", "GRPC"):
            config = ClientConfig(
                streaming=False,
                httpx_client=http,
                grpc_channel_factory=channel,
                supported_protocol_bindings=[binding],
            )
            client = await ClientFactory(config).create_from_url(url)
            request = SendMessageRequest(message=user_message(f"ask worker via {binding}"))
            async with asyncio.timeout(STEP):
                [response] = [r async for r in client.send_message(request)]
            replies[binding] = get_message_text(response.task.status.message)
            await client.close()
        for made in channels:
            await made.close()
        assert replies == {"JSONRPC": "worker said: via JSONRPC", "GRPC": "worker said: via GRPC"}

        metrics = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
        for transport in ("JSONRPC", "GRPC"):
            assert (
                f'maslab_a2a_requests_total{{agent="front",method="SendMessage",'
                f'outcome="ok",transport="{transport}"}} 1.0'
            ) in metrics
        assert 'maslab_turns_total{agent="front",outcome="completed"} 2.0' in metrics
        assert 'maslab_turns_total{agent="worker",outcome="completed"} 2.0' in metrics
        assert (
            'maslab_delegation_calls_total{outcome="ok",source="front",target="worker"} 2.0'
            in metrics
        )
        assert "maslab_queue_depth" in metrics and "maslab_turn_latency_seconds" in metrics
        not_public = await http.get(f"{url}/metrics")
        assert not_public.status_code == 404  # a separate metrics port keeps it off the A2A port

        # SIGTERM while a slow turn is in flight: it is drained, then exit 0
        config = ClientConfig(streaming=True, httpx_client=http)
        client = await ClientFactory(config).create_from_url(url)
        states = []
        async with asyncio.timeout(STEP):
            request = SendMessageRequest(message=user_message("slow finish me"))
            async for event in client.send_message(request):
                if event.HasField("task") and not states:
                    process.send_signal(signal.SIGTERM)
                if event.HasField("status_update"):
                    states.append(event.status_update.status.state)
                    final = event.status_update.status
        await client.close()
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(final.message) == "slowly: finish me"
    async with asyncio.timeout(STEP):
        code = await process.wait()
    assert process.stderr is not None
    stderr = (await process.stderr.read()).decode()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    assert not list((tmp_path / "control").glob("front.*.json"))


async def test_serve_without_control_and_with_an_override(
    tmp_path: Path, app_file: tuple[Path, int, int]
) -> None:
    path, _, _ = app_file
    port = free_port()  # moved by --override, like the other commands' document options
    process = await asyncio.create_subprocess_exec(
        *command(
            "serve",
            "-f",
            str(path),
            "--agent",
            "front",
            "--no-control",
            "--listen",
            "127.0.0.1",
            "--override",
            f"infra:spec.endpoints[front].url=http://127.0.0.1:{port}",
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(tmp_path),
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START):
            line = (await process.stdout.readline()).decode()
        assert "control" not in line
        assert line.startswith(f"serving front: A2A http://127.0.0.1:{port} ")
        assert not (tmp_path / "control").exists() or not list((tmp_path / "control").iterdir())
        async with httpx.AsyncClient(timeout=STEP) as http:
            metrics = await http.get(f"http://127.0.0.1:{port}/metrics")
        assert metrics.status_code == 200 and "maslab_turns" in metrics.text
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(STEP):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_serve_refuses_an_agent_that_is_not_deployed(
    tmp_path: Path, app_file: tuple[Path, int, int]
) -> None:
    path, _, _ = app_file
    document = yaml.safe_load(path.read_text())
    document["spec"]["endpoints"]["worker"] = {"url": "http://127.0.0.1:1", "usage": "use"}
    used = tmp_path / "use.yaml"
    used.write_text(yaml.safe_dump(document))
    missing, result = await asyncio.gather(  # two independent cold processes, side by side
        run(tmp_path, "serve", "-f", str(path), "--agent", "worker"),
        run(tmp_path, "serve", "-f", str(used), "--agent", "worker"),
    )
    assert missing.code == 1
    assert missing.stderr.splitlines() == [
        "error: spec.endpoints.worker: is missing; mas-ctl serve needs an endpoint with usage: "
        "deploy or use-and-deploy"
    ]
    assert result.code == 1
    assert result.stderr.splitlines() == [
        "error: spec.endpoints.worker.usage: is 'use'; mas-ctl serve needs usage: deploy or "
        "use-and-deploy"
    ]


async def test_serve_usage_errors(tmp_path: Path, app_file: tuple[Path, int, int]) -> None:
    path, _, _ = app_file
    # three independent processes: run them side by side (three cold interpreters in turn
    # were most of this test's wall time)
    unknown, missing, bad_port = await asyncio.gather(
        run(tmp_path, "serve", "-f", str(path), "--agent", "nobody"),
        run(tmp_path, "serve", "-f", str(tmp_path / "nope.yaml"), "--agent", "front"),
        run(tmp_path, "serve", "-f", str(path), "--agent", "front", "--metrics-port", "http"),
    )
    assert (unknown.code, unknown.stderr.splitlines()) == (
        2,
        ["error: --agent 'nobody' is not an agent of the agency; agents: front, worker"],
    )
    assert missing.code == 2
    assert missing.stderr.startswith(f"error: {tmp_path / 'nope.yaml'}: cannot read the file")
    assert bad_port.code == 2
    assert "--metrics-port: 'http' is not a port; accepted: 0 to 65535" in bad_port.stderr
    for result in (unknown, missing, bad_port):
        assert "Traceback" not in result.stderr and result.stdout == ""


async def test_serve_invalid_document_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    document = application(free_port(), free_port())
    document["spec"]["endpoints"]["front"]["url"] = "http://127.0.0.1:1/prefix"
    path.write_text(yaml.safe_dump(document))
    result = await run(tmp_path, "serve", "-f", str(path), "--agent", "front")
    assert result.code == 1
    assert result.stderr.startswith("error: spec.endpoints.front.url")
    assert "Traceback" not in result.stderr


async def test_serve_port_in_use_is_one_clear_line(
    tmp_path: Path, app_file: tuple[Path, int, int]
) -> None:
    path, port, _ = app_file
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        result = await run(tmp_path, "serve", "-f", str(path), "--agent", "front")
    assert result.code == 1
    assert result.stderr.splitlines() == [
        f"error: agent 'front': cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    _, _, grpc_port = app_file
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", grpc_port))
        taken.listen(1)
        result = await run(tmp_path, "serve", "-f", str(path), "--agent", "front")
    assert result.code == 1
    assert result.stderr.splitlines() == [
        f"error: agent 'front': cannot listen on 127.0.0.1:{grpc_port}: Address already in use"
    ]

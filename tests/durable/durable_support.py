"""Support of the durable tests: agents served in-process on a task store, and clients.

Built on the A2A tests' helpers (the scripted runner, the official SDK client); everything
is real: the a2a-sdk server stack on uvicorn, SQLite files and a PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, ListTasksRequest, Task
from a2a.utils.constants import TransportProtocol
from tests.a2a.a2a_support import STEP, ScriptRunner, Served, free_port
from tests.deadlines import COLD_START
from tests.fast_path import fast_path_options

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.plugins.a2a.server.stores.endpoint import build_task_stores
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest, Endpoint, TaskStoreOptions
from mas.runtime.turns import ArtifactEmitted, TextDelta, TurnEnded, TurnEvent, TurnInput


@dataclass
class QuietRunner(ScriptRunner):
    """The A2A tests' runner plus ``late GATE TEXT``: waits for the gate, then emits one
    artifact and ends ``completed`` with TEXT (no streamed text); and ``hold GATE TEXT``:
    streams TEXT, then waits for the gate and ends ``completed`` with TEXT."""

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        command, _, rest = turn.text.partition(" ")
        if command == "hold":
            gate, _, text = rest.partition(" ")
            yield TextDelta(text)
            self.started[gate].set()
            await self.gates[gate].wait()
            yield TurnEnded("completed", text=text)
            return
        if command != "late":
            async for event in super().run(turn):
                yield event
            return
        self.seen.append(turn)
        gate, _, text = rest.partition(" ")
        self.started[gate].set()
        await self.gates[gate].wait()
        self.history[turn.session_id].append(turn.text)
        yield ArtifactEmitted("text", "late.txt", text=f"late: {text}")
        yield TurnEnded("completed", text=text)


__all__ = [
    "START",
    "STEP",
    "QuietRunner",
    "ServeProcess",
    "client_for",
    "get_task",
    "list_tasks",
    "serve_command",
    "serve_on_store",
    "serve_process",
    "sql_endpoint",
]


def sql_endpoint(port: int, url: str, **caps: bool) -> Endpoint:
    # The tests' push receivers listen on loopback, which the default push policy refuses;
    # they attach push configs to stored tasks without auth (refused by default: security.md).
    return Endpoint(
        url=f"http://127.0.0.1:{port}",
        usage="deploy",
        a2a=fast_path_options(
            {
                "capabilities": caps,
                "task_store": {"type": "sql", "url": url},
                "push": {"allow_private": True, "allow_anonymous_create": True},
            }
        ),
    )


@contextlib.asynccontextmanager
async def serve_on_store(
    url: str,
    *,
    runner: ScriptRunner | None = None,
    port: int | None = None,
    agent_id: str = "scripted",
    heartbeat: float = 5.0,
    lease: float = 20.0,
    env: dict[str, str] | None = None,
    options: dict[str, Any] | None = None,
    fast_send: bool | None = None,
    drain_timeout: float = 2.0,
    **caps: bool,
) -> AsyncIterator[Served]:
    """One scripted agent on ``url``'s task store (one replica when several share it).

    ``drain_timeout``: how long the exposure's stop waits for this replica's running turns.
    On leaving, the runner's gates open, then the exposure stops (a test may have stopped
    it already) and the mailbox closes.
    """
    runner = runner or QuietRunner()
    mailbox = SessionTurnMailbox(runner)
    port = port or free_port()
    endpoint = sql_endpoint(port, url, **caps)
    store_options = TaskStoreOptions.model_validate(options or {"type": "sql", "url": url})
    stores = build_task_stores(
        agent_id,
        store_options,
        push=endpoint.a2a.capabilities.pushNotifications,
        env=env or {},
        heartbeat=heartbeat,
        lease=lease,
        event_poll=0.05,
    )
    exposure = A2AExposure(
        agent_id=agent_id,
        manifest=AgentManifest(),
        endpoint=endpoint,
        mailbox=mailbox,
        drain_timeout=drain_timeout,
        message_grace=0.0,  # always a task: these tests are about tasks
        task_stores=stores,
        fast_send=fast_send,
    )
    await exposure.start()
    try:
        yield Served(exposure, runner, mailbox, exposure.url)
    finally:
        for gate in list(runner.gates.values()):
            gate.set()
        await exposure.aclose()
        await mailbox.aclose()


async def get_task(client: Client, task_id: str) -> Task:
    return await client.get_task(GetTaskRequest(id=task_id))


async def list_tasks(client: Client) -> list[Task]:
    request = ListTasksRequest(include_artifacts=True)
    return list((await client.list_tasks(request)).tasks)


@contextlib.asynccontextmanager
async def client_for(url: str, *, streaming: bool = False) -> AsyncIterator[Client]:
    """The official SDK client (JSON-RPC) of the agent at ``url``."""
    async with httpx.AsyncClient(timeout=STEP) as http:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=[TransportProtocol.JSONRPC.value],
        )
        client = await ClientFactory(config).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


START = COLD_START


def serve_command(app: Path, agent: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mas.ctl.cli",
        "serve",
        "-f",
        str(app),
        "--agent",
        agent,
        "--no-control",
        "--drain-timeout",
        "2",
    ]


@dataclass
class ServeProcess:
    """``mas-ctl serve`` as a real subprocess; ``line`` is its ready line."""

    process: asyncio.subprocess.Process
    line: str

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)


@contextlib.asynccontextmanager
async def serve_process(app: Path, agent: str, env: dict[str, str]) -> AsyncIterator[ServeProcess]:
    process = await asyncio.create_subprocess_exec(
        *serve_command(app, agent),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        async with asyncio.timeout(START):
            line = (await process.stdout.readline()).decode().strip()
        if not line.startswith("serving "):
            async with asyncio.timeout(START):
                err = (await process.stderr.read()).decode()
            raise AssertionError(f"serve did not start: {err[-3000:]}")
        yield ServeProcess(process, line)
    finally:
        if process.returncode is None:
            process.kill()
        async with asyncio.timeout(START):
            await process.wait()

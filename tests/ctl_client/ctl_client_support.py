"""Support of the ``mas-ctl`` client tests: our own agent served by ``mas-ctl serve``, a bare
a2a-sdk agent on loopback, and ``mas-ctl`` client processes whose output is read as it comes.

Every wait is on something observable (the ready line, a line of output, a task's state as
the agent reports it), with a deadline; every port is one the OS says is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Task, TaskState
from tests.deadlines import COLD_START
from tests.fast_path import fast_path_options
from tests.ports import free_port
from tests.process_lines import wait_for_line
from tests.session_modes.session_modes_support import MasCtl, application, scripted, write_app

STEP = 20.0  # the longest an awaited step other than a cold start may take
TRANSPORTS = ("jsonrpc", "rest", "grpc")
TOKEN = "s3cret-bearer-token-for-tests"  # never to be seen in any output
API_KEY = "s3cret-api-key-for-tests"


def desk_rules(release: Path) -> list[dict[str, Any]]:
    """The scripted desk: a delegation, a question, artifacts of each kind, a held story."""
    return [
        {
            "match": "^ask helper (?P<q>.+)",
            "delegate": {"to": "helper", "message": "{q}"},
            "reply": "helper said: {result}",
        },
        {"match": "^book", "reply": "Sure.", "ask": "Which day?"},
        {"match": "^(mon|tues|wednes|thurs|fri)day$", "reply": "Booked for {input} ({question})"},
        {
            "match": "^files",
            "artifacts": [
                {"kind": "text", "name": "notes", "text": "the notes"},
                {"kind": "data", "name": "facts", "data": {"count": 3, "ok": True}},
                {
                    "kind": "file",
                    "name": "../../escape/report.bin",
                    "content_base64": "aGVsbG8gZmlsZQ==",  # "hello file"
                    "media_type": "application/octet-stream",
                },
            ],
            "reply": "here are the files",
            "usage": {"input": 120, "output": 30},  # tokens, in the task's metadata
        },
        {
            "match": "^story",
            "chunks": ["one ", "two ", "three"],
            "release_file": str(release),
        },
    ]


@dataclass
class OurAgent:
    """``mas-ctl serve`` of the scripted desk."""

    url: str
    grpc_port: int
    release: Path  # create it to let a held story finish
    process: subprocess.Popen[bytes]


def desk_document(
    port: int, grpc_port: int, release: Path, *, auth: bool, a2a_auth: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Application: desk (deployed, delegating to an in-process helper); ``a2a_auth``
    replaces the bearer and API key schemes that ``auth`` gives."""
    a2a: dict[str, Any] = {"grpc_port": grpc_port}
    if a2a_auth is not None:
        a2a["auth"] = a2a_auth
    elif auth:
        a2a["auth"] = {
            "schemes": [
                {"type": "bearer", "value_env": "CTL_TEST_TOKEN"},
                {"type": "api_key", "name": "X-API-Key", "value_env": "CTL_TEST_API_KEY"},
            ]
        }
    return application(
        {
            "desk": {"delegates_to": ["helper"], "model": scripted(*desk_rules(release))},
            "helper": {"model": scripted(default="helper did: {input}")},
        },
        {
            "desk": {
                "url": f"http://127.0.0.1:{port}",
                "usage": "deploy",
                "a2a": fast_path_options(a2a),
            }
        },
    )


def environment(workdir: Path) -> dict[str, str]:
    """A child's environment: a private control directory, no credentials of the caller's."""
    env = {**os.environ, "MAS_CONTROL_DIR": str(workdir / "control"), "PYTHONUNBUFFERED": "1"}
    for name in ("MAS_DEBUG", "MAS_CTL_TOKEN", "MAS_CTL_TOKEN_FILE", "MAS_CTL_CACERT"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def serve_desk(
    workdir: Path, *, auth: bool = False, a2a_auth: dict[str, Any] | None = None
) -> Iterator[OurAgent]:
    """Our agent served by a real ``mas-ctl serve`` until the block ends (its ready line
    awaited with a deadline)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    release = workdir / "story.release"
    document = desk_document(port, grpc_port, release, auth=auth, a2a_auth=a2a_auth)
    app = write_app(workdir / "desk.yaml", document)
    env = {**environment(workdir), "CTL_TEST_TOKEN": TOKEN, "CTL_TEST_API_KEY": API_KEY}
    process = subprocess.Popen(
        [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app), "--agent", "desk"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        line = wait_for_line(process, "serving ", COLD_START, "mas-ctl serve")
        assert line.startswith("serving desk:"), line
        yield OurAgent(f"http://127.0.0.1:{port}", grpc_port, release, process)
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def client(
    workdir: Path, *args: str, stdin: bool = False, env: dict[str, str] | None = None
) -> MasCtl:
    """Start ``mas-ctl ARGS`` (a client command)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mas.ctl.cli",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**environment(workdir), **(env or {})},
    )
    return MasCtl(process)


async def run(workdir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``mas-ctl ARGS`` to its end: (exit code, stdout, stderr)."""
    started = await client(workdir, *args, env=env)
    try:
        code = await started.finish(COLD_START)
    finally:
        await started.close()
    return code, started.out, started.err


async def task_state(url: str, task_id: str, headers: dict[str, str] | None = None) -> Task:
    """The task as the agent reports it (GetTask with the official client, JSON-RPC)."""
    async with httpx.AsyncClient(timeout=STEP, headers=headers) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        sdk = await ClientFactory(config).create_from_url(url)
        try:
            return await sdk.get_task(GetTaskRequest(id=task_id))
        finally:
            await sdk.close()


async def wait_state(url: str, task_id: str, state: TaskState) -> Task:
    """Wait (at most STEP) until the agent reports the task in ``state``."""
    async with asyncio.timeout(STEP):
        while True:
            task = await task_state(url, task_id)
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)


def field_after(text: str, marker: str) -> str:
    """The word after ``marker`` in ``text`` (a task or context id the client printed)."""
    assert marker in text, f"no {marker!r} in {text!r}"
    return text.split(marker, 1)[1].split(maxsplit=1)[0].rstrip(":;,")

"""Support of the bad-input tests: a real served echo agent on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.ports import free_port
from tests.security.served_process import app_document

from library_ioa.plugins.a2a.exposure import A2AExposure
from mas.ctl.session.exposure import bind_listeners
from mas.ctl.session.host import RuntimeHost
from mas.infra.wiring import wire
from mas.runtime.registry import default_registry

LIMIT = 64 * 1024  # the served agent's a2a.max_body_bytes
DEPTH = 64  # RequestLimits' default nesting limit
V1 = {"A2A-Version": "1.0"}
JSON = {"Content-Type": "application/json", **V1}
STEP = 10.0
PROTOCOL_MARKS = [
    pytest.mark.timeout(60),
    pytest.mark.integration,
    pytest.mark.usefixtures("server_log"),
]


def user_message(text: str = "hello") -> dict[str, Any]:
    """A 1.0 user message as JSON."""
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}


def send_message(text: str = "hello", rid: Any = 1) -> dict[str, Any]:
    """A JSON-RPC 1.0 ``SendMessage`` request of ``text``."""
    params = {"message": user_message(text)}
    return {"jsonrpc": "2.0", "id": rid, "method": "SendMessage", "params": params}


@dataclass
class Agent:
    """One served agent: its exposure, base URL and gRPC address."""

    exposure: A2AExposure
    url: str
    grpc: str


def echo_document(port: int, grpc_port: int, **a2a: Any) -> dict[str, Any]:
    endpoint = {"url": f"http://127.0.0.1:{port}", "usage": "deploy", "a2a": a2a}
    endpoint["a2a"].setdefault("grpc_port", grpc_port)
    return app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint})


@contextlib.asynccontextmanager
async def serve_echo(**a2a: Any) -> AsyncIterator[Agent]:
    """Serve the echo agent (JSON-RPC, HTTP+JSON, gRPC) the way mas-ctl serve does."""
    wired = wire(echo_document(free_port(), free_port(), **a2a), default_registry().known_plugins())
    host = RuntimeHost.build(wired, ["echo"])
    listeners = await bind_listeners(wired, host, agents=["echo"], grpc=True, drain_timeout=1)
    exposure: Any = listeners.get("echo").exposure
    try:
        yield Agent(exposure, exposure.url, f"127.0.0.1:{exposure.grpc_port}")
    finally:
        await listeners.aclose()
        await host.aclose()


async def exchange(agent: Agent, request: bytes) -> bytes:
    """Write ``request`` on a fresh connection to ``agent``; every byte read until it closes."""
    host, port = agent.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(STEP):
            return await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()

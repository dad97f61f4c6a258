"""Fixtures of the MCP tests: a leaked-task check, a control directory, a tool server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.mcp.mcp_servers import ToolServer


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running behind it."""
    before = set(asyncio.all_tasks())
    yield
    for _ in range(5):  # let finished tasks be reaped; a bounded number of loop turns
        await asyncio.sleep(0)
    leaked = [
        t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()
    ]
    for task in leaked:
        task.cancel()
    assert not leaked, f"tasks leaked by the test: {[t.get_name() for t in leaked]}"


@pytest.fixture
def control_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private control directory (MAS_CONTROL_DIR), never the user's real one."""
    path = tmp_path / "control"
    monkeypatch.setenv("MAS_CONTROL_DIR", str(path))
    return path


@pytest.fixture
async def tool_server() -> AsyncIterator[ToolServer]:
    """The MCP test tool server (official SDK, streamable HTTP) on a free loopback port."""
    async with ToolServer() as server:
        yield server

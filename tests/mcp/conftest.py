"""Fixtures of the MCP tests: the runtime tests' leaked-task check and control directory,
and the MCP test tool server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.mcp.mcp_servers import ToolServer
from tests.runtime.conftest import control_dir, no_leaked_tasks

__all__ = ["control_dir", "no_leaked_tasks", "tool_server"]


@pytest.fixture
async def tool_server() -> AsyncIterator[ToolServer]:
    """The MCP test tool server (official SDK, streamable HTTP) on a free loopback port."""
    async with ToolServer() as server:
        yield server

"""An MCP tool server built with the official SDK, for the tests (streamable HTTP, loopback).

Tools: ``add`` (answers, with structured content), ``shout`` (text), ``boom`` (raises: a
tool error the model must read), ``hang`` (never answers until the server closes: the
client's timeout must fire), ``picture`` (an image), ``readme`` (an embedded text
resource). Every call is recorded in :attr:`ToolServer.calls`, and the request headers of
each ``shout`` call in :attr:`ToolServer.headers`.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, TextResourceContents

PNG_BYTES = b"\x89PNG\r\n\x1a\n test image"


class ToolServer:
    """Serve the test tools; ``url`` is ``http://127.0.0.1:<port>/mcp``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []
        self.headers: list[dict[str, str]] = []  # the request headers of each shout call
        self._release = asyncio.Event()
        self.mcp = MCPServer("test-tools", version="1.0.0", log_level="WARNING")
        self._add_tools()
        config = uvicorn.Config(
            self.mcp.streamable_http_app(),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            ws="none",
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    def _add_tools(self) -> None:
        calls, release, headers = self.calls, self._release, self.headers

        @self.mcp.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            calls.append(("add", {"a": a, "b": b}))
            return a + b

        @self.mcp.tool()
        def shout(text: str, ctx: Context) -> str:
            """The text in capitals."""
            calls.append(("shout", {"text": text}))
            headers.append(dict(ctx.headers or {}))
            return text.upper()

        @self.mcp.tool()
        def boom(why: str) -> str:
            """Always fails."""
            calls.append(("boom", {"why": why}))
            raise ToolError(f"boom: {why}")

        @self.mcp.tool()
        async def hang() -> str:
            """Never answers (until the server stops)."""
            calls.append(("hang", {}))
            await release.wait()
            return "released"

        @self.mcp.tool()
        def picture() -> Image:
            """A small PNG image."""
            calls.append(("picture", {}))
            return Image(data=PNG_BYTES, format="png")

        @self.mcp.tool()
        def readme() -> EmbeddedResource:
            """An embedded text resource."""
            calls.append(("readme", {}))
            return EmbeddedResource(
                resource=TextResourceContents(
                    uri="file:///readme.txt", mime_type="text/plain", text="read me first"
                )
            )

    @property
    def url(self) -> str:
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    async def __aenter__(self) -> ToolServer:
        self._task = asyncio.create_task(self._server.serve())
        async with asyncio.timeout(10):
            while not self._server.started:
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._release.set()
        self._server.should_exit = True
        if self._task is not None:
            await self._task

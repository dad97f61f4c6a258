"""An MCP tool server built with the official SDK, for the tests (streamable HTTP, loopback).

Tools: ``add`` (answers, with structured content), ``shout`` (text), ``boom`` (raises: a
tool error the model must read), ``hang`` (never answers until the server closes: the
client's timeout must fire), ``picture`` (an image), ``readme`` (an embedded text
resource). Every call is recorded in :attr:`ToolServer.calls`, and the request headers of
each ``shout`` call in :attr:`ToolServer.headers`.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, TextResourceContents
from tests.loopback_server import LoopbackServer

PNG_BYTES = b"\x89PNG\r\n\x1a\n test image"


class ToolServer(LoopbackServer):
    """Serve the test tools; ``url`` is ``http://127.0.0.1:<port>/mcp``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []
        self.headers: list[dict[str, str]] = []  # the request headers of each shout call
        self._release = asyncio.Event()
        self.mcp = MCPServer("test-tools", version="1.0.0", log_level="WARNING")
        self._add_tools()
        # the streamable HTTP app runs its session manager in its lifespan
        super().__init__(self.mcp.streamable_http_app(), lifespan="auto")

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
        return f"{self.root_url}/mcp"

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()  # a hanging call answers, so the server can stop
        await super().__aexit__(*exc)

"""An ASGI app served on 127.0.0.1 for a test, started and stopped as an async context manager.

The port is the OS's choice (``port=0``, bound by the server itself, so no other listener
can take it between choosing and binding); :attr:`LoopbackServer.root_url` names it once
the server has started.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Self

import uvicorn

START_DEADLINE = 10.0  # seconds the server may take to listen


class LoopbackServer:
    """Serve ``app`` on 127.0.0.1 from entering the context until leaving it."""

    def __init__(self, app: Any, *, lifespan: Literal["auto", "on", "off"] = "off") -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan, ws="none"
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._server.serve())
        async with asyncio.timeout(START_DEADLINE):
            while not self._server.started:
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>``, the port the server listens on."""
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

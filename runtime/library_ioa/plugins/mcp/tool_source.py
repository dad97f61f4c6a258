"""``MCPToolSource``: the tools of one MCP server over streamable HTTP (``tool_source.mcp``).

Built by the runtime host from a tool server endpoint (``protocol: mcp``, ``usage: use``):
``url`` is the server's streamable HTTP endpoint as written (e.g. ``http://host:port/mcp``),
``headers`` are sent on every request (Secret-backed values already resolved), ``timeout``
bounds each listing and each call as a whole, connection included. ``identity`` (set by the
host only for a server this Application deploys: an agent's MCP door) gives the caller's
current token, sent as the ``maslab-identity`` header of each listing and call.

Each listing and each call opens its own client session (``mcp.Client`` in its default
``auto`` mode: the 2026-07-28 protocol, or the initialize handshake of an older server) and
closes it, so a server that restarts, or dies between turns, costs nothing but that call.
Failures are :class:`~mas.runtime.boundary.tools.ToolSourceError`: ``unreachable`` (no
connection, an HTTP error), ``timeout`` (nothing within ``timeout``), ``protocol`` (an MCP
error answer, or a body that is not MCP); a tool's own error is a result with ``ok=False``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from library_ioa.plugins.mcp.results import outcome_of
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.boundary.delegation import ToolSpec
from mas.runtime.boundary.tools import ToolFailure, ToolOutcome, ToolSourceContract, ToolSourceError
from mas.runtime.errors import PluginConfigError

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


class MCPToolSource(ToolSourceContract):
    """One MCP server's tools (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str | None,
        server: str,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        identity: Callable[[], str | None] | None = None,
    ) -> None:
        if not url or not url.startswith(("http://", "https://")):
            raise PluginConfigError(
                f"tool_source 'mcp': spec.endpoints.{server}.url: {url!r} is not accepted; "
                "accepted: the server's streamable HTTP url, http(s)://host:port/path"
            )
        self.server = server
        self.url = url
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        self._headers = dict(headers or {})
        self.identity = identity

    def _where(self) -> str:
        return f"MCP server {self.server!r} at {self.url}"

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        headers = dict(self._headers)
        token = self.identity() if self.identity is not None else None
        if token:
            headers[IDENTITY_HEADER] = token
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(self.timeout))
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            yield client

    async def list_tools(self) -> list[ToolSpec]:
        """Every tool of the server (every page), within ``timeout``."""
        tools: list[ToolSpec] = []
        try:
            with anyio.fail_after(self.timeout):
                async with self._client() as client:
                    cursor: str | None = None
                    for _page in range(100):
                        listed = await client.list_tools(cursor=cursor)
                        tools += [
                            ToolSpec(
                                tool.name,
                                tool.description or tool.title or f"The tool {tool.name!r}.",
                                tool.input_schema or EMPTY_SCHEMA,
                            )
                            for tool in listed.tools
                        ]
                        cursor = listed.next_cursor
                        if cursor is None:
                            break
        except Exception as exc:
            raise self._failure("tools/list", exc) from None
        return tools

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run the tool ``name`` within ``timeout``."""
        try:
            with anyio.fail_after(self.timeout):
                async with self._client() as client:
                    result = await client.call_tool(name, dict(arguments))
        except Exception as exc:
            raise self._failure(f"tools/call {name}", exc) from None
        return outcome_of(name, result)

    def _failure(self, what: str, exc: Exception) -> ToolSourceError:
        reason, detail = _classify(exc)
        if reason == "timeout":
            detail = f"no answer within {self.timeout:g} s"
        logger.debug("%s: %s failed", self._where(), what, exc_info=exc)
        return ToolSourceError(reason, f"{self._where()}: {what}: {detail}")


def _classify(exc: BaseException) -> tuple[ToolFailure, str]:
    """The failure reason and a one-line detail, looking inside exception groups."""
    leaves = _leaves(exc)
    if any(isinstance(e, TimeoutError) for e in leaves):
        return "timeout", "timed out"
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError):
            return "unreachable", f"HTTP {leaf.response.status_code}"
        if isinstance(leaf, httpx2.TransportError):
            return "unreachable", f"cannot connect ({type(leaf).__name__}: {leaf})"
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            return "protocol", f"the server answered an error: {leaf}"
    first = leaves[0] if leaves else exc
    return "protocol", f"{type(first).__name__}: {str(first)[:200]}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out += _leaves(inner)
        return out
    return [exc]

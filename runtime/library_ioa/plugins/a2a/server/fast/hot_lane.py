"""The hot lane: plain 1.0 ``SendMessage`` and ``SendStreamingMessage`` posts answered in
front of the Starlette app.

Under load most requests an agent gets are one shape: a JSON-RPC POST of one 1.0
``SendMessage`` (or ``SendStreamingMessage``) that starts a new task. The fast route
(:mod:`~library_ioa.plugins.a2a.server.fast.jsonrpc`) answers it without the SDK's
dispatcher, but the request still went through four ASGI layers that change nothing for
it: :class:`~library_ioa.plugins.a2a.server.transport.corrections.HttpCorrections`,
:class:`~library_ioa.plugins.a2a.server.transport.limits.RequestLimits` (which parses the body once
more), and Starlette's error and exception middleware, router and request/response
wrappers (their share of the request: docs/performance.md, "Where the time goes").

:class:`HotLane` sits inside the tracing middleware and outside those four. With ``a2a.auth``
alone it sits inside ``HttpAuth``; with identities checked it sits in front of
:class:`~library_ioa.serving.callers.HttpCallers` and runs the caller check itself (its
``gate``) before it reads a body, so every request is authenticated as before and a hot one
crosses one layer fewer. It takes a request only when
every one of them would pass it through untouched:

- an HTTP ``POST`` to ``rpc_path`` whose ``Content-Type`` names JSON (``HttpCorrections``
  answers any other with its -32005 error) and with exactly one ``A2A-Version: 1.0``
  header (no over-long version for it to cut);
- a ``Content-Length`` of at most ``max_body_bytes`` (``RequestLimits`` refuses a larger
  body, and a chunked one is read by it);
- a body that is one JSON-RPC object with exactly ``jsonrpc`` ``"2.0"``, ``method`` (one of
  the two), a string or integer ``id`` and object ``params``, nested no deeper than
  ``RequestLimits`` allows (:func:`~library_ioa.plugins.a2a.server.fast.jsonrpc.hot_body`;
  orjson refuses what the stdlib parser would also refuse, and a few things it would
  accept, such as a lone surrogate escape: those take the long way);
- params the fast endpoint answers itself (it returns ``None`` for any it leaves to the
  SDK's dispatcher).

The lane then answers as the fast route would, with the credential headers redacted in
the call context as ``RequestLimits`` redacts them. Anything else goes down the usual
chain with the body already read replayed, so its answer is exactly what it was. A request
the lane takes and then fails on is an internal error as before (the endpoint shapes
handler errors; an error past that is uvicorn's 500, where Starlette's error middleware
gave the same 500).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import BaseRoute

from library_ioa.plugins.a2a.server.fast.jsonrpc import (
    HOT_VERSION,
    FastJsonRpcEndpoint,
    fast_endpoint,
    hot_body,
)
from library_ioa.plugins.a2a.server.transport.limits import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_DEPTH,
    depth_exceeds,
    is_json_media,
)
from library_ioa.serving.asgi import ASGIApp, Message, Receive, Scope, Send
from library_ioa.serving.auth import redact_credentials

if TYPE_CHECKING:
    from library_ioa.serving.callers import HttpCallers

__all__ = ["HotLane", "hot_lane"]

_VERSION = HOT_VERSION.encode()


def _plain_head(headers: list[tuple[bytes, bytes]], max_body_bytes: int) -> int | None:
    """The declared body length of a head the lane may take (module docstring), else ``None``."""
    length: int | None = None
    versions = types = 0
    json = False
    for key, value in headers:
        name = key.lower()
        if name == b"content-length":
            if length is not None or not value.isdigit():
                return None
            length = int(value)
        elif name == b"content-type":
            types += 1
            json = is_json_media(value.decode("latin-1"))
        elif name == b"a2a-version":
            versions += 1
            if value != _VERSION:
                return None
    if not json or types != 1 or versions != 1 or length is None or length > max_body_bytes:
        return None
    return length


class HotLane:
    """ASGI middleware: the hot JSON-RPC requests answered here, the rest passed on."""

    def __init__(
        self,
        app: ASGIApp,
        endpoint: FastJsonRpcEndpoint,
        *,
        rpc_path: str = "/",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        gate: HttpCallers | None = None,
    ) -> None:
        self.app = app
        self.gate = gate
        self.endpoint = endpoint
        self.rpc_path = rpc_path
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") != self.rpc_path
            or _plain_head(scope["headers"], self.max_body_bytes) is None
        ):
            await self.app(scope, receive, send)
            return
        if self.gate is not None and not await self.gate.admit(scope, send):
            return  # refused: answered, and no body read
        body, message = await self._read(receive)
        if message is None:
            hot = self._hot(body)
            if hot is not None:
                scope = redact_credentials(scope)  # as RequestLimits hands it on
                answer = await self.endpoint.answer(Request(scope, receive), *hot)
                if answer is not None:
                    await answer(scope, receive, send)
                    return
        await self.app(scope, _replay(body, message, receive), send)

    @staticmethod
    async def _read(receive: Receive) -> tuple[bytes, Message | None]:
        """The body (uvicorn gives no more than the declared length), and the message that
        ended it early (a disconnect), if any."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks), message
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                return b"".join(chunks), None

    def _hot(self, body: bytes) -> tuple[str | int, str, dict[str, Any]] | None:
        hot = hot_body(body)
        if (
            hot is not None
            and body.count(b"{") + body.count(b"[") > self.max_depth
            and depth_exceeds(hot[2], self.max_depth - 1)
        ):
            return None  # RequestLimits refuses it
        return hot


def _replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
    """``receive`` that gives the body read so far (then ``last``, if any) before the rest."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": last is not None}]
    if last is not None:
        pending.append(last)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


def hot_lane(
    app: ASGIApp,
    routes: Sequence[BaseRoute],
    *,
    rpc_path: str = "/",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    gate: HttpCallers | None = None,
) -> ASGIApp:
    """``app`` behind a :class:`HotLane` when ``routes`` hold the fast JSON-RPC endpoint.
    ``gate``: the caller check ``app`` begins with, which the lane then runs itself (the
    requests it admits pass the middleware untouched), so a hot request crosses one layer
    fewer."""
    endpoint = fast_endpoint(routes)
    if endpoint is None:
        return app
    return HotLane(app, endpoint, rpc_path=rpc_path, max_body_bytes=max_body_bytes, gate=gate)

"""A 0.3 HTTP+JSON stream that fails before its first event is answered as the error it is.

The SDK's 1.0 REST routes fetch a stream's first event before they start the event stream,
so a request whose params fail validation gets its HTTP error (400 ``INVALID_ARGUMENT``,
404 ``NOT_FOUND``...). Its 0.3 adapter (``REST03Adapter``, a2a-sdk 1.3) starts the stream
first: the same request got ``200 text/event-stream``, a traceback in the log, and a
connection cut in the middle of the body.

:class:`EarlyStreamErrors` holds back the response start of the 0.3 stream routes
(``<rest>/v1/message:stream`` and ``<rest>/v1/tasks/{id}:subscribe``) until the first body
chunk. An A2A error (or protobuf's parse error) raised before that chunk is answered with
the SDK's own REST error body and status (``build_rest_error_payload``), logged as one
warning line; once a chunk has gone out, errors go on as the SDK handles them. Only those
routes pass through it; nothing else is held. The SDK's stream wrapper logs a traceback for
such an error ("Unknown streaming error occurred"); a filter on its logger makes that one
warning line too, as :mod:`.limits` does for the JSON-RPC dispatcher's.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

_STREAMS = (":stream", ":subscribe")
SDK_ERROR_LOGGER = "a2a.utils.error_handlers"


class _RequestErrorTraceback(logging.Filter):
    """The SDK's traceback for a client's request error, as one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and request_error(exc) is not None:
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc}".replace("%", "%%")
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_QUIET = _RequestErrorTraceback()


def request_error(exc: BaseException) -> Exception | None:
    """The A2A (or parse) error inside ``exc``, unwrapping exception groups; else None."""
    if isinstance(exc, A2AError | ParseError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = request_error(inner)
            if found is not None:
                return found
    return None


class EarlyStreamErrors:
    """ASGI middleware for the 0.3 REST stream routes under ``rest_prefix`` (module doc)."""

    def __init__(self, app: ASGIApp, rest_prefix: str) -> None:
        self.app = app
        self._prefix = rest_prefix.rstrip("/") + "/v1/"
        sdk = logging.getLogger(SDK_ERROR_LOGGER)
        if _QUIET not in sdk.filters:
            sdk.addFilter(_QUIET)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path.startswith(self._prefix) and path.endswith(_STREAMS)):
            await self.app(scope, receive, send)
            return
        held: list[Message] = []
        sent = False

        async def hold(message: Message) -> None:
            nonlocal sent
            if not sent and message["type"] == "http.response.start":
                held.append(message)
                return
            if not sent and message["type"] == "http.response.body":
                sent = True
                for start in held:
                    await send(start)
            await send(message)

        try:
            await self.app(scope, receive, hold)
        except Exception as exc:
            error = request_error(exc)
            if sent or error is None:
                raise
            await self._answer(error, scope, receive, send)
            return
        if not sent:  # a response with no body at all: let its start through
            for start in held:
                await send(start)

    @staticmethod
    async def _answer(error: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        payload: dict[str, Any] = build_rest_error_payload(error)
        status = int(payload.get("error", {}).get("code", 500))
        logger.warning(
            "%s %s refused before its stream started: %s",
            scope.get("method"),
            scope.get("path"),
            getattr(error, "message", None) or error,
        )
        await JSONResponse(payload, status_code=status)(scope, receive, send)

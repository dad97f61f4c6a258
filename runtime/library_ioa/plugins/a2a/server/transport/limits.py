"""Request limits in front of the A2A server: bad input is refused before the SDK sees it.

:class:`RequestLimits` is ASGI middleware around the exposure's app. For every HTTP request
with a body it

- refuses a body larger than ``max_body_bytes`` with HTTP 413, early: on its
  ``Content-Length`` before reading anything, else as soon as the bytes read pass the limit
  (a chunked upload is never buffered beyond the limit);
- on the JSON-RPC path (POST ``rpc_path``): answers invalid UTF-8 and malformed JSON with
  -32700 (ParseError), nesting deeper than ``max_depth`` and a broken envelope (not an
  object, ``jsonrpc`` not ``"2.0"``, no ``id`` or one that is not a string, an integer or
  null, a ``method`` that is not a string) with -32600 (InvalidRequest), and ``params``
  that are not an object, or the params of a 0.3 method its model refuses
  (:mod:`.compat_params`), or a ``ListTasks`` ``status`` that names no task state (the SDK
  would list every task), with -32602 (InvalidParams), each as a JSON-RPC error body with
  HTTP 200
  (HTTP 413 for an oversize body); a 0.3 method sent with an ``A2A-Version`` the 0.3
  methods do not serve (``1.0``, ``9.9``) with -32009 (VersionNotSupportedError, in the
  SDK's error shape), which the SDK's 0.3 adapter would answer with -32603
  (:mod:`library_ioa.plugins.a2a.server.transport.corrections`);
- under ``rest_prefix`` (HTTP+JSON): answers a non-JSON Content-Type with 415
  (ContentTypeNotSupportedError), before reading when a ``Content-Length`` announces a body,
  else (a chunked body) once the body is read, within the size limit; invalid UTF-8,
  malformed JSON and too deep nesting with 400 (InvalidRequestError), in the SDK's REST
  error shape (``{"error": {code, status, message, details}}``).

A request without an ``id`` is a JSON-RPC notification: the server would run it and send
no response. Every A2A method exists for its answer, though (a ``SendMessage`` run unheard
starts a turn whose task id nobody learns; a ``GetTask`` unheard does nothing at all), and
A2A defines no notification. So a notification is refused before it runs, with -32600 and
``"id": null``, rather than run in silence: the client learns at once that nothing was
executed. The hot lane never takes one (it needs an ``id``), so every JSON-RPC path
answers it the same way.

Credential headers (``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``X-API-Key``)
reach the SDK as ``[redacted]``: it logs every request's headers at DEBUG.
Everything else (methods, params, the versions of 1.0 methods) stays the SDK's to answer.
The SDK logs a traceback for a request whose params do not parse;
:func:`quiet_sdk_parse_errors` turns those records into one line, since a client's bad
input is not a server fault.

gRPC: :func:`grpc_options` caps the received message at the same limit (RESOURCE_EXHAUSTED
beyond it, from grpc itself).

Cost on a good request: the body is buffered once (it would be anyway), decoded and parsed
once more than the SDK does; the depth walk only runs when the body has more than
``max_depth`` brackets.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from a2a.server.request_handlers import build_error_response
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
)

from library_ioa.errors import LibraryError
from library_ioa.plugins.a2a.server.list_pages import status_refusal
from library_ioa.plugins.a2a.server.transport.compat_params import is_v03_method, v03_params_refusal
from library_ioa.plugins.a2a.server.transport.corrections import serves_0_3, v03_version_refusal
from library_ioa.serving.asgi import ASGIApp, Message, Receive, Scope, Send
from library_ioa.serving.auth import redact_credentials
from library_ioa.serving.json_answers import send_json

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 64
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
SDK_JSONRPC_LOGGER = "a2a.server.routes.jsonrpc_dispatcher"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_VERSION = b"a2a-version"
NOTIFICATION_REFUSED = (
    "'id' is required: every A2A method has an answer, so a JSON-RPC notification "
    "(a request without an id) is not accepted"
)


class _ClientGone(LibraryError):
    """The client went away (or was closed: a body timeout) before its body was complete."""


class BadBody(LibraryError):
    """A refused body: ``code`` (JSON-RPC), ``http_status`` and the message for the client."""

    def __init__(self, code: int, message: str, http_status: int = 200) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status


def is_json_media(content_type: str) -> bool:
    """Whether a Content-Type names JSON (``application/json`` or a ``+json`` type)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def grpc_options(max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> list[tuple[str, Any]]:
    """``grpc.aio.server`` options capping the size of one received message."""
    return [("grpc.max_receive_message_length", max_body_bytes)]


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (iterative, no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json(body: bytes, max_depth: int) -> Any:
    """The JSON value of ``body``; :class:`BadBody` for bad UTF-8, bad JSON or deep nesting."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBody(PARSE_ERROR, f"the body is not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadBody(INVALID_REQUEST, f"JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, and integers too long to convert
        raise BadBody(PARSE_ERROR, f"the body is not valid JSON: {exc}") from None
    if (
        isinstance(value, dict | list)
        and body.count(b"{") + body.count(b"[") > max_depth
        and depth_exceeds(value, max_depth)
    ):
        raise BadBody(INVALID_REQUEST, f"JSON nested deeper than {max_depth} levels")
    return value


def check_envelope(value: Any) -> None:
    """Refuse a JSON-RPC request the SDK would choke on (batches are the SDK's to refuse)."""
    if isinstance(value, list):
        return
    if not isinstance(value, dict):
        raise BadBody(
            INVALID_REQUEST, f"a JSON-RPC request is an object, not {type(value).__name__}"
        )
    if value.get("jsonrpc") != "2.0":
        raise BadBody(INVALID_REQUEST, "'jsonrpc' must be exactly \"2.0\"")
    if "id" not in value:
        raise BadBody(INVALID_REQUEST, NOTIFICATION_REFUSED)
    rid = value["id"]
    if isinstance(rid, bool) or not isinstance(rid, str | int | None):
        raise BadBody(INVALID_REQUEST, "'id' must be a string, an integer or null")
    if not isinstance(value.get("method"), str):
        raise BadBody(INVALID_REQUEST, "'method' must be a string")
    if "params" in value and not isinstance(value["params"], dict):
        raise BadBody(INVALID_PARAMS, "'params' must be an object")


def _list_status_refusal(value: dict[str, Any]) -> str | None:
    """Why a ``ListTasks`` ``status`` is refused (the SDK would ignore an unknown name)."""
    params = value.get("params")
    if value.get("method") != "ListTasks" or not isinstance(params, dict):
        return None
    return status_refusal(params["status"]) if "status" in params else None


def _request_id(value: Any) -> str | int | None:
    rid = value.get("id") if isinstance(value, dict) else None
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


class _SdkParseTraceback(logging.Filter):
    """Turn the SDK's traceback for an unparseable client request into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.exc_info
            and record.levelno >= logging.ERROR
            and isinstance(record.msg, str)
            and "request" in record.msg
        ):
            exc = record.exc_info[1]
            record.msg = f"{record.msg}: {type(exc).__name__}: {exc}".replace("%", "%%")
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_QUIET = _SdkParseTraceback()


def quiet_sdk_parse_errors() -> None:
    """Install the filter on the SDK's JSON-RPC logger (idempotent)."""
    sdk = logging.getLogger(SDK_JSONRPC_LOGGER)
    if _QUIET not in sdk.filters:
        sdk.addFilter(_QUIET)


def _media_refusal(headers: dict[bytes, bytes]) -> BadBody | None:
    """The 415 of an HTTP+JSON request whose Content-Type is not JSON, else ``None``."""
    content_type = headers.get(b"content-type", b"").decode("latin-1")
    if is_json_media(content_type):
        return None
    return BadBody(
        INVALID_REQUEST,
        f"Content-Type {content_type or '(none)'!r} is not supported; send application/json",
        415,
    )


class RequestLimits:
    """ASGI middleware enforcing the limits above on ``rpc_path`` and ``rest_prefix``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        rpc_path: str = "/",
        rest_prefix: str = "/a2a/rest",
        compat_0_3: bool = True,
    ) -> None:
        if max_body_bytes < 1 or max_depth < 1:
            raise ValueError(
                f"max_body_bytes {max_body_bytes!r} / max_depth {max_depth!r}: must be >= 1"
            )
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth
        self.rpc_path = rpc_path
        self.rest_prefix = rest_prefix.rstrip("/")
        self.compat_0_3 = compat_0_3  # the 0.3 methods are served: their params are checked
        quiet_sdk_parse_errors()

    def _kind(self, scope: Scope) -> str:
        path: str = scope.get("path", "")
        if path == self.rpc_path and scope.get("method") == "POST":
            return "rpc"
        if path == self.rest_prefix or path.startswith(self.rest_prefix + "/"):
            return "rest"
        return "other"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = redact_credentials(scope)  # the SDK logs request headers at DEBUG
        if scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        kind = self._kind(scope)
        headers = {bytes(k).lower(): bytes(v) for k, v in scope.get("headers", ())}
        refusal = _media_refusal(headers) if kind == "rest" else None
        if refusal is not None and headers.get(b"content-length", b"0") != b"0":
            await self._refuse(kind, send, refusal, None)  # refused before reading the body
            return
        value: Any = None
        try:
            body = await self._read(headers, receive)
            if refusal is not None and body:  # a body without a Content-Length (chunked)
                raise refusal
            if kind == "rpc":
                value = parse_json(body, self.max_depth)
                check_envelope(value)
                why = _list_status_refusal(value) if isinstance(value, dict) else None
                if why is not None:
                    invalid = InvalidParamsError(message=why)
                    await _answer_rpc(send, build_error_response(_request_id(value), invalid))
                    return
                if self.compat_0_3 and isinstance(value, dict):
                    why = v03_params_refusal(value)
                    if why is not None:
                        raise BadBody(INVALID_PARAMS, why)
                    version = headers.get(_VERSION, b"").decode("latin-1")
                    if is_v03_method(value) and not serves_0_3(version):
                        error = v03_version_refusal(version, value["method"])
                        await _answer_rpc(send, build_error_response(_request_id(value), error))
                        return
            elif kind == "rest" and body:
                value = parse_json(body, self.max_depth)
        except BadBody as refusal:
            await self._refuse(kind, send, refusal, _request_id(value))
            return
        except _ClientGone:
            return  # never run a request whose body did not all arrive
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, headers: dict[bytes, bytes], receive: Receive) -> bytes:
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise self._too_large(int(declared))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large(None)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _too_large(self, declared: int | None) -> BadBody:
        got = f"{declared} bytes" if declared is not None else "more"
        logger.info("request body refused: %s, limit %d bytes", got, self.max_body_bytes)
        return BadBody(
            INVALID_REQUEST,
            f"Payload too large: {got}; the limit is {self.max_body_bytes} bytes",
            413,
        )

    async def _refuse(self, kind: str, send: Send, refusal: BadBody, rid: Any) -> None:
        logger.info("request refused (%d): %s", refusal.http_status, refusal.message)
        if kind == "rpc":
            payload: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": refusal.code, "message": refusal.message},
            }
        else:
            error: A2AError = (
                ContentTypeNotSupportedError(refusal.message)
                if refusal.http_status == 415
                else InvalidRequestError(refusal.message)
            )
            payload = build_rest_error_payload(error)
        status = refusal.http_status
        if kind != "rpc":
            status = 400 if status == 200 else status
            payload["error"]["code"] = status
        close = [(b"connection", b"close")] if refusal.http_status == 413 else []
        await send_json(send, status, payload, close)


async def _answer_rpc(send: Send, payload: dict[str, Any]) -> None:
    """A JSON-RPC error ``payload`` as the SDK's dispatcher sends one (HTTP 200)."""
    logger.info("request refused: %s", payload["error"]["message"])
    await send_json(send, 200, payload)

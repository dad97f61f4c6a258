"""Corrections to what a bare a2a-sdk 1.3 server puts on the wire, where A2A 1.0 says otherwise.

The official TCK (``compliance/README.md``) shows four places where the SDK's server parts
disagree with the A2A 1.0 specification. Each correction here is a thin wrapper around the SDK's
own app or server, so the SDK still does all the protocol work:

* HTTP+JSON responses carry ``application/a2a+json``; 11.1 says ``application/json`` for
  requests and responses. :class:`HttpCorrections` (``rest_prefix``) relabels them.
* A JSON-RPC POST with a non-JSON Content-Type answers -32700 ParseError; 9.1 says requests
  are ``application/json`` and 5.4 maps a refused content type to ContentTypeNotSupportedError
  (-32005). :class:`HttpCorrections` (``rpc_path``) answers -32005.
* The gRPC handler never reads the ``a2a-version`` metadata, so a 99.0 client is served; 3.6.2
  says an unsupported version gets VersionNotSupportedError (UNIMPLEMENTED, 5.4).
  :class:`~library_ioa.plugins.a2a.server.transport.grpc_corrections.GrpcVersionCheck`
  refuses it, on the 1.0 service and on the 0.3 compatibility service alike (there a
  missing, empty or ``0.x`` version is served, :func:`serves_0_3`).
* The 0.3 JSON-RPC adapter refuses a version it does not serve (``1.0``, ``9.9``) with
  -32603 InternalError: its mapping to 0.3 error codes has no VersionNotSupportedError
  (-32009, new in 1.0), so it falls back to -32603. The client named a version the 0.3
  methods do not serve, so the protocol it asked for says -32009.
  ``server.transport.limits.RequestLimits`` answers such a request with :func:`v03_version_refusal`
  (-32009, the SDK's error shape) before the adapter sees it. The 0.3 REST adapter already
  answers the SDK's 400 ``VERSION_NOT_SUPPORTED``.
* An ``A2A-Version`` with a component past Python's 4,300-digit ``int()`` limit made the SDK's
  version check raise ``ValueError`` (-32603, HTTP 500, a traceback each time); 3.6.2 says an
  unsupported version gets VersionNotSupportedError. :class:`HttpCorrections` shortens a
  version longer than :data:`MAX_VERSION_CHARS` to a form that names its length (and is no
  version), so the SDK answers its own VersionNotSupportedError (-32009, HTTP 400), and
  :class:`GrpcVersionCheck` quotes at most that much of it in ``grpc-message``, which a
  client's metadata limit (8 KiB by default) must hold.
* HTTP+JSON ``ListTasks`` (``GET .../tasks``) parses its query with unknown values ignored, so
  ``status=BOGUS`` listed every task; JSON-RPC answers it -32602 and 3.1.4 lists tasks in that
  state only. :class:`HttpCorrections` (``rest_prefix``) answers 400 INVALID_ARGUMENT naming
  the accepted states.
* The AgentCard carries an ETag only; 8.6.1 says it SHOULD carry ``Cache-Control`` with a
  ``max-age`` and MAY carry ``Last-Modified``. :class:`HttpCorrections` (``card_path``) adds them.

Mounting (the exposure owns its app and server)::

    app = HttpCorrections(starlette_app, rpc_path="/", rest_prefix="/a2a/rest")
    uvicorn.Config(app, ...)
    grpc_server = grpc.aio.server(interceptors=[GrpcVersionCheck()])

Each correction is off the path of every request it does not concern: one prefix comparison.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterable
from email.utils import formatdate

from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, VERSION_HEADER
from a2a.utils.errors import VersionNotSupportedError
from packaging.version import InvalidVersion, Version

from library_ioa.plugins.a2a.server.list_pages import status_refusal
from library_ioa.serving.asgi import ASGIApp, Message, Receive, Scope, Send
from library_ioa.serving.json_answers import send_json

logger = logging.getLogger(__name__)

A2A_JSON = b"application/a2a+json"
CONTENT_TYPE_NOT_SUPPORTED = -32005
DEFAULT_CARD_MAX_AGE = 300
SUPPORTED_VERSIONS = ("1.0",)
MAX_VERSION_CHARS = 32  # "1.0", "0.3.1", ...: no real version comes near
_VERSION_KEY = VERSION_HEADER.lower().encode()
A2A_1_0_SERVICE = "lf.a2a.v1.A2AService"
A2A_0_3_SERVICE = "a2a.v1.A2AService"  # the 0.3 compatibility service


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def shown_version(version: str) -> str:
    """``version`` as quoted back to a client: a long one is cut and its length named."""
    if len(version) <= MAX_VERSION_CHARS:
        return version
    return f"{version[:MAX_VERSION_CHARS]}...({len(version)} characters)"


def serves_0_3(version: str) -> bool:
    """Whether the 0.3 adapters serve a request carrying ``version``: the SDK's own rule
    (``validate_version("0.3")``): a missing or empty version is 0.3, and any ``0.x`` is
    accepted (the major version decides)."""
    version = version.strip()
    if not version:
        return True
    if len(version) > MAX_VERSION_CHARS:
        return False
    try:
        return Version(version).major == 0
    except InvalidVersion:
        return False


def v03_version_refusal(version: str, method: str) -> VersionNotSupportedError:
    """The VersionNotSupportedError of a 0.3 JSON-RPC ``method`` sent with ``version``."""
    return VersionNotSupportedError(
        f"A2A-Version {shown_version(version)!r} is not supported by the 0.3 method "
        f"{method!r}; send A2A-Version 0.3 (or none) with the 0.3 method names, or "
        f"A2A-Version {', '.join(SUPPORTED_VERSIONS)} with the 1.0 names (SendMessage, ...)"
    )


def _bounded_version(scope: Scope) -> Scope:
    """``scope`` with every over-long ``A2A-Version`` value replaced by :func:`shown_version`."""
    headers = scope.get("headers", ())
    if not any(
        len(value) > MAX_VERSION_CHARS and bytes(key).lower() == _VERSION_KEY
        for key, value in headers
    ):
        return scope
    bounded = [
        (key, shown_version(bytes(value).decode("latin-1")).encode("latin-1"))
        if bytes(key).lower() == _VERSION_KEY
        else (key, value)
        for key, value in headers
    ]
    return {**scope, "headers": bounded}


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


class HttpCorrections:
    """ASGI middleware around the SDK's Starlette app (JSON-RPC, HTTP+JSON and the card).

    ``rpc_path``: the JSON-RPC endpoint; a POST there whose Content-Type is not JSON gets the
    JSON-RPC error -32005 (ContentTypeNotSupportedError) instead of a parse error.
    ``rest_prefix``: the HTTP+JSON routes; their ``application/a2a+json`` responses are
    relabelled ``application/json`` (``problem+json`` and event streams are left alone).
    ``card_path``: the AgentCard; ``Cache-Control: public, max-age=<card_max_age>`` and a
    ``Last-Modified`` (the time this middleware was built, i.e. when the card was published) are
    added unless the app already sent them. ``None`` turns a correction off.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        rpc_path: str | None = "/",
        rest_prefix: str | None = "/a2a/rest",
        card_path: str | None = AGENT_CARD_WELL_KNOWN_PATH,
        card_max_age: int = DEFAULT_CARD_MAX_AGE,
        published: float | None = None,
    ) -> None:
        if card_max_age < 0:
            raise ValueError(f"card_max_age: {card_max_age!r} is negative; use seconds >= 0")
        self.app = app
        self.rpc_path = rpc_path
        self.rest_prefix = rest_prefix.rstrip("/") if rest_prefix else None
        self.card_path = card_path
        self.card_headers = [
            (b"cache-control", f"public, max-age={card_max_age}".encode()),
            (b"last-modified", formatdate(published, usegmt=True).encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = _bounded_version(scope)
        path: str = scope.get("path", "")
        if self.card_path is not None and path == self.card_path:
            await self.app(scope, receive, self._add_card_headers(send))
        elif self.rest_prefix is not None and (
            path == self.rest_prefix or path.startswith(self.rest_prefix + "/")
        ):
            refusal = _unknown_status(scope) if path.endswith("/tasks") else None
            if refusal is not None:
                await _refuse_status(refusal, send)
                return
            await self.app(scope, receive, self._relabel_json(send))
        elif (
            self.rpc_path is not None
            and path == self.rpc_path
            and scope.get("method") == "POST"
            and not _is_json(_header(scope, b"content-type"))
        ):
            await self._refuse_content_type(scope, send)
        else:
            await self.app(scope, receive, send)

    def _add_card_headers(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {bytes(k).lower() for k, _ in message.get("headers", ())}
                extra = [(k, v) for k, v in self.card_headers if k not in present]
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        return wrapped

    @staticmethod
    def _relabel_json(send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: Iterable[tuple[bytes, bytes]] = message.get("headers", ())
                message["headers"] = [
                    (k, _relabel(v) if bytes(k).lower() == b"content-type" else v)
                    for k, v in headers
                ]
            await send(message)

        return wrapped

    @staticmethod
    async def _refuse_content_type(scope: Scope, send: Send) -> None:
        got = _header(scope, b"content-type") or "(none)"
        logger.info("JSON-RPC request with Content-Type %r refused", got)
        payload = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": CONTENT_TYPE_NOT_SUPPORTED,
                "message": f"Content-Type {got!r} is not supported; send application/json",
            },
        }
        await send_json(send, 200, payload)


def _unknown_status(scope: Scope) -> str | None:
    """Why a REST ``ListTasks`` ``status`` is refused (the SDK would ignore it), if it is."""
    if scope.get("method") != "GET":
        return None
    query = urllib.parse.parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    for value in query.get("status", ()):
        if (refusal := status_refusal(value)) is not None:
            return refusal
    return None


async def _refuse_status(message: str, send: Send) -> None:
    """400 INVALID_ARGUMENT, as JSON-RPC (-32602) and gRPC answer an unknown state."""
    payload = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": message}}
    await send_json(send, 400, payload)


def _relabel(value: bytes) -> bytes:
    media, sep, params = bytes(value).partition(b";")
    if media.strip().lower() == A2A_JSON:
        return b"application/json" + sep + params
    return bytes(value)

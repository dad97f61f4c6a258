"""The caller check on HTTP: every request but the public ones is admitted or refused by the
agent's :class:`~mas.runtime.identity.callers.CallerCheck` (the rules are there).

:class:`HttpCallers` (ASGI middleware, in place of :class:`~.auth.HttpAuth` when the agent
checks identities) reads the caller's token (``maslab-identity``) and, with ``a2a.auth``,
the credential headers; the ``a2a.auth`` scheme that matched goes to the check beside the
token. An admitted request runs as its principal (the ASGI ``user``: tasks and sessions
belong to it, :mod:`.principals`), with the caller on the request span
(:data:`mas.telemetry.tracing.MAS_CALLER`) and every credential header redacted.

A refusal is answered in the transport's form, never with a token's text:

- JSON-RPC (at ``rpc_path``): HTTP 401, 403 or 503 with a JSON-RPC error (code -32600,
  ``data``: ``reason`` and ``caller``);
- HTTP+JSON and the MCP door: the same status with the google.rpc error shape, status
  ``UNAUTHENTICATED``, ``PERMISSION_DENIED`` or ``UNAVAILABLE`` and an ``ErrorInfo`` whose
  ``reason`` is the check's reason.

A 401 carries a ``WWW-Authenticate`` challenge. The gRPC form is in :mod:`.grpc_callers`.

The hot path (:meth:`CallerCheck.quick`): a token admitted once is found by its sha256,
and an open connection keeps the token it presented last in its own state
(:data:`~library_ioa.serving.http_guard.CONNECTION_STATE`, gone with the connection), so
its next request presenting the same bytes is admitted without the hash. A hot JSON-RPC
send is checked by the hot lane in front of the middleware (:meth:`HttpCallers.admit`), so
it crosses no layer of its own.

With ``oidc`` schemes in ``a2a.auth`` the check also gets the ``Authorization`` bearer token
(:func:`endpoint_check`), and an endpoint that has them is served through a caller check
even in a local run (no cluster identity): the OIDC verification is the check's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from library_ioa.serving.asgi import ASGIApp, Receive, Scope, Send
from library_ioa.serving.auth import (
    CALLER_CHECKED,
    CREDENTIAL_HEADERS,
    PUBLIC_PATHS,
    REDACTED,
    UNAUTHENTICATED_RPC_CODE,
    Authenticator,
    scheme_ids,
)
from library_ioa.serving.http_guard import CONNECTION_STATE
from library_ioa.serving.json_answers import send_json
from library_ioa.serving.principals import Principal
from mas.infra.identity import IDENTITY_HEADER, endpoint_admission
from mas.runtime.identity.callers import CallerCheck, Decision
from mas.telemetry import tracing

if TYPE_CHECKING:
    from mas.infra.models import Endpoint

IDENTITY_KEY = IDENTITY_HEADER.encode("latin-1")
AUTHORIZATION_KEY = b"authorization"
MAX_PRINCIPALS = 1024
BEARER_PREFIX = "bearer "


def bearer_of(value: bytes | str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, else None."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    if text[: len(BEARER_PREFIX)].lower() != BEARER_PREFIX:
        return None
    return text[len(BEARER_PREFIX) :].strip() or None


def endpoint_check(
    agent_id: str, endpoint: Endpoint, caller_check: CallerCheck | None
) -> CallerCheck | None:
    """The caller check serving ``endpoint``: ``caller_check`` (the cluster's) with the
    endpoint's ``oidc`` schemes; with oidc schemes and no cluster check, one of its own that
    admits the oidc callers (and ``a2a.allow``, ``a2a.anonymous``) and the static schemes."""
    auth = endpoint.a2a.auth
    if auth is None or not any(s.type == "oidc" for s in auth.schemes):
        return caller_check
    from mas.runtime.identity.oidc import endpoint_oidc  # PyJWT: only with an oidc scheme

    oidc = endpoint_oidc(agent_id, auth.schemes, scheme_ids(auth))
    if caller_check is None:
        caller_check = CallerCheck(endpoint_admission(agent_id, endpoint), None)
    return caller_check.with_oidc(oidc)


async def full_check(
    check: CallerCheck,
    authenticator: Authenticator | None,
    raw: bytes | None,
    authorization: bytes | str | None,
    presented: dict[str, bytes] | None,
) -> Decision:
    """The decision for a request :meth:`CallerCheck.quick` did not decide, on any
    transport: its token's bytes (``raw``), its ``Authorization`` value and the credential
    headers of ``a2a.auth`` it presented."""
    scheme = authenticator.principal(presented or {}) if authenticator is not None else None
    bearer = bearer_of(authorization) if check.oidc is not None else None
    token = raw.decode("latin-1") if raw else None
    return await check.check(token, scheme, bearer, remember=raw)


CHALLENGE = b'Bearer realm="a2a", header="' + IDENTITY_KEY + b'"'
STATUS_NAMES = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 503: "UNAVAILABLE"}


def refusal_payload(decision: Decision, *, rpc: bool) -> dict[str, Any]:
    """The body refusing ``decision`` on JSON-RPC (``rpc``) or in the google.rpc shape."""
    if rpc:
        return {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": UNAUTHENTICATED_RPC_CODE,
                "message": decision.message,
                "data": {"reason": decision.reason, "caller": decision.caller},
            },
        }
    return {
        "error": {
            "code": decision.status,
            "status": STATUS_NAMES.get(decision.status, "UNAUTHENTICATED"),
            "message": decision.message,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": decision.reason.upper(),
                    "domain": "maslab.io",
                    "metadata": {"caller": decision.caller},
                }
            ],
        }
    }


class HttpCallers:
    """ASGI middleware: the caller check of each request outside ``public_paths``."""

    def __init__(
        self,
        app: ASGIApp,
        check: CallerCheck,
        authenticator: Authenticator | None = None,
        *,
        rpc_path: str | None = "/",
        public_paths: Iterable[str] = PUBLIC_PATHS,
    ) -> None:
        self.app = app
        self.check = check
        self.authenticator = authenticator
        self.rpc_path = rpc_path
        self.public_paths = frozenset(public_paths)
        wanted = authenticator.headers if authenticator is not None else frozenset()
        self._wanted = {h.encode("latin-1"): h for h in wanted}
        self.redact = CREDENTIAL_HEADERS | frozenset(self._wanted) | {IDENTITY_KEY}
        self._principals: dict[str, Principal] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or CALLER_CHECKED in scope  # by a hot lane in front (fast/hot_lane.py)
            or await self.admit(scope, send)
        ):
            await self.app(scope, receive, send)

    async def admit(self, scope: Scope, send: Send) -> bool:
        """The check of one HTTP request: True for one on ``public_paths``, and for one
        admitted, its ``scope`` changed in place (``user``, credentials redacted,
        :data:`~library_ioa.serving.auth.CALLER_CHECKED`); else the refusal sent and False.

        The hot path is one remembered token: one pass over the headers, one hash, one
        lookup, the request's own scope and header list changed in place (no copies: each
        container allocated per request is paid again in the collector's passes).
        """
        if scope.get("path", "") in self.public_paths:
            return True
        raw: bytes | None = None
        authorization: bytes | None = None
        presented: dict[str, bytes] | None = None
        redact = self.redact
        headers = scope.get("headers", ())
        found: list[int] | None = None
        for index, (key, value) in enumerate(headers):  # ASGI header names are lowercase
            if key in redact:
                if found is None:
                    found = [index]
                else:
                    found.append(index)
                if key == IDENTITY_KEY:
                    raw = bytes(value).strip()
                else:
                    if key in self._wanted:
                        if presented is None:
                            presented = {}
                        presented[self._wanted[key]] = bytes(value)
                    if key == AUTHORIZATION_KEY:
                        authorization = bytes(value)
        check = self.check
        decision = check.quick(raw, authorization, scope.get(CONNECTION_STATE))
        if decision is None:
            decision = await full_check(check, self.authenticator, raw, authorization, presented)
        tracing.annotate(tracing.MAS_CALLER, decision.caller or decision.principal)
        if decision.admitted:
            user = self._principals.get(decision.principal)
            if user is None:
                user = Principal(decision.principal)
                if len(self._principals) < MAX_PRINCIPALS:
                    self._principals[decision.principal] = user
            if found is not None:  # the SDK logs headers: the credentials go no further
                if not isinstance(headers, list):
                    headers = scope["headers"] = list(headers)
                for index in found:
                    headers[index] = (headers[index][0], REDACTED)
            scope["user"] = user
            scope[CALLER_CHECKED] = True
            return True
        rpc = self.rpc_path is not None and scope.get("path", "") == self.rpc_path
        extra = [(b"www-authenticate", CHALLENGE)] if decision.status == 401 else []
        await send_json(send, decision.status, refusal_payload(decision, rpc=rpc), extra)
        return False

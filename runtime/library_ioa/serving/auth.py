"""Inbound authentication of an A2A endpoint (``a2a.auth``): bearer tokens and API keys.

The expected credentials are read at start-up from the environment: a ``secret_key_ref``
from the variable :func:`mas.infra.secrets.secret_env_name` names (the operator maps the
Secret key to it), a ``value_env`` from that variable (for local runs). A missing or empty
variable is an :class:`AuthConfigError` naming the field and the variable, never a value.

A request is authenticated when it presents any one scheme: ``Authorization: Bearer <token>``
for ``bearer``, the header ``name`` (default ``X-API-Key``) for ``api_key``. Every
comparison is constant-time (:func:`hmac.compare_digest`) and every scheme is compared, so
the time taken says nothing about which one nearly matched.

- HTTP (:class:`HttpAuth`, ASGI middleware): everything but the public card, ``/healthz``,
  ``/readyz`` and ``/metrics`` requires a credential; a refusal is HTTP 401 with a
  ``WWW-Authenticate`` challenge and the transport's error body (JSON-RPC -32600 at the RPC
  path, the REST error shape with status ``UNAUTHENTICATED`` elsewhere).
- gRPC (:class:`GrpcAuth`, a server interceptor): the same check on the call metadata;
  a refusal is ``UNAUTHENTICATED``.
- The card declares the schemes (:func:`card_security`): one ``securitySchemes`` entry per
  scheme and one ``securityRequirements`` alternative per scheme (any one suffices).

The scheme that matched is the request's principal, and a task belongs to the principal
that created it (:mod:`library_ioa.serving.principals`).

No credential, expected or presented, is ever logged; past the check, the credential
headers are replaced by ``[redacted]`` (:func:`redact_credentials`) because the SDK logs a
request's headers at DEBUG.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

from library_ioa.errors import LibraryError
from library_ioa.serving.asgi import ASGIApp, Receive, Scope, Send
from library_ioa.serving.json_answers import send_json
from library_ioa.serving.principals import Principal
from mas.infra.models import A2AAuth, AuthScheme
from mas.infra.secrets import secret_env_name

logger = logging.getLogger(__name__)

DEFAULT_API_KEY_HEADER = "X-API-Key"
PUBLIC_PATHS = frozenset({AGENT_CARD_WELL_KNOWN_PATH, "/healthz", "/readyz", "/metrics"})
UNAUTHENTICATED_RPC_CODE = -32600


REDACTED = b"[redacted]"
CREDENTIAL_HEADERS = frozenset({b"authorization", b"proxy-authorization", b"cookie", b"x-api-key"})


# Scope key set by the caller check (serving/callers.py) on a request it admitted, once it
# has replaced every credential header's value in place: the layers inside it neither check
# nor redact it again.
CALLER_CHECKED = "maslab.caller_checked"


def redact_credentials(scope: Scope, names: frozenset[bytes] = CREDENTIAL_HEADERS) -> Scope:
    """``scope`` with the values of the ``names`` headers replaced (the SDK logs headers)."""
    if CALLER_CHECKED in scope and names <= CREDENTIAL_HEADERS:
        return scope  # the caller check redacted all of them already
    headers = scope.get("headers", ())
    if not any(bytes(k).lower() in names for k, _ in headers):
        return scope
    return {
        **scope,
        "headers": [(k, REDACTED if bytes(k).lower() in names else v) for k, v in headers],
    }


class AuthConfigError(LibraryError, ValueError):
    """The auth configuration cannot be resolved; the message names field and variable."""


@dataclass(frozen=True)
class Credential:
    """One accepted credential: ``header`` (lowercase) must carry ``prefix + secret``."""

    scheme_id: str
    kind: str
    header: str
    prefix: bytes
    secret: bytes

    def __repr__(self) -> str:  # never show the secret
        return f"Credential({self.scheme_id!r}, header={self.header!r})"


SCHEME_BASES = {"bearer": "bearer", "api_key": "apiKey", "oidc": "oidc"}
DISCOVERY_PATH = "/.well-known/openid-configuration"


def scheme_ids(auth: A2AAuth) -> list[str]:
    """Each scheme's name on the card: ``bearer``, ``apiKey``, ``oidc``, numbered when
    repeated."""
    seen: dict[str, int] = {}
    out = []
    for scheme in auth.schemes:
        base = SCHEME_BASES[scheme.type]
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}{seen[base]}")
    return out


def _source(agent_id: str, index: int, scheme: AuthScheme) -> tuple[str, str]:
    field = f"spec.endpoints.{agent_id}.a2a.auth.schemes[{index}]"
    if scheme.secret_key_ref is not None:
        ref = scheme.secret_key_ref
        return (
            secret_env_name(ref),
            f"{field}.secret_key_ref: reads Secret {ref.name!r} key {ref.key!r} from the "
            f"environment variable {secret_env_name(ref)}",
        )
    if scheme.value_env is not None:
        return scheme.value_env, f"{field}.value_env: reads the variable {scheme.value_env}"
    raise AuthConfigError(f"{field}: set exactly one of secret_key_ref or value_env")


def resolve_credentials(
    agent_id: str, auth: A2AAuth, env: Mapping[str, str] | None = None
) -> list[Credential]:
    """The expected credentials of ``auth``, read from ``env`` (default ``os.environ``);
    ``oidc`` schemes have none (their tokens are verified: :mod:`mas.runtime.identity.oidc`)."""
    env = os.environ if env is None else env
    out: list[Credential] = []
    ids = scheme_ids(auth)
    for index, scheme in enumerate(auth.schemes):
        if scheme.type == "oidc":
            continue
        variable, where = _source(agent_id, index, scheme)
        value = env.get(variable, "")
        if not value:
            raise AuthConfigError(
                f"{where}, which is not set or empty (the operator sets it in the pod; "
                "locally, export it)"
            )
        if scheme.type == "bearer":
            credential = Credential(
                ids[index], "bearer", "authorization", b"bearer ", value.encode()
            )
        else:
            header = (scheme.name or DEFAULT_API_KEY_HEADER).lower()
            credential = Credential(ids[index], "api_key", header, b"", value.encode())
        out.append(credential)
    return out


def card_security(auth: A2AAuth) -> tuple[dict[str, SecurityScheme], list[SecurityRequirement]]:
    """The card's ``securitySchemes`` and ``securityRequirements`` (any one scheme suffices)."""
    schemes: dict[str, SecurityScheme] = {}
    requirements: list[SecurityRequirement] = []
    for name, scheme in zip(scheme_ids(auth), auth.schemes, strict=True):
        if scheme.type == "bearer":
            schemes[name] = SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="A bearer token in the Authorization header."
                )
            )
        elif scheme.oidc is not None:
            schemes[name] = SecurityScheme(
                open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                    open_id_connect_url=scheme.oidc.issuer.rstrip("/") + DISCOVERY_PATH,
                    description="An ID token of this OpenID Connect issuer, for audience "
                    f"{', '.join(scheme.oidc.audiences)}, in 'Authorization: Bearer'.",
                )
            )
        else:
            schemes[name] = SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header",
                    name=scheme.name or DEFAULT_API_KEY_HEADER,
                    description="An API key in a request header.",
                )
            )
        requirements.append(SecurityRequirement(schemes={name: StringList()}))
    return schemes, requirements


class Authenticator:
    """Checks presented headers against the expected credentials, in constant time."""

    def __init__(self, credentials: Sequence[Credential]) -> None:
        if not credentials:
            raise AuthConfigError("an authenticator needs at least one credential")
        self.credentials = tuple(credentials)
        self.headers = frozenset(c.header for c in credentials)
        self.challenge = (
            'Bearer realm="a2a"'
            if any(c.kind == "bearer" for c in credentials)
            else f'ApiKey header="{credentials[0].header}"'
        )

    def accepts(self, presented: Mapping[str, bytes]) -> bool:
        """Whether any credential matches (``presented``: lowercase header -> raw value)."""
        return self.principal(presented) is not None

    def principal(self, presented: Mapping[str, bytes]) -> str | None:
        """The scheme id of the first credential that matches, or None (all are compared)."""
        matched: str | None = None
        for credential in self.credentials:
            value = presented.get(credential.header, b"")
            if credential.prefix:
                head, body = value[: len(credential.prefix)], value[len(credential.prefix) :]
                ok = head.lower() == credential.prefix and hmac.compare_digest(
                    body.strip(), credential.secret
                )
            else:
                ok = hmac.compare_digest(value.strip(), credential.secret)
            if ok and matched is None:
                matched = credential.scheme_id
        return matched


class HttpAuth:
    """ASGI middleware: a request outside :data:`PUBLIC_PATHS` must authenticate."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        rpc_path: str = "/",
        public_paths: Iterable[str] = PUBLIC_PATHS,
        hint: str = "see the card's securitySchemes",
    ) -> None:
        self.app = app
        self.hint = hint
        self.authenticator = authenticator
        self.rpc_path = rpc_path
        self.public_paths = frozenset(public_paths)
        self._wanted = {h.encode("latin-1"): h for h in authenticator.headers}
        self.redact = CREDENTIAL_HEADERS | frozenset(self._wanted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "") in self.public_paths:
            await self.app(scope, receive, send)
            return
        wanted = self._wanted
        presented: dict[str, bytes] = {}
        for key, value in scope.get("headers", ()):
            name = wanted.get(bytes(key).lower())
            if name is not None:
                presented[name] = bytes(value)
        principal = self.authenticator.principal(presented)
        if principal is not None:  # the ASGI user: the SDK's stores scope tasks by it
            scope = {**redact_credentials(scope, self.redact), "user": Principal(principal)}
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, receive, send, missing=not presented)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, missing: bool) -> None:
        reason = "missing credentials" if missing else "invalid credentials"
        path = scope.get("path", "")
        logger.info("A2A request to %s refused: %s", path, reason)
        message = f"authentication required ({reason}); {self.hint}"
        payload: dict[str, Any]
        if path == self.rpc_path:
            payload = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": UNAUTHENTICATED_RPC_CODE, "message": message},
            }
        else:
            payload = {
                "error": {
                    "code": 401,
                    "status": "UNAUTHENTICATED",
                    "message": message,
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "UNAUTHENTICATED",
                            "domain": "a2a-protocol.org",
                            "metadata": {},
                        }
                    ],
                }
            }
        challenge = [(b"www-authenticate", self.authenticator.challenge.encode())]
        await send_json(send, 401, payload, challenge)

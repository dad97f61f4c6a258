"""Who may open the console, and the headers of every answer.

- Bound to a loopback address, the console has no authentication: only this machine reaches
  it.
- Bound to any other address it must sit behind a proxy that authenticates (the
  oauth2-proxy pattern): :class:`Access` then requires the request to come from an address
  in ``proxy_ranges`` *and* to carry the ``user_header`` the proxy sets; anything else is
  refused (403 or 401) before a page is rendered (``/healthz`` alone is open: it says
  ``ok``, for the kubelet's probe). :func:`check_bind` refuses to start on a
  non-loopback address without both.
- Every answer carries a Content-Security-Policy without inline scripts or styles,
  ``frame-ancestors 'none'``, ``X-Frame-Options: DENY``, ``nosniff`` and no referrer.
- A request that changes something (a chat turn, a cancel) must carry the header
  ``X-Console: 1``, which a cross-site form cannot send, and an Origin, when present, of the
  console itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
WRITE_HEADER = "x-console"


class AccessError(ValueError):
    """The console may not start with these options; the message says what to give."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_ranges(texts: Sequence[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    out = []
    for text in texts:
        try:
            out.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise AccessError(
                f"--trusted-proxy-range {text!r} is not an address range; accepted: a CIDR such "
                "as 10.0.0.0/8 or an address such as 10.1.2.3"
            ) from None
    return tuple(out)


@dataclass(frozen=True)
class Access:
    """``user_header``/``proxy_ranges`` empty: loopback, open to this machine."""

    user_header: str = ""
    proxy_ranges: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @property
    def proxied(self) -> bool:
        return bool(self.user_header)

    def refusal(self, client: str | None, user: str | None) -> Response | None:
        if not self.proxied:
            return None
        try:
            address = ipaddress.ip_address(client or "")
        except ValueError:
            address = None
        if address is None or not any(address in r for r in self.proxy_ranges):
            return PlainTextResponse(
                "forbidden: the console is reached through its authenticating proxy only\n",
                status_code=403,
            )
        if not user:
            return PlainTextResponse(
                f"unauthorized: the proxy set no {self.user_header} header\n", status_code=401
            )
        return None


def check_bind(host: str, user_header: str | None, ranges: Sequence[str]) -> Access:
    """The access rule for binding ``host`` (see the module docstring)."""
    parsed = parse_ranges(ranges)
    if is_loopback(host) and not user_header:
        if parsed:
            raise AccessError("--trusted-proxy-range needs --trusted-proxy-header NAME")
        return Access()
    if not user_header or not parsed:
        raise AccessError(
            f"--host {host} is not a loopback address: the console has no login of its own, so "
            "give --trusted-proxy-header NAME (the user header your authenticating proxy sets, "
            "e.g. X-Forwarded-User) and --trusted-proxy-range CIDR (the proxy's addresses), "
            "or bind 127.0.0.1"
        )
    if not user_header.replace("-", "").isalnum():
        raise AccessError(
            f"--trusted-proxy-header {user_header!r} is not a header name; accepted: letters, "
            "digits and '-'"
        )
    return Access(user_header, parsed)


class Guard:
    """ASGI middleware: access first, then the security headers on every answer."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        client = request.client.host if request.client else None
        user = request.headers.get(self.access.user_header) if self.access.proxied else None
        # /healthz says nothing of the Applications: the kubelet's probe needs no proxy
        refused = None if scope["path"] == "/healthz" else self.access.refusal(client, user)
        if refused is None and request.method not in ("GET", "HEAD"):
            refused = _write_refusal(request)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] not in dict(HEADERS)]
                message["headers"] = headers + list(HEADERS)
            await send(message)

        if refused is not None:
            await refused(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


def _write_refusal(request: Request) -> Response | None:
    if request.headers.get(WRITE_HEADER) != "1":
        return PlainTextResponse(
            "forbidden: a change needs the header X-Console: 1 (the console's pages send it)\n",
            status_code=403,
        )
    origin = request.headers.get("origin")
    if origin and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
        return PlainTextResponse("forbidden: a change from another origin\n", status_code=403)
    return None

"""Parsing of advertised URLs and gRPC addresses (pure, no sockets)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
ACCEPTED_SCHEMES = ("http", "https")


class AddressError(ValueError):
    """An address that cannot be used; the message says what is accepted."""


@dataclass(frozen=True)
class HostPort:
    """A host and port, the unit that can serve one AgentCard."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_advertised_url(url: str) -> HostPort:
    """The host:port of an advertised base URL; refuses paths, queries and fragments."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressError(f"{url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ACCEPTED_SCHEMES:
        raise AddressError(
            f"{url!r} has scheme {parts.scheme or '(none)'!r}; accepted: http://host[:port] or "
            "https://host[:port]"
        )
    if not parts.hostname:
        raise AddressError(f"{url!r} has no host; accepted: http://host[:port]")
    if parts.path not in ("", "/"):
        raise AddressError(
            f"{url!r} has a path prefix {parts.path!r}; the advertised url cannot include one "
            "(accepted: scheme://host[:port])"
        )
    if parts.query or parts.fragment:
        raise AddressError(f"{url!r} has a query or fragment; accepted: scheme://host[:port]")
    return HostPort(parts.hostname, port if port is not None else DEFAULT_PORTS[parts.scheme])


def parse_grpc_address(address: str) -> HostPort:
    """``host:port`` (optionally ``grpc://host:port``) of a gRPC listener."""
    text = address.removeprefix("grpc://").removeprefix("grpcs://")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or "/" in text or not port_text.isdigit():
        raise AddressError(f"{address!r} is not a gRPC address; accepted: host:port")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise AddressError(f"{address!r} has port {port}; accepted: 1 to 65535")
    return HostPort(host, port)


def normalize_url(url: str) -> str:
    """The advertised URL without a trailing slash."""
    return url.rstrip("/")


def ip_of(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address ``text`` names (an IPv4-mapped IPv6 one as its IPv4 address), or None.

    Accepts a bracketed IPv6 host and ignores a ``%zone`` suffix.
    """
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address

"""Parsing of advertised URLs and gRPC addresses (pure, no sockets)."""

from __future__ import annotations

import ipaddress
import socket
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

    def socket_key(self) -> HostPort:
        """The one spelling of the socket this address binds: two endpoints whose keys are
        equal cannot both listen (see :func:`canonical_host`)."""
        return HostPort(canonical_host(self.host), self.port)


def canonical_host(host: str) -> str:
    """One spelling per address, without a DNS lookup: lowercase, no trailing dot,
    ``localhost`` (and ``*.localhost``) as ``127.0.0.1``, IPv4 shorthands (``127.1``,
    ``2130706433``, ``0x7f.1``) and IPv4-mapped IPv6 as dotted IPv4, IPv6 compressed.
    A name that is not an address is only lowercased."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if ":" not in name:
            try:  # inet_aton reads every legacy IPv4 spelling; it never touches the network
                return socket.inet_ntoa(socket.inet_aton(name))
            except OSError:
                pass
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


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


def parse_tool_server_url(url: str) -> HostPort:
    """The host:port of a tool server's url: ``http(s)://host[:port][/path]``, no fragment.

    Unlike an advertised base URL, a tool server's url names its endpoint, path included
    (an MCP server's streamable HTTP endpoint is often ``/mcp``).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressError(f"{url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ACCEPTED_SCHEMES or not parts.hostname:
        raise AddressError(
            f"{url!r} is not accepted; accepted: http(s)://host[:port][/path], the server's "
            "endpoint (e.g. http://127.0.0.1:8600/mcp)"
        )
    if parts.fragment:
        raise AddressError(f"{url!r} has a fragment; accepted: http(s)://host[:port][/path]")
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

"""Which push-notification URLs an A2A server accepts and calls: the SSRF policy (``a2a.push``).

:class:`PushUrlPolicy` is the ``push_url_validator`` of the SDK's request handler (checked
when a client registers a config, answered -32602 / 400 ``Invalid push notification URL``)
and of its push sender (checked again before every POST, so a name that re-resolves to a
private address later is refused then too). A URL is accepted when

- its scheme is ``http`` or ``https`` and it names a host;
- and either its host is listed in ``allowed_hosts`` (exactly, case-insensitive), or
  ``allow_private`` is on, or the host resolves and **every** address it resolves to is
  a public unicast address: no loopback, private (RFC 1918, fc00::/7), shared
  (100.64.0.0/10), link-local (169.254.0.0/16 with the 169.254.169.254 metadata address,
  fe80::/10), multicast, reserved or unspecified address. An IPv6 form that carries an IPv4
  address is judged by the IPv4 address inside it: IPv4-mapped (``::ffff:0:0/96``), 6to4
  (``2002::/16``), NAT64 (``64:ff9b::/96``) and Teredo (``2001::/32``, both its server
  and its client address must be public); so ``[2002:7f00:1::]`` is loopback.
  fd00:ec2::254, the IPv6 metadata address, is refused as private. A name that does not
  resolve (within ``resolve_timeout``) is refused: fail closed. One exception: the
  conformance probe's own webhook host
  (:data:`mas.infra.conformance.PROBE_PUSH_HOST`, under the reserved ``.invalid`` domain) is
  accepted while it does not resolve, so ``mas-ctl conformance`` can check push configs
  without DNS; nothing can be delivered to a name that does not resolve, and when it does
  resolve it is judged by its addresses like any other.

The default (``allow_private: false``, no ``allowed_hosts``) is the strict one. Each push
carries the config's ``token`` in the ``X-A2A-Notification-Token`` header (the SDK's
sender does this) so the receiver can tell it is ours.

Residual risk, stated: the sender's HTTP client resolves the name again when it connects,
so a DNS answer that changes in between (rebinding) is only caught at the next push.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import urllib.parse
from collections.abc import Iterable

from mas.infra.addresses import ip_of
from mas.infra.conformance import PROBE_PUSH_HOST
from mas.infra.models import PushPolicy

logger = logging.getLogger(__name__)

DEFAULT_RESOLVE_TIMEOUT = 5.0


NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 form carries: IPv4-mapped, 6to4, NAT64, Teredo (both)."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address in NAT64_PREFIX:
        return [ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)]
    if address.teredo is not None:
        return list(address.teredo)  # the server and the (de-obfuscated) client
    return []


def address_is_public(text: str) -> bool:
    """Whether ``text`` is a public unicast IP address (see the module docstring)."""
    address = ip_of(text)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        inside = embedded_ipv4(address)
        if inside:
            return all(_unicast_public(v4) for v4 in inside)
    return _unicast_public(address)


def _unicast_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_global and not (
        address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or address.is_private
    )


class PushUrlPolicy:
    """An async ``url -> bool`` validator enforcing one endpoint's ``a2a.push`` policy."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        allowed_hosts: Iterable[str] = (),
        resolve_timeout: float = DEFAULT_RESOLVE_TIMEOUT,
    ) -> None:
        self.allow_private = allow_private
        self.allowed_hosts = frozenset(h.strip("[]").lower() for h in allowed_hosts)
        self.resolve_timeout = resolve_timeout

    @classmethod
    def from_options(cls, options: PushPolicy) -> PushUrlPolicy:
        """The policy an endpoint's ``a2a.push`` declares."""
        return cls(allow_private=options.allow_private, allowed_hosts=options.allowed_hosts)

    async def __call__(self, url: str) -> bool:
        reason = await self.refusal(url)
        if reason is not None:
            logger.warning("push-notification URL refused: %s", reason)
            return False
        return True

    async def refusal(self, url: str) -> str | None:
        """Why ``url`` is refused, or None when it is accepted."""
        try:
            parsed = urllib.parse.urlsplit(url)
            port = parsed.port
        except ValueError:
            return "the URL does not parse"
        if parsed.scheme not in ("http", "https"):
            return f"scheme {parsed.scheme!r} is not accepted; accepted: http, https"
        host = (parsed.hostname or "").lower()
        if not host:
            return "the URL names no host"
        if host in self.allowed_hosts or self.allow_private:
            return None
        port = port or (443 if parsed.scheme == "https" else 80)
        try:
            async with asyncio.timeout(self.resolve_timeout):
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, type=socket.SOCK_STREAM
                )
        except (OSError, TimeoutError):
            if host == PROBE_PUSH_HOST:  # the probe's webhook: nothing can reach it
                return None
            return f"host {host!r} does not resolve"
        addresses = sorted({str(info[4][0]) for info in infos})
        blocked = [a for a in addresses if not address_is_public(a)]
        if blocked or not addresses:
            return (
                f"host {host!r} resolves to a non-public address ({', '.join(blocked)}); "
                "allow it with a2a.push.allowed_hosts or a2a.push.allow_private"
            )
        return None

"""Run every check on every interface an AgentCard advertises."""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import UTC, datetime

import httpx
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT

from mas.ctl.conformance.card import CardUnavailable, card_url, fetch_card
from mas.ctl.conformance.checks import InterfaceProbe
from mas.infra.conformance import PROBE_PUSH_URL, ConformanceCheck, ConformanceResult
from mas.infra.identity import TOKEN_FILE_ENV
from mas.runtime.identity.token_file import TokenFile

logger = logging.getLogger(__name__)

KNOWN_BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
# The push-config check's webhook, never called: a MAS Lab server accepts it without DNS (see
# mas.infra.conformance); a server whose policy wants a name that resolves to a public address
# is offered the example.com one next (it needs DNS).
DEFAULT_PUSH_URL = PROBE_PUSH_URL
PUBLIC_PUSH_URL = "https://push-receiver.example.com/mas-conformance"


def speaks_1_0(version: str) -> bool:
    """Whether an interface's protocolVersion is 1.x (an empty one means the current, 1.0)."""
    return (
        not version or version.split(".", maxsplit=1)[0] == PROTOCOL_VERSION_CURRENT.split(".")[0]
    )


async def probe(
    url: str, *, timeout: float = 10.0, push_url: str = DEFAULT_PUSH_URL
) -> ConformanceResult:
    """Probe the agent at ``url`` (its base URL or its card's URL).

    Raises :class:`~mas.ctl.conformance.card.ProbeUsageError` for a URL that cannot name a card;
    everything else, an unreachable card included, is a failed check in the result.
    """
    card_url(url)  # usage errors first, before any network
    # The operator's probe Job runs as the probed agent and names its token (docs/security.md).
    token_file = os.environ.get(TOKEN_FILE_ENV)
    identity = TokenFile(token_file).current() if token_file else None
    push_urls = (push_url, PUBLIC_PUSH_URL) if push_url == DEFAULT_PUSH_URL else (push_url,)
    checked_at = datetime.now(UTC)
    checks: list[ConformanceCheck] = []
    async with httpx.AsyncClient(timeout=timeout) as http:
        try:
            card = await asyncio.wait_for(fetch_card(http, url), timeout=timeout + 1)
        except (CardUnavailable, TimeoutError) as exc:
            detail = str(exc) or f"no AgentCard within {timeout:g}s"
            checks.append(
                ConformanceCheck(interface="card", check="agent-card", status="fail", detail=detail)
            )
            return ConformanceResult(url=url, checked_at=checked_at, checks=checks)
        interfaces = list(card.supported_interfaces)
        known = [i for i in interfaces if i.protocol_binding in KNOWN_BINDINGS]
        usable = [i for i in known if speaks_1_0(i.protocol_version)]
        older = [i for i in known if not speaks_1_0(i.protocol_version)]
        if not usable:
            named = sorted({f"{i.protocol_binding} {i.protocol_version}" for i in interfaces})
            detail = (
                f"the card advertises no interface this probe speaks "
                f"({', '.join(named) or 'none'}); known: {', '.join(KNOWN_BINDINGS)} "
                f"at protocolVersion {PROTOCOL_VERSION_CURRENT}"
            )
            checks.append(
                ConformanceCheck(interface="card", check="agent-card", status="fail", detail=detail)
            )
            return ConformanceResult(url=url, checked_at=checked_at, checks=checks)
        advertised = ", ".join(f"{i.protocol_binding} {i.url}" for i in usable)
        checks.append(
            ConformanceCheck(
                interface="card", check="agent-card", status="pass",
                detail=f"{card.name!r}: {advertised}",
            )
        )  # fmt: skip
        checks.extend(
            ConformanceCheck(
                interface=i.protocol_binding, check="version-header", status="skip",
                detail=f"{i.url} is a protocolVersion {i.protocol_version} interface; "
                f"this probe speaks {PROTOCOL_VERSION_CURRENT}",
            )
            for i in older
        )  # fmt: skip
        for interface in usable:
            one = InterfaceProbe(
                card, interface, http, timeout=timeout, push_urls=push_urls, identity=identity
            )
            checks.extend(await one.run())
    return ConformanceResult(url=url, checked_at=checked_at, checks=checks)

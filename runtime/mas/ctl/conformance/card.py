"""The probe's first step: a usable URL, then the AgentCard behind it."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver, AgentCardResolutionError
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

logger = logging.getLogger(__name__)


class ProbeUsageError(ValueError):
    """The URL given to the probe cannot name an AgentCard (a usage error, exit 2)."""


class CardUnavailable(Exception):
    """The AgentCard could not be fetched or parsed (the probe fails, exit 1)."""


def card_url(url: str) -> tuple[str, str]:
    """``(base, path)`` of the card: a base URL gets the well-known path appended.

    Raises :class:`ProbeUsageError` naming the value and what is accepted.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeUsageError(
            f"--url {url!r}: expected an http:// or https:// URL of an agent "
            "(its AgentCard is read from /.well-known/agent-card.json) or of the card itself"
        )
    try:
        _ = parts.port
    except ValueError as exc:
        raise ProbeUsageError(f"--url {url!r}: the port is not a number in 0-65535") from exc
    if parts.path.endswith(".json"):
        base = f"{parts.scheme}://{parts.netloc}"
        return base, parts.path
    base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    return base, AGENT_CARD_WELL_KNOWN_PATH


async def fetch_card(http: httpx.AsyncClient, url: str) -> AgentCard:
    """The AgentCard at ``url`` (see :func:`card_url`), through the SDK's card resolver."""
    base, path = card_url(url)
    resolver = A2ACardResolver(http, base, agent_card_path=path)
    try:
        return await resolver.get_agent_card()
    except AgentCardResolutionError as exc:
        raise CardUnavailable(exc.message) from exc
    except httpx.HTTPError as exc:
        raise CardUnavailable(f"no AgentCard at {base}{path}: {type(exc).__name__}: {exc}") from exc
    except (ValueError, TypeError) as exc:
        raise CardUnavailable(f"the AgentCard at {base}{path} is not valid: {exc}") from exc

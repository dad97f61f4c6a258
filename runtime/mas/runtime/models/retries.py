"""When and how long a model plugin waits before it asks a provider again.

Shared by the HTTP model plugins (``openai``, ``anthropic``). The rules:

- Retried: HTTP 429 (rate limited), 408, 409 and every 5xx (529 is Anthropic's
  "overloaded"), and a connection that could not be made. Never retried: another 4xx (the
  request itself is wrong), a timeout (the provider may still be working on it) and
  anything after the first byte of an answer has been read (a half-streamed reply is
  never replayed).
- At most ``retries`` more attempts (params, default 2; 0 turns retrying off).
- The wait before attempt ``n`` (1, 2, ...) is the provider's ``retry-after-ms`` or
  ``Retry-After`` header (seconds or an HTTP date) when it sends one, else
  ``backoff * 2 ** (n - 1)`` seconds; never more than ``retry_max_seconds``. A provider
  that asks for a longer wait than that is not waited for: the turn fails at once, saying
  how long it asked for.
- The last failure's status and the provider's own message end the turn (a
  :class:`~mas.runtime.errors.ModelError`); the agent keeps serving other turns meanwhile,
  since a wait only holds its own generation.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from mas.runtime.errors import ModelError

logger = logging.getLogger(__name__)

RETRIED_STATUSES = frozenset({408, 409, 429})


def retried(status: int) -> bool:
    """Whether a response with ``status`` is asked again."""
    return status in RETRIED_STATUSES or status >= 500


class RetryParams(BaseModel):
    """The retry params every HTTP model plugin accepts (mixed into its own params)."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0, le=10)
    backoff: float = Field(default=0.5, ge=0, le=60)
    retry_max_seconds: float = Field(default=30.0, ge=0, le=600)


@dataclass
class Retrying:
    """The retry state of one generation."""

    params: RetryParams
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)
    attempt: int = 0

    async def again(self, headers: Mapping[str, str]) -> str | None:
        """Wait before the next attempt and return ``None``; or, when no attempt is left or
        the provider asks for too long a wait, the reason not to try again."""
        if self.attempt >= self.params.retries:
            tries = self.attempt + 1
            return f"after {tries} attempt{'s' if tries > 1 else ''}"
        self.attempt += 1
        asked = retry_after(headers)
        delay = asked if asked is not None else self.params.backoff * 2 ** (self.attempt - 1)
        if delay > self.params.retry_max_seconds:
            if asked is not None:
                return (
                    f"the provider asked to wait {asked:g} s (Retry-After), past "
                    f"retry_max_seconds {self.params.retry_max_seconds:g}"
                )
            delay = self.params.retry_max_seconds
        await self.sleep(max(delay, 0.0))
        return None

    async def again_or_fail(self, where: str, failure: tuple[str, Mapping[str, str]]) -> None:
        """After a retried ``failure`` (what went wrong and the response's headers) of the
        model at ``where``: wait (:meth:`again`) and log that it is asked again, or raise the
        :class:`~mas.runtime.errors.ModelError` that ends the turn, saying why not again."""
        why = await self.again(failure[1])
        if why is not None:
            raise ModelError(f"{where}: {failure[0]} ({why})")
        logger.info("%s: %s; asking again", where, failure[0])


def retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """The wait a provider asks for: ``retry-after-ms``, else ``Retry-After`` (seconds or an
    HTTP date); ``None`` when it asks for none or says something unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    text = lowered.get("retry-after")
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        return max(when.timestamp() - now(), 0.0)
    return seconds if seconds >= 0 else None

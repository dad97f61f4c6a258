"""``echo`` (the default model): replies with the input text, streamed word by word.

Params: ``chunk_delay_ms`` (int >= 0, default 0): a pause before each chunk after the
first, so that a generation lasts long enough to steer or cancel in demos and tests.
The chunks concatenate to exactly the input text (each word keeps its trailing spaces).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mas.runtime.models.base import (
    ModelOutput,
    ModelPlugin,
    ModelRequest,
    TextChunk,
    validate_params,
)

_WORD = re.compile(r"\s*\S+\s*")


class EchoParams(BaseModel):
    """The echo model's params."""

    model_config = ConfigDict(extra="forbid")

    chunk_delay_ms: int = Field(default=0, ge=0, le=60_000)


def words(text: str) -> list[str]:
    """``text`` in word chunks that concatenate back to ``text``."""
    chunks = _WORD.findall(text)
    return chunks or ([text] if text else [])


class EchoModel(ModelPlugin):
    """Echoes the latest user message."""

    def __init__(
        self, *, agent_id: str = "", env: Mapping[str, str] | None = None, **params: Any
    ) -> None:
        self.params = validate_params("echo", EchoParams, params)
        self.agent_id = agent_id

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        """The input text, word by word."""
        delay = self.params.chunk_delay_ms / 1000
        for index, chunk in enumerate(words(request.last_user_text)):
            if index and delay:
                await asyncio.sleep(delay)
            yield TextChunk(chunk)

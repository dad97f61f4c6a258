"""``ToolSourceContract``: tools an agent may call beside its delegate tools.

Selected through the registry (category ``tool_source``) by the protocol of a tool server
endpoint (``mcp``: :class:`library_ioa.plugins.mcp.tool_source.MCPToolSource`); built as
``Factory(url=..., headers=..., timeout=..., server=<endpoint id>)``. Another source (an
OpenAPI bridge, a local function table) is added by an entry point ``tool_source.<name>``.

Rules for implementations:

- :meth:`ToolSourceContract.list_tools` gives the server's tools as :class:`ToolSpec` (the
  name as the server lists it, its description, its input JSON schema). A server that is
  down, slow past ``timeout`` or answers garbage raises :class:`ToolSourceError` within
  ``timeout``; never hangs.
- :meth:`ToolSourceContract.call` runs one tool and returns a :class:`ToolOutcome`. A tool
  that reports an error is ``ok=False`` with the server's message; a server that cannot be
  reached or does not answer within ``timeout`` raises :class:`ToolSourceError` (the
  toolbox turns it into a tool error for the model, never a failed turn).
- Results the model cannot read as text (images, embedded resources) come back as
  artifacts, and their text says so; structured content is given to the model as JSON.
- Both may be called concurrently; ``aclose`` releases connections.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mas.runtime.boundary.delegation import ToolSpec
from mas.runtime.errors import RuntimeFailure
from mas.runtime.turns import ArtifactEmitted

ToolFailure = Literal["unreachable", "timeout", "protocol"]


class ToolSourceError(RuntimeFailure):
    """A tool server failed (``reason``: unreachable, timeout or protocol); names the server."""

    def __init__(self, reason: ToolFailure, message: str) -> None:
        self.reason: ToolFailure = reason
        super().__init__(message)


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gave back; ``text`` is what the model reads."""

    ok: bool
    text: str
    artifacts: tuple[ArtifactEmitted, ...] = ()


class ToolSourceContract(ABC):
    """A tool server's tools (see the module docstring for the rules)."""

    server: str

    @abstractmethod
    async def list_tools(self) -> list[ToolSpec]:
        """Every tool the server offers."""

    @abstractmethod
    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run the tool ``name`` with ``arguments``."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

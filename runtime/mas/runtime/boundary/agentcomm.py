"""``AgentCommContract``: the low-level outbound send, after delegation is decided.

Selected through the registry (category ``agent_comm``): ``local`` (in-process bus) and
``a2a`` (:class:`library_ioa.plugins.a2a.agent_comm.A2AAgentComm`, whose ``url``,
``headers`` and ``timeout`` come from the Application endpoint).

Rules for implementations:

- ``send`` delivers one message to ``message.target`` and waits for the peer's turn to end
  (or to ask for input), returning a :class:`CommReply`.
- It carries ``call_id`` and ``correlation_id`` to the peer (A2A message metadata
  ``mas.caller_call_id`` / ``mas.correlation_id``) and the delegation ``depth``.
- A peer that is down, slow past the timeout, or answers garbage raises a
  :class:`~mas.runtime.errors.CommError` subclass within the timeout; never hangs.
- ``send`` may be called concurrently for different sessions.
- ``aclose`` releases connections; ``send`` after it raises ``CommError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mas.runtime.turns import ArtifactEmitted


@dataclass(frozen=True)
class OutboundMessage:
    """One delegation on the wire."""

    source: str
    target: str
    text: str
    session_id: str
    call_id: str
    correlation_id: str
    depth: int
    data: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CommReply:
    """What the peer answered."""

    status: Literal["completed", "input_required", "failed", "canceled"]
    text: str
    artifacts: tuple[ArtifactEmitted, ...] = ()
    task_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the peer task's (maslab.tokens)


class AgentCommContract(ABC):
    """The outbound peer send (see the module docstring for the rules)."""

    @abstractmethod
    async def send(self, message: OutboundMessage) -> CommReply:
        """Deliver ``message`` and wait for the reply."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections."""

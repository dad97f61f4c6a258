"""``ConversationStore``: where an agent keeps the conversation of each of its sessions.

A conversation is the session's messages as the model sees them, plus the question the
last turn asked a person (``input_required``) while nobody has answered it yet. The agent
(:class:`~mas.runtime.agent.Agent`) reads it when a turn starts (:meth:`begin`) and adds the
turn's messages when the turn ends or is interrupted (:meth:`append`).

Implementations, named by backend: :class:`~mas.runtime.memory_history.MemoryConversationStore`
(the default; dies with the process) and
:class:`~library_ioa.plugins.a2a.server.stores.sql_history.SqlConversationStore` (the endpoint's
``sql`` task store, so any replica continues any conversation).

Rules every implementation keeps:

- **A turn's messages are one block.** :meth:`append` adds them all or none; blocks of one
  session never interleave, and they are kept in the order they were committed.
- **A turn sees what was committed before it began.** Within one process the mailbox runs
  the turns of a session one after the other, so each sees the one before. Two replicas
  running turns of one session at the same time each see the history without the other's
  turn; both blocks are kept, in commit order.
- **A pending question is taken once.** :meth:`begin` hands it to exactly one turn (the
  first to begin after it was asked) and clears it.
- **Bounded per session.** At most ``max_history`` messages are kept, oldest dropped (the
  memory store also bounds bytes, per session and in all).
- Errors: :class:`~mas.runtime.errors.HistoryError` with a message naming the store and
  the reason; never a driver exception.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from mas.runtime.models.base import ChatMessage

DEFAULT_MAX_HISTORY = 200


@dataclass(frozen=True)
class Conversation:
    """One session's conversation: its messages, oldest first, and its pending question."""

    messages: tuple[ChatMessage, ...] = ()
    question: str | None = None


class ConversationStore(ABC):
    """The conversations of one agent's sessions (see the module docstring)."""

    #: Whether :meth:`append` may suspend (does I/O). The agent shields such a write from a
    #: steer or cancel arriving meanwhile; a store that never suspends is written inline.
    suspends: ClassVar[bool] = True

    @abstractmethod
    async def begin(self, session_id: str, *, drop_interrupted: bool = False) -> Conversation:
        """The conversation a new turn of ``session_id`` continues; takes its pending question.

        ``drop_interrupted`` (a ``replace`` steer): first drop the last message when it is
        an interrupted partial reply.
        """

    @abstractmethod
    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, question: str | None = None
    ) -> None:
        """Add one turn's ``messages`` as one block; ``question``: the turn asked a person."""

    @abstractmethod
    async def peek(self, session_id: str) -> Conversation:
        """The conversation as it is, taking nothing (empty for an unknown session)."""

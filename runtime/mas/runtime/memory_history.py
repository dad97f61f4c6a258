"""``MemoryConversationStore``: the conversations of one agent in this process's memory.

Rules of :mod:`mas.runtime.history`; besides ``max_history`` messages per session, at most
``max_sessions`` sessions are kept, the least recently used dropped. Nothing survives the
process: a restarted pod, or another replica, starts every session afresh.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from mas.runtime.history import DEFAULT_MAX_HISTORY, Conversation, ConversationStore
from mas.runtime.models.base import ChatMessage

DEFAULT_MAX_SESSIONS = 10_000


@dataclass
class _Kept:
    messages: deque[ChatMessage]
    question: str | None = None


class MemoryConversationStore(ConversationStore):
    """Bounded conversations in memory (see the module docstring)."""

    suspends = False

    def __init__(
        self, *, max_history: int = DEFAULT_MAX_HISTORY, max_sessions: int = DEFAULT_MAX_SESSIONS
    ) -> None:
        if max_history < 1 or max_sessions < 1:
            raise ValueError(
                f"max_history ({max_history}) and max_sessions ({max_sessions}) must be at least 1"
            )
        self._max_history = max_history
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Kept] = OrderedDict()

    def _kept(self, session_id: str) -> _Kept:
        kept = self._sessions.get(session_id)
        if kept is None:
            kept = self._sessions[session_id] = _Kept(deque(maxlen=self._max_history))
            while len(self._sessions) > self._max_sessions:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(session_id)
        return kept

    async def begin(self, session_id: str, *, drop_interrupted: bool = False) -> Conversation:
        kept = self._kept(session_id)
        if drop_interrupted and kept.messages and kept.messages[-1].interrupted:
            kept.messages.pop()
        question, kept.question = kept.question, None
        return Conversation(tuple(kept.messages), question)

    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, question: str | None = None
    ) -> None:
        kept = self._kept(session_id)
        kept.messages.extend(messages)
        if question is not None:
            kept.question = question

    async def peek(self, session_id: str) -> Conversation:
        kept = self._sessions.get(session_id)
        if kept is None:
            return Conversation()
        return Conversation(tuple(kept.messages), kept.question)

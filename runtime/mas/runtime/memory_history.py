"""``MemoryConversationStore``: the conversations of one agent in this process's memory.

Rules of :mod:`mas.runtime.history`, with bounds so that a client opening conversation
after conversation cannot grow the process without end:

- per conversation: at most ``max_history`` messages and ``max_session_bytes`` bytes; past
  either, its oldest messages are dropped (a turn that alone is over ``max_session_bytes``
  keeps nothing: the bound always holds);
- in all: at most ``max_sessions`` conversations and ``max_bytes`` bytes; past either, the
  least recently used conversations are **evicted** whole, oldest first: first the idle
  ones, then, when no idle one is left, those **waiting for a person's answer** (their
  turn asked a question; this is the task store's order for tasks waiting for input). A
  conversation with a turn running (between :meth:`begin` and :meth:`append`) is never
  evicted: while such turns hold more than the bounds allow, the store stays over them
  (the session mailbox bounds how many turns run at once).

A message's size is its approximate footprint in memory: its strings (``sys.getsizeof``),
its tool calls' and structured data's text, and a fixed overhead. Every conversation
evicted counts in ``maslab_conversation_evictions_total{agent, reason}`` (reason
``count`` or ``bytes``), every message dropped from a conversation in
``maslab_conversation_messages_dropped_total{agent, reason}`` (``length`` or ``bytes``).

What a client sees when it follows up on an evicted conversation is a conversation that
starts afresh: the turn runs without the earlier messages, and a pending question is gone
(the answer reaches the model as a new message). Nothing survives the process either: a
restarted pod, or another replica, starts every session afresh (the ``sql`` store keeps
them: :mod:`library_ioa.plugins.a2a.server.stores.sql_history`).
"""

from __future__ import annotations

import logging
import sys
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from mas.infra.models import DEFAULT_HISTORY_MAX_BYTES, DEFAULT_HISTORY_MAX_SESSION_BYTES
from mas.runtime.history import DEFAULT_MAX_HISTORY, Conversation, ConversationStore
from mas.runtime.metrics import CONVERSATION_EVICTIONS, CONVERSATION_MESSAGES_DROPPED
from mas.runtime.models.base import ChatMessage

logger = logging.getLogger(__name__)

DEFAULT_MAX_SESSIONS = 10_000
MESSAGE_OVERHEAD = 256  # the ChatMessage object, its tuple slot, its size entry


def message_bytes(message: ChatMessage) -> int:
    """The approximate memory ``message`` holds (see the module docstring)."""
    size = MESSAGE_OVERHEAD + sys.getsizeof(message.content)
    for call in message.tool_calls:
        arguments = call.arguments
        size += sys.getsizeof(call.call_id) + sys.getsizeof(call.name)
        size += sys.getsizeof(arguments if isinstance(arguments, str) else repr(arguments))
    if message.data is not None:
        size += sys.getsizeof(repr(message.data))
    return size


@dataclass
class _Kept:
    messages: deque[tuple[ChatMessage, int]] = field(default_factory=deque)
    question: str | None = None
    bytes: int = 0
    running: int = 0  # turns begun and not yet appended


class MemoryConversationStore(ConversationStore):
    """Conversations in memory, bounded by messages, bytes and count (module docstring)."""

    suspends = False

    def __init__(
        self,
        *,
        agent_id: str = "",
        max_history: int = DEFAULT_MAX_HISTORY,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_bytes: int = DEFAULT_HISTORY_MAX_BYTES,
        max_session_bytes: int = DEFAULT_HISTORY_MAX_SESSION_BYTES,
    ) -> None:
        bounds = {
            "max_history": max_history,
            "max_sessions": max_sessions,
            "max_bytes": max_bytes,
            "max_session_bytes": max_session_bytes,
        }
        wrong = [f"{name} ({value!r})" for name, value in bounds.items() if value < 1]
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: each bound must be at least 1")
        self.agent_id = agent_id
        self._max_history = max_history
        self._max_sessions = max_sessions
        self._max_bytes = max_bytes
        self._max_session_bytes = max_session_bytes
        self._sessions: OrderedDict[str, _Kept] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def _kept(self, session_id: str) -> _Kept:
        kept = self._sessions.get(session_id)
        if kept is None:
            kept = self._sessions[session_id] = _Kept()
        self._sessions.move_to_end(session_id)
        return kept

    async def begin(self, session_id: str, *, drop_interrupted: bool = False) -> Conversation:
        kept = self._kept(session_id)
        kept.running += 1
        if drop_interrupted and kept.messages and kept.messages[-1][0].interrupted:
            self._drop_oldest(kept, newest=True)
        question, kept.question = kept.question, None
        self._enforce(keep=session_id)
        return Conversation(tuple(m for m, _ in kept.messages), question)

    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, question: str | None = None
    ) -> None:
        kept = self._kept(session_id)
        kept.running = max(0, kept.running - 1)
        for message in messages:
            size = message_bytes(message)
            kept.messages.append((message, size))
            kept.bytes += size
            self.bytes += size
        if question is not None:
            kept.question = question
        while len(kept.messages) > self._max_history:
            self._drop_oldest(kept, reason="length")
        while kept.bytes > self._max_session_bytes:
            self._drop_oldest(kept, reason="bytes")
        self._enforce(keep=session_id)

    async def peek(self, session_id: str) -> Conversation:
        kept = self._sessions.get(session_id)
        if kept is None:
            return Conversation()
        return Conversation(tuple(m for m, _ in kept.messages), kept.question)

    def _drop_oldest(self, kept: _Kept, *, reason: str = "", newest: bool = False) -> None:
        _, size = kept.messages.pop() if newest else kept.messages.popleft()
        kept.bytes -= size
        self.bytes -= size
        if reason:
            CONVERSATION_MESSAGES_DROPPED.labels(self.agent_id, reason).inc()

    def _over(self) -> str | None:
        if len(self._sessions) > self._max_sessions:
            return "count"
        if self.bytes > self._max_bytes:
            return "bytes"
        return None

    def _enforce(self, *, keep: str) -> None:
        """While over a bound: evict idle conversations oldest first, then waiting ones;
        never ``keep`` (the one just begun or written)."""
        while (reason := self._over()) is not None:
            victim = self._oldest(keep, waiting=False) or self._oldest(keep, waiting=True)
            if victim is None:
                logger.debug(
                    "agent %s: %d conversations (%d bytes) over the bounds, none evictable",
                    self.agent_id,
                    len(self._sessions),
                    self.bytes,
                )
                return
            self.bytes -= self._sessions.pop(victim).bytes
            CONVERSATION_EVICTIONS.labels(self.agent_id, reason).inc()
            logger.debug("agent %s: conversation %s evicted (%s)", self.agent_id, victim, reason)

    def _oldest(self, keep: str, *, waiting: bool) -> str | None:
        for session_id, kept in self._sessions.items():
            if session_id != keep and not kept.running and (kept.question is not None) == waiting:
                return session_id
        return None

"""``SqlConversationStore``: the conversations of one agent in the endpoint's ``sql`` store.

With ``a2a.task_store.type: sql`` the agent's session history and its pending human-input
question live in the same database as its tasks (SQLite or PostgreSQL), on the same
engine, so a restarted process or another replica behind the same Service continues any
conversation. Two tables beside the SDK's:

- ``mas_conversations(agent, session_id, question, next_seq, updated_at)``: one row per
  session; ``question`` is the pending question (NULL when none), ``next_seq`` the
  sequence number the next message gets, ``updated_at`` the last write (seconds since
  the epoch; nothing prunes sessions, as nothing prunes tasks);
- ``mas_conversation_messages(agent, session_id, seq, body)``: the messages, ``body``
  the JSON of a :class:`~mas.runtime.models.base.ChatMessage`.

Rules of :mod:`mas.runtime.history`. How they hold across replicas: :meth:`append` and
:meth:`begin` each run in one transaction that first locks the session's row (PostgreSQL
``SELECT ... FOR UPDATE``; SQLite has one writer at a time), so appends to one session are
serialized: each block takes the sequence numbers after the last committed block, and
the pending question is taken by one ``begin`` only. After each append the messages
older than the last ``max_history`` are deleted.

Errors: :class:`~mas.runtime.errors.HistoryError`, naming the database (without its
password) and the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.dml import Insert

from mas.runtime.errors import HistoryError
from mas.runtime.history import DEFAULT_MAX_HISTORY, Conversation, ConversationStore
from mas.runtime.models.base import ChatMessage, ToolCall

_METADATA = MetaData()
CONVERSATIONS = Table(
    "mas_conversations",
    _METADATA,
    Column("agent", String(63), primary_key=True),
    Column("session_id", String(255), primary_key=True),
    Column("question", Text, nullable=True),
    Column("next_seq", BigInteger, nullable=False),
    Column("updated_at", Float, nullable=False),
)
MESSAGES = Table(
    "mas_conversation_messages",
    _METADATA,
    Column("agent", String(63), primary_key=True),
    Column("session_id", String(255), primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("body", Text, nullable=False),
)


def message_to_json(message: ChatMessage) -> str:
    """The stored form of one message."""
    body: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        body["tool_calls"] = [
            {"call_id": c.call_id, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        body["name"] = message.name
    if message.interrupted:
        body["interrupted"] = True
    if message.data is not None:
        body["data"] = message.data
    return json.dumps(body, separators=(",", ":"), default=_plain)


def message_from_json(text: str) -> ChatMessage:
    """One stored message read back."""
    body = json.loads(text)
    calls = tuple(
        ToolCall(c["call_id"], c["name"], c["arguments"]) for c in body.get("tool_calls", ())
    )
    return ChatMessage(
        body["role"],
        body["content"],
        tool_calls=calls,
        tool_call_id=body.get("tool_call_id"),
        name=body.get("name"),
        interrupted=bool(body.get("interrupted", False)),
        data=body.get("data"),
    )


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class SqlConversationStore(ConversationStore):
    """Conversations in SQL tables (see the module docstring); :meth:`initialize` first."""

    def __init__(
        self,
        engine: AsyncEngine,
        agent_id: str,
        *,
        max_history: int = DEFAULT_MAX_HISTORY,
        shown_url: str = "the database",
    ) -> None:
        if max_history < 1:
            raise ValueError(f"max_history ({max_history}) must be at least 1")
        self._engine = engine
        self._agent = agent_id
        self._max_history = max_history
        self._shown = shown_url

    async def initialize(self) -> None:
        """Create the tables when they are missing."""
        async with self._engine.begin() as connection:
            await connection.run_sync(_METADATA.create_all)

    def _session(self, session_id: str) -> Any:
        return and_(CONVERSATIONS.c.agent == self._agent, CONVERSATIONS.c.session_id == session_id)

    def _messages_of(self, session_id: str) -> Any:
        return and_(MESSAGES.c.agent == self._agent, MESSAGES.c.session_id == session_id)

    def _failure(self, doing: str, session_id: str, exc: SQLAlchemyError | OSError) -> HistoryError:
        text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        reason = text[0] if text else type(exc).__name__
        return HistoryError(
            f"cannot {doing} the conversation of session {session_id!r} in {self._shown}: {reason}"
        )

    async def begin(self, session_id: str, *, drop_interrupted: bool = False) -> Conversation:
        try:
            async with self._engine.begin() as connection:
                row = (
                    await connection.execute(
                        select(CONVERSATIONS.c.question, CONVERSATIONS.c.next_seq)
                        .where(self._session(session_id))
                        .with_for_update()
                    )
                ).first()
                if row is None:
                    return Conversation()
                if drop_interrupted:
                    await self._drop_interrupted(connection, session_id)
                if row.question is not None:
                    await connection.execute(
                        update(CONVERSATIONS)
                        .where(self._session(session_id))
                        .values(question=None, updated_at=time.time())
                    )
                messages = await self._read(connection, session_id)
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure("read", session_id, exc) from None
        return Conversation(messages, row.question)

    async def peek(self, session_id: str) -> Conversation:
        try:
            async with self._engine.connect() as connection:
                row = (
                    await connection.execute(
                        select(CONVERSATIONS.c.question).where(self._session(session_id))
                    )
                ).first()
                messages = await self._read(connection, session_id)
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure("read", session_id, exc) from None
        return Conversation(messages, row.question if row is not None else None)

    async def append(
        self, session_id: str, messages: Sequence[ChatMessage], *, question: str | None = None
    ) -> None:
        if not messages and question is None:
            return
        now = time.time()
        try:
            async with self._engine.begin() as connection:
                await connection.execute(
                    _insert_missing(connection).values(
                        agent=self._agent,
                        session_id=session_id,
                        question=None,
                        next_seq=0,
                        updated_at=now,
                    )
                )
                start = (
                    await connection.execute(
                        select(CONVERSATIONS.c.next_seq)
                        .where(self._session(session_id))
                        .with_for_update()
                    )
                ).scalar_one()
                end = start + len(messages)
                values: dict[str, Any] = {"next_seq": end, "updated_at": now}
                if question is not None:
                    values["question"] = question
                await connection.execute(
                    update(CONVERSATIONS).where(self._session(session_id)).values(**values)
                )
                if messages:
                    await connection.execute(
                        insert(MESSAGES),
                        [
                            {
                                "agent": self._agent,
                                "session_id": session_id,
                                "seq": start + offset,
                                "body": message_to_json(message),
                            }
                            for offset, message in enumerate(messages)
                        ],
                    )
                await connection.execute(
                    delete(MESSAGES).where(
                        self._messages_of(session_id), MESSAGES.c.seq < end - self._max_history
                    )
                )
        except (SQLAlchemyError, OSError) as exc:
            raise self._failure("store", session_id, exc) from None

    async def _read(self, connection: AsyncConnection, session_id: str) -> tuple[ChatMessage, ...]:
        newest = (
            select(MESSAGES.c.seq, MESSAGES.c.body)
            .where(self._messages_of(session_id))
            .order_by(MESSAGES.c.seq.desc())
            .limit(self._max_history)
        )
        rows = (await connection.execute(newest)).all()
        return tuple(message_from_json(r.body) for r in reversed(rows))

    async def _drop_interrupted(self, connection: AsyncConnection, session_id: str) -> None:
        last = (
            await connection.execute(
                select(MESSAGES.c.seq, MESSAGES.c.body)
                .where(self._messages_of(session_id))
                .order_by(MESSAGES.c.seq.desc())
                .limit(1)
            )
        ).first()
        if last is not None and message_from_json(last.body).interrupted:
            await connection.execute(
                delete(MESSAGES).where(self._messages_of(session_id), MESSAGES.c.seq == last.seq)
            )


def _insert_missing(connection: AsyncConnection) -> Insert:
    """``INSERT`` of a session row that does nothing when the row exists."""
    dialect = connection.dialect.name
    if dialect == "postgresql":
        return postgresql.insert(CONVERSATIONS).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(CONVERSATIONS).on_conflict_do_nothing()
    raise HistoryError(
        f"the conversation store supports SQLite and PostgreSQL, not {dialect!r}; accepted: "
        "sqlite+aiosqlite:///path or postgresql+asyncpg://user@host:port/db"
    )

"""The rules of ``ConversationStore`` (mas.runtime.history), kept alike by the memory store
and the sql store on SQLite and PostgreSQL; and what a turn says when the store is down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine
from tests.a2a.a2a_support import free_port

from library_ioa.plugins.a2a.server.stores.sql_history import (
    SqlConversationStore,
    message_from_json,
    message_to_json,
)
from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.errors import HistoryError
from mas.runtime.history import ConversationStore
from mas.runtime.memory_history import MemoryConversationStore
from mas.runtime.models.base import ChatMessage, ToolCall
from mas.runtime.models.echo import EchoModel
from mas.runtime.turns import TurnEnded, TurnInput

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ConversationStore]:
    if request.param == "memory":
        yield MemoryConversationStore(max_history=4)
        return
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path}/history.db"
    else:
        url = request.getfixturevalue("pg_url")
    engine = create_async_engine(url)
    sql = SqlConversationStore(engine, "a", max_history=4)
    await sql.initialize()
    try:
        yield sql
    finally:
        await engine.dispose()


def said(*texts: str) -> list[ChatMessage]:
    return [ChatMessage("user", t) for t in texts]


async def test_blocks_keep_their_order_and_the_newest_messages(store: ConversationStore) -> None:
    assert (await store.begin("s")).messages == ()
    await store.append("s", said("1", "2"))
    await store.append("s", said("3"))
    await store.append("other", said("x"))
    assert [m.content for m in (await store.begin("s")).messages] == ["1", "2", "3"]
    await store.append("s", said("4", "5"))
    assert [m.content for m in (await store.peek("s")).messages] == ["2", "3", "4", "5"]
    assert [m.content for m in (await store.peek("other")).messages] == ["x"]


async def test_a_pending_question_is_taken_by_one_turn(store: ConversationStore) -> None:
    await store.append("s", said("book"), question="Which day?")
    assert (await store.peek("s")).question == "Which day?"
    assert (await store.begin("s")).question == "Which day?"
    assert (await store.begin("s")).question is None
    await store.append("s", said("friday"))  # a turn that asks nothing leaves none behind
    assert (await store.peek("s")).question is None


async def test_a_replace_steer_drops_the_interrupted_partial_reply(
    store: ConversationStore,
) -> None:
    await store.append("s", [*said("story"), ChatMessage("assistant", "one ", interrupted=True)])
    assert len((await store.begin("s")).messages) == 2
    kept = await store.begin("s", drop_interrupted=True)
    assert [m.content for m in kept.messages] == ["story"]
    assert [m.content for m in (await store.begin("s", drop_interrupted=True)).messages] == [
        "story"
    ]


async def test_concurrent_appends_never_interleave(store: ConversationStore) -> None:
    await asyncio.gather(*(store.append("s", said(f"{i}a", f"{i}b")) for i in range(2)))
    contents = [m.content for m in (await store.peek("s")).messages]
    assert contents in (["0a", "0b", "1a", "1b"], ["1a", "1b", "0a", "0b"])


def test_every_field_of_a_message_survives_the_stored_form() -> None:
    message = ChatMessage(
        "assistant",
        "calling",
        tool_calls=(
            ToolCall("c1", "ask_helper", {"message": "tea", "n": [1, 2]}),
            ToolCall("c2", "x", "{}"),
        ),
        tool_call_id="c0",
        name="helper",
        interrupted=True,
        data={"order": {"items": ["a"]}},
    )
    assert message_from_json(message_to_json(message)) == message


async def test_a_turn_on_an_unreachable_store_fails_with_a_message_naming_it() -> None:
    url = f"postgresql+asyncpg://mas:secret@127.0.0.1:{free_port()}/nowhere"
    engine = create_async_engine(url)
    shown = "postgresql+asyncpg://mas:***@127.0.0.1/nowhere"
    store = SqlConversationStore(engine, "a", shown_url=shown)
    agent = Agent("a", AgentManifest(), EchoModel(), DelegationContract("a", {}), history=store)
    try:
        events = [e async for e in agent.run(TurnInput("s", "t", "hello"))]
        with pytest.raises(HistoryError, match=r"cannot read the conversation of session 's'"):
            await store.peek("s")
    finally:
        await engine.dispose()
    (ended,) = events
    assert isinstance(ended, TurnEnded) and ended.status == "failed"
    assert ended.message.startswith(
        f"agent 'a' cannot read the conversation of session 's' in {shown}: "
    )
    assert "secret" not in ended.message


async def test_a_turn_whose_history_the_database_refuses_ends_failed_with_its_reply(
    tmp_path: Path,
) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/full.db")
    store = SqlConversationStore(engine, "a", shown_url="sqlite+aiosqlite:///full.db")
    await store.initialize()
    async with engine.begin() as connection:
        await connection.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON mas_conversation_messages "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    agent = Agent("a", AgentManifest(), EchoModel(), DelegationContract("a", {}), history=store)
    try:
        events = [e async for e in agent.run(TurnInput("s", "t", "hello there"))]
        assert await agent.history("s") == ()
    finally:
        await engine.dispose()
    ended = events[-1]
    assert isinstance(ended, TurnEnded)
    assert (ended.status, ended.text) == ("failed", "hello there")
    assert ended.message == (
        "agent 'a' answered, but a follow-up would miss this turn: cannot store the "
        "conversation of session 's' in sqlite+aiosqlite:///full.db: database or disk is full"
    )

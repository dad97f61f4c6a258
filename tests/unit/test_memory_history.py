"""The in-memory conversation store is bounded by bytes (in all and per conversation) as well
as by messages and conversations: idle conversations go first, then those waiting for a
person's answer, never one with a turn running."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mas.infra.models import DEFAULT_HISTORY_MAX_BYTES, AgentManifest, TaskStoreOptions
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.memory_history import MESSAGE_OVERHEAD, MemoryConversationStore, message_bytes
from mas.runtime.metrics import REGISTRY
from mas.runtime.models.base import ChatMessage, ModelOutput, ModelPlugin, ModelRequest, TextChunk
from mas.runtime.turns import TurnEnded, TurnInput

pytestmark = pytest.mark.timeout(30)

KIB = 1024


def big(n_kib: int, text: str = "x") -> list[ChatMessage]:
    return [ChatMessage("user", text * (n_kib * KIB))]


def evictions(agent: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "maslab_conversation_evictions_total", {"agent": agent, "reason": reason}
    )
    return value or 0.0


async def turn(store: MemoryConversationStore, session: str, messages: list[ChatMessage]) -> None:
    await store.begin(session)
    await store.append(session, messages)


async def test_past_max_bytes_the_least_recently_used_conversations_go() -> None:
    store = MemoryConversationStore(agent_id="u-bytes", max_bytes=1024 * KIB)
    before = evictions("u-bytes", "bytes")
    for n in range(5):
        await turn(store, f"s{n}", big(300))
    assert store.bytes <= 1024 * KIB
    assert (await store.peek("s0")).messages == ()
    assert (await store.peek("s4")).messages[0].content == "x" * 300 * KIB
    assert len(store) == 3
    assert evictions("u-bytes", "bytes") == before + 2


async def test_a_conversation_used_again_is_young_again() -> None:
    store = MemoryConversationStore(agent_id="u-young", max_bytes=1024 * KIB)
    for n in range(3):
        await turn(store, f"s{n}", big(300))
    await turn(store, "s0", [ChatMessage("user", "again")])
    await turn(store, "s3", big(300))  # over: s1 is now the oldest
    assert (await store.peek("s1")).messages == ()
    assert len((await store.peek("s0")).messages) == 2


async def test_a_conversation_is_bounded_by_its_own_bytes_oldest_messages_dropped() -> None:
    store = MemoryConversationStore(agent_id="u-session", max_session_bytes=700 * KIB)
    for text in "abc":
        await turn(store, "s", big(300, text))
    kept = (await store.peek("s")).messages
    assert [m.content[0] for m in kept] == ["b", "c"]
    assert store.bytes == sum(message_bytes(m) for m in kept) <= 700 * KIB
    dropped = REGISTRY.get_sample_value(
        "maslab_conversation_messages_dropped_total", {"agent": "u-session", "reason": "bytes"}
    )
    assert dropped == 1


async def test_a_conversation_with_a_turn_running_is_never_evicted() -> None:
    store = MemoryConversationStore(agent_id="u-running", max_bytes=1024 * KIB)
    await turn(store, "busy", big(600))
    await store.begin("busy")  # its next turn runs from here to its append
    for n in range(3):
        await turn(store, f"s{n}", big(300))
    assert len((await store.peek("busy")).messages) == 1
    await store.append("busy", [ChatMessage("assistant", "done")])
    await turn(store, "s3", big(300))
    await turn(store, "s4", big(300))  # busy is idle again, and the oldest
    assert (await store.peek("busy")).messages == ()


async def test_conversations_waiting_for_an_answer_go_after_the_idle_ones() -> None:
    store = MemoryConversationStore(agent_id="u-waiting", max_bytes=1024 * KIB)
    await store.begin("asked")
    await store.append("asked", big(300), question="which colour?")
    for n in range(4):
        await turn(store, f"s{n}", big(300))
    assert (await store.peek("asked")).question == "which colour?"  # idle ones went first
    assert (await store.peek("s0")).messages == ()
    for n in range(3):
        await store.begin(f"w{n}")
        await store.append(f"w{n}", big(300), question=f"question {n}?")
    peeked = await store.peek("asked")  # no idle one left: the oldest waiting one went
    assert peeked.question is None and peeked.messages == ()
    assert store.bytes <= 1024 * KIB


async def test_past_max_sessions_running_conversations_stay() -> None:
    store = MemoryConversationStore(agent_id="u-count", max_sessions=2)
    await store.begin("busy")
    await turn(store, "a", [ChatMessage("user", "a")])
    await turn(store, "b", [ChatMessage("user", "b")])
    assert len(store) == 2 and (await store.peek("a")).messages == ()
    assert evictions("u-count", "count") == 1


def test_a_message_costs_its_text_and_a_fixed_overhead() -> None:
    size = message_bytes(ChatMessage("user", "x" * 1000))
    assert 1000 + MESSAGE_OVERHEAD <= size <= 1100 + MESSAGE_OVERHEAD


def test_bad_bounds_name_the_field_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"max_bytes \(0\).*at least 1"):
        MemoryConversationStore(max_bytes=0)


def test_the_history_bounds_belong_to_the_memory_store() -> None:
    with pytest.raises(ValueError, match="type 'sql' takes no history_max_bytes"):
        TaskStoreOptions(type="sql", url="sqlite+aiosqlite:///t.db", history_max_bytes=2**20)


class Echo(ModelPlugin):
    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        yield TextChunk(request.last_user_text)


async def test_an_agent_by_default_keeps_no_more_than_the_default_bytes() -> None:
    """Before the byte bounds, 40 conversations of 2 MiB each were all kept (80 MiB)."""
    agent = Agent("u-default", AgentManifest(), Echo(), DelegationContract("u-default", {}))
    part = "y" * (1024 * KIB)
    for n in range(40):
        async for event in agent.run(TurnInput(f"c{n}", f"t{n}", part)):
            assert not isinstance(event, TurnEnded) or event.status == "completed"
    assert await agent.history("c0") == ()
    assert len(await agent.history("c39")) == 2
    store = agent.conversations
    assert isinstance(store, MemoryConversationStore)
    assert store.bytes <= DEFAULT_HISTORY_MAX_BYTES

"""An agent served over MCP: the official MCP client calls its door; its MCP and A2A doors
share one session mailbox (ordering and history); progress while a turn streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from tests.ports import free_port
from tests.session_modes.session_modes_support import STEP, application, ask_a2a, scripted

from mas.ctl.session.modes import SessionProcess
from mas.infra.wiring import wire

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

COUNT = {"match": "^count", "chunks": ["one ", "two ", "three"]}
SLOW = {"match": "^slow", "chunks": ["a ", "b ", "c ", "d"], "chunk_delay_ms": 400}
BOOK = {"match": "^book", "reply": "Sure, I can book that.", "ask": "Which day?"}
ASK = {"match": "^bare", "ask": "Which one?"}


@pytest.fixture
async def desk(control_dir: Path) -> AsyncIterator[tuple[SessionProcess, str, str]]:
    """A process serving agent 'desk' over A2A and over MCP; yields it and both urls."""
    a2a, mcp = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    doc = application(
        {
            "desk": {
                "description": "Answers at the front desk.",
                "skills": [{"id": "greet", "name": "Greeting", "description": "Says hello."}],
                "model": scripted(COUNT, SLOW, BOOK, ASK, default="heard: {input}"),
            }
        },
        {
            "desk": {"url": a2a, "usage": "deploy"},
            "desk-mcp": {"protocol": "mcp", "agent": "desk", "url": mcp, "usage": "deploy"},
        },
    )
    process = SessionProcess(wire(doc), control=False)
    await process.start()
    try:
        yield process, a2a, f"{mcp}/mcp"
    finally:
        await process.aclose(drain=False)


async def test_the_official_client_lists_and_calls_the_agents_tools(
    desk: tuple[SessionProcess, str, str],
) -> None:
    process, _, url = desk
    async with asyncio.timeout(STEP), Client(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(tools) == ["ask", "greet"]
        assert tools["ask"].description == "Ask the agent 'desk': Answers at the front desk."
        assert tools["ask"].input_schema["required"] == ["message"]
        assert tools["greet"].title == "Greeting"
        result = await client.call_tool("ask", {"message": "hello", "session": "s1"})
    assert not result.is_error
    assert [block.text for block in result.content] == ["heard: hello"]  # type: ignore[union-attr]
    assert result.structured_content == {
        "session": "s1",
        "status": "completed",
        "text": "heard: hello",
    }
    assert "listening desk: MCP " + url in process.describe()


async def test_progress_notifications_follow_the_streamed_text(
    desk: tuple[SessionProcess, str, str],
) -> None:
    _, _, url = desk
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with asyncio.timeout(STEP), Client(url) as client:
        result = await client.call_tool("greet", {"message": "count"}, progress_callback=progress)
    assert result.structured_content is not None
    assert result.structured_content["text"] == "one two three"
    assert seen == [(1, "one "), (2, "two "), (3, "three")]


async def test_the_mcp_and_a2a_doors_share_one_session(
    desk: tuple[SessionProcess, str, str],
) -> None:
    process, a2a, url = desk
    assert await ask_a2a(a2a, "first over A2A", context_id="shared") == "heard: first over A2A"
    async with asyncio.timeout(STEP), Client(url) as client:
        result = await client.call_tool("ask", {"message": "then over MCP", "session": "shared"})
    assert result.structured_content == {
        "session": "shared",
        "status": "completed",
        "text": "heard: then over MCP",
    }
    history = [(m.role, m.content) for m in await process.host.runner("desk").history("shared")]  # type: ignore[attr-defined]
    assert history == [
        ("user", "first over A2A"),
        ("assistant", "heard: first over A2A"),
        ("user", "then over MCP"),
        ("assistant", "heard: then over MCP"),
    ]


async def test_a_call_without_a_session_gets_a_new_one_it_can_continue(
    desk: tuple[SessionProcess, str, str],
) -> None:
    process, _, url = desk
    async with asyncio.timeout(STEP), Client(url) as client:
        first = await client.call_tool("ask", {"message": "a"})
        assert first.structured_content is not None
        session = first.structured_content["session"]
        assert session.startswith("mcp-")
        await client.call_tool("ask", {"message": "b", "session": session})
    runner = process.host.runner("desk")
    assert [m.content for m in await runner.history(session)] == ["a", "heard: a", "b", "heard: b"]  # type: ignore[attr-defined]


async def test_a_cancelled_call_stops_waiting_and_the_turn_runs_to_its_end(
    desk: tuple[SessionProcess, str, str],
) -> None:
    process, _, url = desk
    runner = process.host.runner("desk")
    first_chunk = asyncio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        first_chunk.set()

    async with asyncio.timeout(STEP), Client(url) as client:
        call = asyncio.create_task(
            client.call_tool(
                "ask", {"message": "slow", "session": "c1"}, progress_callback=progress
            )
        )
        await first_chunk.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # As tasks/cancel: the turn is not interrupted; its reply lands in the history.
        while [m.content for m in await runner.history("c1")] != ["slow", "a b c d"]:  # type: ignore[attr-defined]
            await asyncio.sleep(0.05)
        after = await client.call_tool("ask", {"message": "still there?", "session": "c1"})
    assert after.structured_content is not None
    assert after.structured_content["text"] == "heard: still there?"


async def test_an_input_required_answer_carries_the_text_before_the_question(
    desk: tuple[SessionProcess, str, str],
) -> None:
    _, _, url = desk
    async with asyncio.timeout(STEP), Client(url) as client:
        asked = await client.call_tool("ask", {"message": "book a table", "session": "b1"})
        answered = await client.call_tool("ask", {"message": "friday", "session": "b1"})
        bare = await client.call_tool("ask", {"message": "bare", "session": "b2"})
    assert not asked.is_error
    said = "Sure, I can book that.\n\nWhich day?"
    assert [block.text for block in asked.content] == [said]  # type: ignore[union-attr]
    assert asked.structured_content == {
        "session": "b1",
        "status": "input_required",
        "text": said,
        "question": "Which day?",
    }
    assert answered.structured_content == {
        "session": "b1",
        "status": "completed",
        "text": "heard: friday",
    }
    assert [block.text for block in bare.content] == ["Which one?"]  # type: ignore[union-attr]
    assert bare.structured_content == {
        "session": "b2",
        "status": "input_required",
        "text": "Which one?",
        "question": "Which one?",
    }

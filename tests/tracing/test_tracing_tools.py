"""A tool-server call is a span of its own under the turn that made it."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tests.mcp.mcp_servers import ToolServer
from tests.runtime.runtime_support import collect, ended, scripted, wired

from mas.ctl.session.host import RuntimeHost
from mas.runtime.turns import TurnInput

pytestmark = pytest.mark.integration

MODEL = scripted(
    {"match": "^shout (?P<what>.+)", "tool": {"name": "shout", "arguments": {"text": "{what}"}}},
    {"match": "^fail", "tool": {"name": "boom", "arguments": {"why": "{input}"}}},
    default={"reply": "no tool for {input}"},
)


async def test_each_tool_call_is_an_execute_tool_span_under_its_turn(
    spans: InMemorySpanExporter,
) -> None:
    async with ToolServer() as server:
        app = wired(
            {"lead": {"tools": [{"server": "tools"}], "model": MODEL}},
            endpoints={"tools": {"protocol": "mcp", "usage": "use", "url": server.url}},
        )
        host = RuntimeHost.build(app, ["lead"])
        try:
            for text in ("shout hi", "fail now"):
                events = await collect(
                    host.mailbox("lead").submit(TurnInput("s", text, text)).events()
                )
                assert ended(events).status == "completed"
        finally:
            await host.aclose()
    finished = spans.get_finished_spans()
    calls = {s.name: s for s in finished if s.name.startswith("execute_tool ")}
    assert set(calls) == {"execute_tool shout", "execute_tool boom"}
    turns = {s.context.span_id: s for s in finished if s.name == "turn lead"}
    for call in calls.values():
        attributes = call.attributes or {}
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert (attributes["mas.agent"], attributes["mas.tool.server"]) == ("lead", "tools")
        assert call.parent is not None and call.parent.span_id in turns
    assert calls["execute_tool shout"].status.status_code != StatusCode.ERROR
    assert calls["execute_tool boom"].status.status_code == StatusCode.ERROR


async def test_a_turn_a_budget_stopped_carries_the_budget_on_its_span(
    spans: InMemorySpanExporter,
) -> None:
    model = scripted({"match": "^", "reply": "long answer", "usage": {"input": 90, "output": 30}})
    model["budget"] = {"turn": 100}
    host = RuntimeHost.build(wired({"spender": {"model": model}}), ["spender"], env={})
    try:
        events = await collect(
            host.mailbox("spender").submit(TurnInput("s-1", "t-1", "go")).events()
        )
    finally:
        await host.aclose()
    assert ended(events).status == "failed"
    [turn] = [s for s in spans.get_finished_spans() if s.name == "turn spender"]
    [event] = [e for e in turn.events if e.name == "maslab.budget.exhausted"]
    assert dict(event.attributes or {}) == {
        "maslab.budget": "turn",
        "maslab.budget.cap": 100,
        "maslab.budget.used": 120,
        "mas.session_id": "s-1",
    }
    assert turn.status.status_code == StatusCode.ERROR
    assert "turn budget of 100 tokens exhausted: 120 used" in (turn.status.description or "")

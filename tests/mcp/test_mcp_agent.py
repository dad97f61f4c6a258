"""An agent using MCP tools through the runtime host: the scripted model and the openai
plugin (against the local chat-completions server), tool errors, timeouts, images."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Mapping
from typing import Any

import pytest
from tests.mcp.mcp_servers import PNG_BYTES, ToolServer
from tests.runtime.fake_chat_server import FakeChatServer, Plan, text_chunks, tool_call_chunks
from tests.runtime.runtime_support import DEADLINE, collect, ended, scripted, wired

from mas.ctl.session.host import RuntimeHost
from mas.infra.models import SecretKeyRef
from mas.infra.secrets import secret_env_name
from mas.runtime import metrics
from mas.runtime.turns import ArtifactEmitted, Delegated, TurnEvent, TurnInput

pytestmark = pytest.mark.integration

TOKEN = SecretKeyRef(name="tools-token", key="tenant")


def _host(
    url: str, model: Mapping[str, Any], *, timeout: float = 5, names: list[str] | None = None
) -> RuntimeHost:
    grant: dict[str, Any] = {"server": "tools"}
    if names is not None:
        grant["names"] = names
    app = wired(
        {"lead": {"delegates_to": ["helper"], "tools": [grant], "model": model}, "helper": {}},
        endpoints={
            "tools": {
                "protocol": "mcp",
                "usage": "use",
                "url": url,
                "timeout": timeout,
                "headers": {"X-Tenant": {"secret_key_ref": TOKEN.model_dump()}},
            }
        },
    )
    return RuntimeHost.build(app, ["lead"], env={secret_env_name(TOKEN): "t-42"})


async def _turn(host: RuntimeHost, text: str) -> list[TurnEvent]:
    return await collect(host.mailbox("lead").submit(TurnInput("s", "t1", text)).events())


async def _one_turn(
    url: str, model: Mapping[str, Any], text: str, *, names: list[str] | None = None
) -> list[TurnEvent]:
    """Build the host, run one turn of 'lead', close the host."""
    host = _host(url, model, names=names)
    try:
        return await _turn(host, text)
    finally:
        await host.aclose()


def _tool_events(events: list[TurnEvent]) -> list[tuple[str, bool, str]]:
    return [(e.target, e.ok, e.detail) for e in events if isinstance(e, Delegated)]


def _count(tool: str, outcome: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "maslab_tool_calls_total",
        {"agent": "lead", "server": "tools", "tool": tool, "outcome": outcome},
    )
    return value or 0.0


SHOUT = scripted(
    {
        "match": "^shout (?P<what>.+)",
        "tool": {"name": "shout", "arguments": {"text": "{what}"}},
        "reply": "the server says {result}",
    },
    {
        "match": "^fail",
        "tool": {"name": "boom", "arguments": {"why": "{input}"}},
        "reply": "{result}",
    },
    {"match": "^wait", "tool": {"name": "hang"}, "reply": "{result}"},
    {"match": "^draw", "tool": {"name": "picture"}, "reply": "{result}"},
    default={"reply": "no tool for {input}"},
)


async def test_the_scripted_model_calls_a_named_tool_with_arguments(
    tool_server: ToolServer,
) -> None:
    events = await _one_turn(tool_server.url, SHOUT, "shout hello")
    assert ended(events).status == "completed"
    assert ended(events).text == "the server says HELLO"
    assert tool_server.calls == [("shout", {"text": "hello"})]
    assert tool_server.headers[0]["x-tenant"] == "t-42"  # the Secret-backed header
    [(target, ok, detail)] = _tool_events(events)
    assert (target, ok, detail) == ("tools/shout", True, "HELLO")


async def test_a_tool_error_goes_back_to_the_model_and_the_turn_completes(
    tool_server: ToolServer,
) -> None:
    before = _count("boom", "tool_error")
    events = await _one_turn(tool_server.url, SHOUT, "fail now")
    assert ended(events).status == "completed"
    assert ended(events).text == (
        "tool 'boom' reported an error: Error executing tool boom: boom: fail now"
    )
    assert _tool_events(events)[0][:2] == ("tools/boom", False)
    assert _count("boom", "tool_error") == before + 1


async def test_a_hanging_tool_obeys_the_endpoint_timeout(tool_server: ToolServer) -> None:
    before = _count("hang", "timeout")
    host = _host(tool_server.url, SHOUT, timeout=0.5)
    try:
        # A listing may miss the short timeout on a loaded machine; the agent tries again at
        # its next turn. Wait until the tools are listed, then test the call's timeout.
        toolbox = host.runner("lead").toolbox  # type: ignore[attr-defined]
        async with asyncio.timeout(DEADLINE):
            while "hang" not in [tool.name for tool in (await toolbox.tools())[0]]:
                pass
        events = await _turn(host, "wait for it")
    finally:
        await host.aclose()
    assert ended(events).status == "completed"
    assert ended(events).text == (
        f"tool 'hang' failed: MCP server 'tools' at {tool_server.url}: tools/call hang: "
        "no answer within 0.5 s"
    )
    assert _count("hang", "timeout") == before + 1


async def test_an_image_comes_back_as_an_artifact_of_the_turn(tool_server: ToolServer) -> None:
    events = await _one_turn(tool_server.url, SHOUT, "draw")
    [artifact] = [e for e in events if isinstance(e, ArtifactEmitted)]
    assert (artifact.name, artifact.content, artifact.media_type) == (
        "tools/picture-1",
        PNG_BYTES,
        "image/png",
    )
    assert ended(events).text == "[image image/png returned as artifact picture-1]"


async def test_a_dead_server_is_reported_and_the_turn_goes_on() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    before = _count("tools/list", "unreachable")
    events = await _one_turn(url, SHOUT, "hello")
    assert ended(events).text == "no tool for hello"
    [(target, ok, detail)] = _tool_events(events)
    assert (target, ok) == ("tools", False)
    assert detail.startswith(
        f"tool server 'tools' offers no tools this turn: MCP server 'tools' at {url}"
    )
    assert _count("tools/list", "unreachable") == before + 1


async def test_a_filter_offers_only_the_named_tools_and_reports_unknown_names(
    tool_server: ToolServer,
) -> None:
    async with FakeChatServer() as chat:
        chat.plans.append(Plan(text_chunks("ok")))
        model = {"type": "openai", "params": {"base_url": chat.base_url, "model": "m"}}
        events = await _one_turn(tool_server.url, model, "hi", names=["add", "missing"])
    offered = [t["function"]["name"] for t in chat.requests[0].body["tools"]]
    assert offered == ["delegate_to_helper", "add"]
    [(target, ok, detail)] = _tool_events(events)
    assert (target, ok) == ("tools", False)
    assert detail.startswith("tool server 'tools' lists no tool 'missing' (spec.tools names it)")


async def test_the_openai_plugin_offers_mcp_tools_as_functions_and_calls_them(
    tool_server: ToolServer,
) -> None:
    async with FakeChatServer() as chat:
        chat.plans.append(Plan(tool_call_chunks("call_1", "add", json.dumps({"a": 2, "b": 3}))))
        chat.plans.append(Plan(text_chunks("2 + 3 is ", "5.")))
        model = {"type": "openai", "params": {"base_url": chat.base_url, "model": "m"}}
        events = await _one_turn(tool_server.url, model, "what is 2 + 3?")
    assert ended(events).text == "2 + 3 is 5."
    assert tool_server.calls == [("add", {"a": 2, "b": 3})]
    functions = {t["function"]["name"]: t["function"] for t in chat.requests[0].body["tools"]}
    assert sorted(functions) == [
        "add",
        "boom",
        "delegate_to_helper",
        "hang",
        "picture",
        "readme",
        "shout",
    ]
    assert functions["add"]["description"] == "Add two integers."
    assert functions["add"]["parameters"]["required"] == ["a", "b"]
    assert chat.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "5",
    }

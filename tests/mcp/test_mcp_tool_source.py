"""The ``mcp`` tool source against a real MCP server (official SDK) on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tests.mcp.mcp_servers import PNG_BYTES, ToolServer

from library_ioa.plugins.mcp.tool_source import MCPToolSource
from mas.infra.identity import IDENTITY_HEADER
from mas.runtime.boundary.tools import ToolSourceError
from mas.runtime.errors import PluginConfigError
from mas.runtime.identity.token_file import TokenFile

pytestmark = pytest.mark.integration


def _source(url: str, timeout: float = 10.0) -> MCPToolSource:
    return MCPToolSource(url=url, server="tools", headers={"X-Tenant": "t1"}, timeout=timeout)


async def test_lists_every_tool_with_its_json_schema(tool_server: ToolServer) -> None:
    tools = {spec.name: spec for spec in await _source(tool_server.url).list_tools()}
    assert sorted(tools) == ["add", "boom", "hang", "picture", "readme", "shout"]
    assert tools["add"].description == "Add two integers."
    assert tools["add"].parameters["required"] == ["a", "b"]
    assert tools["add"].parameters["properties"]["a"]["type"] == "integer"
    assert tools["add"].as_openai()["function"]["name"] == "add"


async def test_a_call_answers_text_and_structured_content(tool_server: ToolServer) -> None:
    outcome = await _source(tool_server.url).call("add", {"a": 2, "b": 40})
    assert outcome.ok
    assert outcome.text == "42"  # the structured {"result": 42} only repeats it
    assert tool_server.calls == [("add", {"a": 2, "b": 40})]
    shouted = await _source(tool_server.url).call("shout", {"text": "hi"})
    assert (shouted.ok, shouted.text) == (True, "HI")
    assert tool_server.headers[0]["x-tenant"] == "t1"


async def test_a_tool_error_is_a_failed_outcome_with_the_servers_message(
    tool_server: ToolServer,
) -> None:
    outcome = await _source(tool_server.url).call("boom", {"why": "no disk"})
    assert not outcome.ok
    assert outcome.text == "Error executing tool boom: boom: no disk"


async def test_an_image_and_a_resource_become_artifacts(tool_server: ToolServer) -> None:
    image = await _source(tool_server.url).call("picture", {})
    assert image.ok
    assert image.text == "[image image/png returned as artifact picture-1]"
    (artifact,) = image.artifacts
    assert (artifact.kind, artifact.name, artifact.content, artifact.media_type) == (
        "file",
        "picture-1",
        PNG_BYTES,
        "image/png",
    )
    resource = await _source(tool_server.url).call("readme", {})
    assert resource.text.endswith("[resource file:///readme.txt]\nread me first")
    assert [(a.kind, a.text) for a in resource.artifacts] == [("text", "read me first")]


async def test_a_hanging_tool_obeys_the_timeout(tool_server: ToolServer) -> None:
    with pytest.raises(ToolSourceError) as caught:
        await _source(tool_server.url, timeout=0.5).call("hang", {})
    assert caught.value.reason == "timeout"
    assert str(caught.value) == (
        f"MCP server 'tools' at {tool_server.url}: tools/call hang: no answer within 0.5 s"
    )


async def test_a_dead_server_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ToolSourceError) as caught:
        await _source(f"http://127.0.0.1:{port}/mcp").list_tools()
    assert caught.value.reason == "unreachable"
    assert "cannot connect (ConnectError" in str(caught.value)


async def test_a_wrong_path_is_reported_not_raised_as_a_traceback(tool_server: ToolServer) -> None:
    with pytest.raises(ToolSourceError) as caught:
        await _source(tool_server.url.replace("/mcp", "/nope")).list_tools()
    assert caught.value.reason in ("unreachable", "protocol")
    assert "tools/list" in str(caught.value)


def test_a_url_that_is_not_http_is_a_config_error() -> None:
    with pytest.raises(PluginConfigError, match=r"spec.endpoints.tools.url: 'ftp://x/mcp'"):
        MCPToolSource(url="ftp://x/mcp", server="tools")


async def test_each_call_carries_the_callers_current_token(
    tool_server: ToolServer, tmp_path: Path
) -> None:
    volume = tmp_path / "token"
    volume.write_text("token-before\n")
    tokens = TokenFile(volume, check_interval=0)
    source = MCPToolSource(
        url=tool_server.url, server="tools", headers={"X-Tenant": "t1"}, identity=tokens.current
    )
    await source.call("shout", {"text": "one"})
    volume.write_text("token-after")  # the kubelet rotated it
    await source.call("shout", {"text": "two"})
    await _source(tool_server.url).call("shout", {"text": "three"})  # a source without one
    assert [h.get(IDENTITY_HEADER) for h in tool_server.headers] == [
        "token-before",
        "token-after",
        None,
    ]
    assert all(h["x-tenant"] == "t1" for h in tool_server.headers)

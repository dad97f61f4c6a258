"""``mas-ctl run-mas`` with MCP tools, as real processes: the example Application with its
example MCP server (scripted models), and an openai-model agent whose local
chat-completions server asks for an MCP tool."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from tests.conftest import EXAMPLES
from tests.mcp.mcp_servers import ToolServer
from tests.ports import free_port
from tests.runtime.fake_chat_server import FakeChatServer, Plan, text_chunks, tool_call_chunks
from tests.session_modes.session_modes_support import (
    START,
    MasCtl,
    application,
    environment,
    mas_ctl,
    write_app,
)

COMPLIANCE_APP = Path(__file__).resolve().parents[2] / "compliance" / "mcp" / "application.yaml"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@contextlib.asynccontextmanager
async def example_tool_server(control_dir: Path) -> AsyncIterator[str]:
    """``examples/mcp_text_tools.py`` on a free port; yields the url it announces."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "mcp_text_tools.py"),
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(control_dir),
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(START):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("serving MCP text tools at "), line
        yield line.removeprefix("serving MCP text tools at ").strip()
    finally:
        process.terminate()
        await process.communicate()


async def run_example(control_dir: Path, tools_url: str, message: str) -> tuple[int, str, str]:
    """``run-mas`` of the example, its listeners on free ports, its tool server at ``tools_url``."""
    return await mas_ctl(
        control_dir,
        "run-mas",
        "-f",
        str(EXAMPLES / "agency.yaml"),
        "--override",
        f"infra:spec.endpoints.concierge.url=http://127.0.0.1:{free_port()}",
        "--override",
        f"infra:spec.endpoints.concierge-mcp.url=http://127.0.0.1:{free_port()}",
        "--override",
        f"infra:spec.endpoints.researcher.url=http://127.0.0.1:{free_port()}",
        "--override",
        f"infra:spec.endpoints.text-tools.url={tools_url}",
        "-m",
        message,
    )


async def test_the_example_summarizer_uses_the_example_mcp_server(
    tmp_path: Path, control_dir: Path
) -> None:
    async with example_tool_server(control_dir) as url:
        code, out, err = await run_example(control_dir, url, "summarize: the cat sat on the mat")
    assert code == 0, err
    assert json.loads(out.removeprefix("summary of your notes: ")) == {
        "words": 6,
        "characters": 22,
    }
    lines = err.splitlines()
    assert f"tools summarizer -> text-tools: mcp {url} (tools: word_count)" in lines
    assert '· summarizer -> text-tools/word_count: ok: { "words": 6, "characters": 22 }' in lines, (
        err
    )
    assert "Traceback" not in err


async def test_the_example_says_so_when_its_mcp_server_is_down(
    tmp_path: Path, control_dir: Path
) -> None:
    down = f"http://127.0.0.1:{free_port()}/mcp"
    code, out, err = await run_example(control_dir, down, "summarize: the cat sat")
    # The scripted summarizer insists on its tool, so its turn fails; the concierge reads
    # that failure as a tool error and answers with it: no crashed turn, no traceback.
    assert code == 0, err
    assert out.startswith("agent 'summarizer' failed: "), out
    notice = (
        "· summarizer -> tools: failed: tool server 'text-tools' offers no tools this turn: "
        f"MCP server 'text-tools' at {down}: tools/list: cannot connect (ConnectError"
    )
    assert any(line.startswith(notice) for line in err.splitlines()), err
    assert "the scripted rule calls the tool 'word_count', which agent 'summarizer'" in err
    assert "Traceback" not in err


async def test_an_openai_agent_calls_an_mcp_tool_in_run_mas(
    tmp_path: Path, control_dir: Path
) -> None:
    async with ToolServer() as tools, FakeChatServer() as chat:
        chat.plans.append(Plan(tool_call_chunks("call_1", "add", json.dumps({"a": 20, "b": 22}))))
        chat.plans.append(Plan(text_chunks("The sum is ", "42.")))
        doc = application(
            {
                "calc": {
                    "tools": [{"server": "maths", "names": ["add"]}],
                    "model": {
                        "type": "openai",
                        "params": {"base_url": chat.base_url, "model": "m"},
                    },
                }
            },
            endpoints={"maths": {"protocol": "mcp", "usage": "use", "url": tools.url}},
            entry="calc",
        )
        path = write_app(tmp_path / "app.yaml", doc)
        code, out, err = await mas_ctl(control_dir, "run-mas", "-f", str(path), "-m", "20 + 22?")
    assert (code, out) == (0, "The sum is 42.\n"), err
    assert tools.calls == [("add", {"a": 20, "b": 22})]
    assert "· calc -> maths/add: ok: 42" in err.splitlines()
    assert [t["function"]["name"] for t in chat.requests[0].body["tools"]] == ["add"]
    assert chat.requests[1].body["messages"][-1]["content"] == "42"


async def test_mas_ctl_serve_serves_the_compliance_agents_mcp_door(
    tmp_path: Path, control_dir: Path
) -> None:
    a2a, door = free_port(), free_port()
    run = await MasCtl.start(
        control_dir,
        "serve",
        "-f",
        str(COMPLIANCE_APP),
        "--agent",
        "subject",
        "--no-control",
        "--override",
        f"infra:spec.endpoints.subject.url=http://127.0.0.1:{a2a}",
        "--override",
        f"infra:spec.endpoints.subject-mcp.url=http://127.0.0.1:{door}",
    )
    try:
        await run.wait_for("serving subject:", stream="out")
        assert f"MCP http://127.0.0.1:{door}/mcp" in run.out
        async with asyncio.timeout(START), Client(f"http://127.0.0.1:{door}/mcp") as client:
            result = await client.call_tool("echo", {"message": "hi"})
        assert result.structured_content is not None
        assert result.structured_content["text"] == "heard: hi"
        assert await run.signal() == 0
    finally:
        await run.close()

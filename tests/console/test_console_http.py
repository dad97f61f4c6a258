"""The console over HTTP, without a browser: its headers, the refusals of its guard, the
command's bad input, and ``mas-ctl console -f`` started as a person starts it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState
from console_support import console, one_agent_document
from tests.conftest import EXAMPLES
from tests.ctl_client.ctl_client_support import OurAgent, wait_state
from tests.ports import free_port
from tests.session_modes.session_modes_support import write_app

from mas.console.document_source import DocumentSource
from mas.console.security import check_bind
from mas.infra.documents import read_yaml_file
from mas.infra.wiring import wire

pytestmark = pytest.mark.integration
STEP = 20.0


def example_source() -> DocumentSource:
    import yaml

    return DocumentSource(wire(yaml.safe_load((EXAMPLES / "agency.yaml").read_text())))


async def test_every_answer_carries_the_security_headers() -> None:
    async with console(example_source()) as url, httpx.AsyncClient(timeout=STEP) as http:
        for path in ("/", "/apps/local/research-desk", "/static/app.js", "/nowhere"):
            response = await http.get(url + path)
            csp = response.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
            assert "unsafe-inline" not in csp
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
        missing = await http.get(url + "/apps/local/nothing")
        assert missing.status_code == 404 and "no Application local/nothing" in missing.text


async def test_a_turn_needs_the_console_header_and_its_own_origin() -> None:
    async with console(example_source()) as url, httpx.AsyncClient(timeout=STEP) as http:
        turn = url + "/apps/local/research-desk/agents/concierge/turn"
        body = {"text": "hi", "context_id": "c"}
        bare = await http.post(turn, json=body)
        assert bare.status_code == 403 and "X-Console: 1" in bare.text
        foreign = await http.post(
            turn, json=body, headers={"x-console": "1", "origin": "http://evil.example"}
        )
        assert foreign.status_code == 403 and "another origin" in foreign.text
        for bad, why in (
            ({"text": "", "context_id": "c"}, "text must be"),
            ({"text": "hi", "context_id": "\x00"}, "context_id must be"),
            ({"text": "hi"}, "the body must be a JSON object"),
        ):
            answer = await http.post(turn, json=bad, headers={"x-console": "1"})
            assert answer.status_code == 400 and why in answer.json()["error"]
        inprocess = url + "/apps/local/research-desk/agents/summarizer/turn"
        answer = await http.post(inprocess, json=body, headers={"x-console": "1"})
        assert answer.status_code == 404


async def test_a_cancel_needs_the_header_a_context_and_an_agent_with_a_url() -> None:
    async with console(example_source()) as url, httpx.AsyncClient(timeout=STEP) as http:
        cancel = url + "/apps/local/research-desk/agents/concierge/cancel"
        bare = await http.post(cancel, json={"context_id": "c"})
        assert bare.status_code == 403 and "X-Console: 1" in bare.text
        for bad, why in (
            ({}, 'the body must be a JSON object {"context_id": "..."}'),
            ({"context_id": ""}, "context_id must be"),
            ({"context_id": "c", "task_id": 7}, "task_id must be absent or"),
        ):
            answer = await http.post(cancel, json=bad, headers={"x-console": "1"})
            assert answer.status_code == 400 and why in answer.json()["error"], answer.text
        inprocess = url + "/apps/local/research-desk/agents/summarizer/cancel"
        answer = await http.post(inprocess, json={"context_id": "c"}, headers={"x-console": "1"})
        assert answer.status_code == 404 and "summarizer" in answer.json()["error"]


async def test_a_turn_whose_reader_goes_away_has_its_task_canceled(desk: OurAgent) -> None:
    source = DocumentSource(wire(read_yaml_file(desk.release.parent / "desk.yaml")))
    async with console(source) as url, httpx.AsyncClient(timeout=STEP) as http:
        turn = url + "/apps/local/session-modes/agents/desk/turn"
        body = {"text": "story", "context_id": f"cut-{uuid.uuid4()}"}
        task_id, text = "", ""
        async with http.stream("POST", turn, json=body, headers={"x-console": "1"}) as stream:
            async for line in stream.aiter_lines():
                event = json.loads(line)
                task_id = event.get("task_id", task_id)
                text += event.get("text", "") if event["kind"] == "text" else ""
                if text == "one ":
                    break  # the story is held: the reader leaves mid-turn
        assert task_id and text == "one "
        # the console cancels the task the stream started; the agent says so
        task = await wait_state(desk.url, task_id, TaskState.TASK_STATE_CANCELED)
        assert task.status.state == TaskState.TASK_STATE_CANCELED


async def test_behind_a_proxy_only_its_range_and_user_header_pass() -> None:
    access = check_bind("0.0.0.0", "X-Forwarded-User", ["192.0.2.0/24"])
    async with console(example_source(), access=access) as url, httpx.AsyncClient() as http:
        # loopback is not the proxy's range: refused before any page renders
        refused = await http.get(url + "/", headers={"x-forwarded-user": "alice"})
        assert refused.status_code == 403
        assert "research-desk" not in refused.text


async def run_console(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mas.ctl.cli",
        "console",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), STEP)
    return process.returncode or 0, (out + err).decode()


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--host", "0.0.0.0"], 2, "not a loopback address"),
        (["--host", "0.0.0.0", "--trusted-proxy-header", "X-User"], 2, "--trusted-proxy-range"),
        ([], 2, "give -f FILE (a laptop) or --cluster"),
        (["--port", "70000"], 2, "'70000' is not a port"),
    ],
)
async def test_bad_options_are_one_line(args: list[str], code: int, says: str) -> None:
    extra = [] if args == [] or "--port" in args else ["-f", str(EXAMPLES / "agency.yaml")]
    returned, text = await run_console(*extra, *args)
    assert returned == code and says in text, text
    assert "Traceback" not in text


async def test_an_unusable_token_in_the_environment_is_one_line(tmp_path: Path) -> None:
    example = str(EXAMPLES / "agency.yaml")
    for env, says in (
        ({"MAS_CTL_TOKEN": "a\nb"}, "$MAS_CTL_TOKEN has a line break"),
        ({"MAS_CTL_TOKEN_FILE": str(tmp_path / "none")}, "$MAS_CTL_TOKEN_FILE: cannot read"),
    ):
        returned, text = await run_console("-f", example, "--port", "0", env=env)
        assert returned == 2 and text.startswith(f"error: {says}"), text
        assert "Traceback" not in text and "internal error" not in text


async def test_an_invalid_document_fails_like_validate(tmp_path: Path) -> None:
    document = one_agent_document("a", "http://127.0.0.1:1", delegates_to=["nobody"])
    returned, text = await run_console("-f", str(write_app(tmp_path / "bad.yaml", document)))
    assert returned == 1 and "nobody" in text and "Traceback" not in text


async def test_mas_ctl_console_serves_the_document() -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mas.ctl.cli",
        "console",
        "-f",
        str(EXAMPLES / "agency.yaml"),
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), STEP)
        assert line.decode().strip() == f"console: http://127.0.0.1:{port}/"
        async with httpx.AsyncClient(timeout=STEP) as http:
            page = await http.get(f"http://127.0.0.1:{port}/")
            assert page.status_code == 200 and "research-desk" in page.text
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).text == "ok\n"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), STEP)

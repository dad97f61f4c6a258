"""``mas-ctl ask / tasks / task`` against a bare a2a-sdk agent (not ours) on loopback, on each
transport, with a card that streams and one that does not: what a person sees follows the
card, and the answer is read wherever the agent put it."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from a2a.types import TaskState
from ctl_client_support import STEP, TRANSPORTS, client, field_after, run, wait_state
from private_ca import make_private_ca
from sdk_agent import sdk_agent
from tests.deadlines import COLD_START

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CARDS = [pytest.param(True, id="streaming"), pytest.param(False, id="blocking")]


@pytest.mark.parametrize("streaming", CARDS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ask_answers_artifacts_and_a_question_resumed_by_context(
    tmp_path: Path, transport: str, streaming: bool
) -> None:
    async with sdk_agent(streaming=streaming) as agent:
        code, out, err = await run(tmp_path, "ask", agent.url, "-m", "hi", "--transport", transport)
        assert code == 0, err
        assert out == "echo: hi\n"

        saved = tmp_path / "saved"
        code, out, err = await run(
            tmp_path,
            "ask",
            agent.url,
            "-m",
            "files",
            "--transport",
            transport,
            "--save",
            str(saved),
        )
        assert code == 0, err
        assert out.startswith("files sent\n")
        assert "· artifact note (text):\n" in err and "a note\n" in out
        assert '"rows": 2' in out and '"name": "table"' in out
        assert [p.name for p in saved.iterdir()] == ["passwd"]
        assert (saved / "passwd").read_bytes() == b"\x00bytes"

        code, out, err = await run(
            tmp_path, "ask", agent.url, "-m", "book", "--transport", transport
        )
        assert code == 4, err
        assert out == "Which day?\n"
        context = field_after(err, "--context ")
        code, out, err = await run(
            tmp_path,
            "ask",
            agent.url,
            "--context",
            context,
            "-m",
            "monday",
            "--transport",
            transport,
        )
        assert code == 0, err
        assert out == "booked monday\n"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_text_streams_as_it_arrives_and_task_follow_sees_the_end(
    tmp_path: Path, transport: str
) -> None:
    async with sdk_agent(streaming=True) as agent:
        asking = await client(
            tmp_path, "ask", agent.url, "-m", "hold", "--transport", transport, "-o", "text"
        )
        try:
            # What has been streamed reaches the terminal while the agent is still held.
            await asking.wait_for("first second ", stream="out", timeout=COLD_START)
            assert not agent.script.go.is_set()
            code, out, err = await run(
                tmp_path, "tasks", agent.url, "--state", "working", "-o", "json"
            )
            assert code == 0, err
            [listed] = json.loads(out)
            follower = await client(
                tmp_path, "task", agent.url, listed["id"], "--follow", "--transport", transport
            )
            try:
                await follower.wait_for(f"· task {listed['id']} (context ")
                agent.script.go.set()
                assert await follower.finish(STEP) == 0, follower.err
            finally:
                await follower.close()
            assert follower.out == "first second third\n"
            assert await asking.finish(STEP) == 0, asking.err
        finally:
            await asking.close()
        assert asking.out == "first second third\n"


@pytest.mark.parametrize("streaming", CARDS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ctrl_c_cancels_the_task_on_a_bare_agent(
    tmp_path: Path, transport: str, streaming: bool
) -> None:
    async with sdk_agent(streaming=streaming) as agent:
        asking = await client(tmp_path, "ask", agent.url, "-m", "hold", "--transport", transport)
        try:
            if streaming:
                await asking.wait_for("first second ", stream="out", timeout=COLD_START)
            else:  # a blocking send shows nothing until it returns: the agent says it runs
                async with asyncio.timeout(COLD_START):
                    await agent.script.started.wait()
            code = await asking.signal(signal.SIGINT)
        finally:
            await asking.close()
        assert code == 130, asking.err
        task_id = field_after(asking.err, "interrupted: task ")
        assert f"interrupted: task {task_id}: canceled" in asking.err
        await wait_state(agent.url, task_id, TaskState.TASK_STATE_CANCELED)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_https_and_grpc_over_tls_with_a_private_ca(tmp_path: Path, transport: str) -> None:
    ca = make_private_ca(tmp_path / "pki")
    async with sdk_agent(streaming=True, tls=ca) as agent:
        assert agent.url.startswith("https://")
        code, out, err = await run(tmp_path, "card", agent.url)
        assert code == 1
        assert err.startswith(f"error: cannot reach {agent.url} (the AgentCard request): ")
        assert "CERTIFICATE_VERIFY_FAILED" in err and err.count("\n") == 1

        args = ("ask", agent.url, "-m", "hi", "--transport", transport)
        code, out, err = await run(tmp_path, *args, "--cacert", str(ca.ca))
        assert code == 0, err
        assert out == "echo: hi\n"
        code, out, err = await run(tmp_path, *args, env={"MAS_CTL_CACERT": str(ca.ca)})
        assert code == 0, err
        assert out == "echo: hi\n"

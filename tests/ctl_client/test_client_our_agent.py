"""``mas-ctl ask / card / tasks / task / cancel-task / chat`` against our own agent, served by
a real ``mas-ctl serve``, on each transport its card offers."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path

import pytest
from a2a.types import TaskState
from ctl_client_support import (
    STEP,
    TRANSPORTS,
    OurAgent,
    client,
    field_after,
    run,
    task_state,
    wait_state,
)
from tests.deadlines import COLD_START

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ask_streams_the_reply_and_reports_the_delegation(
    tmp_path: Path, desk: OurAgent, transport: str
) -> None:
    code, out, err = await run(
        tmp_path, "ask", desk.url, "-m", "ask helper tea", "--transport", transport
    )
    assert code == 0, err
    assert out == "helper said: helper did: tea\n"
    assert "· delegated to helper: ok: helper did: tea\n" in err
    assert "· context " in err


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_input_required_exits_4_and_the_answer_resumes_it(
    tmp_path: Path, desk: OurAgent, transport: str
) -> None:
    code, out, err = await run(
        tmp_path, "ask", desk.url, "-m", "book a table", "--transport", transport
    )
    assert code == 4, err
    assert out == "Sure.\nWhich day?\n"
    context = field_after(err, "--context ")
    assert "desk asks for input; answer with: mas-ctl ask TARGET --context" in err

    code, out, err = await run(
        tmp_path, "ask", desk.url, "--context", context, "-m", "friday", "--transport", transport
    )
    assert code == 0, err
    assert out == "Booked for friday (Which day?)\n"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_artifacts_text_printed_data_as_json_file_saved_under_a_safe_name(
    tmp_path: Path, desk: OurAgent, transport: str
) -> None:
    saved = tmp_path / "saved"
    code, out, err = await run(
        tmp_path, "ask", desk.url, "-m", "files", "--transport", transport, "--save", str(saved)
    )
    assert code == 0, err
    assert out.startswith("here are the files\n")
    assert "the notes\n" in out
    assert '"count": 3' in out and '"ok": true' in out
    assert [p.name for p in saved.iterdir()] == ["report.bin"]
    assert (saved / "report.bin").read_bytes() == b"hello file"
    assert not (tmp_path / "escape").exists()
    assert f"saved to {saved / 'report.bin'}" in err
    assert "· tokens: 120 in, 30 out\n" in err

    code, out, err = await run(
        tmp_path, "ask", desk.url, "-m", "files", "--transport", transport, "-o", "json"
    )
    assert code == 0, err
    record = json.loads(out)
    assert record["status"] == "completed" and record["text"] == "here are the files"
    kinds = {a["kind"]: a for a in record["artifacts"]}
    assert kinds["text"]["text"] == "the notes"
    assert kinds["data"]["data"] == {"count": 3, "ok": True}
    assert kinds["file"]["size"] == len(b"hello file") and kinds["file"]["saved"] is None
    tokens = {"input": 120, "output": 30}
    assert record["metadata"]["maslab.tokens"] == {**tokens, "by_model": {"scripted": tokens}}

    code, out, err = await run(
        tmp_path, "task", desk.url, record["task_id"], "--transport", transport, "-o", "json"
    )
    assert code == 0, err
    assert json.loads(out)["metadata"]["maslab.tokens"] == record["metadata"]["maslab.tokens"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ctrl_c_cancels_the_task_on_the_agent_and_exits_130(
    tmp_path: Path, desk: OurAgent, transport: str
) -> None:
    desk.release.unlink(missing_ok=True)  # the story holds after its first chunk
    asking = await client(tmp_path, "ask", desk.url, "-m", "story", "--transport", transport)
    try:
        await asking.wait_for("one ", stream="out", timeout=COLD_START)
        code = await asking.signal(signal.SIGINT)
    finally:
        await asking.close()
    assert code == 130, asking.err
    task_id = field_after(asking.err, "interrupted: task ")
    assert f"interrupted: task {task_id}: canceled" in asking.err
    task = await wait_state(desk.url, task_id, TaskState.TASK_STATE_CANCELED)
    assert task.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tasks_lists_and_task_follow_streams_a_running_task_to_its_end(
    tmp_path: Path, desk: OurAgent, transport: str
) -> None:
    desk.release.unlink(missing_ok=True)
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    asking = await client(tmp_path, "ask", desk.url, "-m", "story", "--context", context)
    try:
        await asking.wait_for("one ", stream="out", timeout=COLD_START)
        code, out, err = await run(
            tmp_path,
            "tasks",
            desk.url,
            "--context",
            context,
            "-o",
            "json",
            "--transport",
            transport,
        )
        assert code == 0, err
        [listed] = json.loads(out)
        assert listed["context_id"] == context and listed["state"] == "working"
        code, table, err = await run(
            tmp_path, "tasks", desk.url, "--state", "working", "--transport", transport
        )
        assert code == 0, err
        assert listed["id"] in table and table.startswith("TASK ")

        follower = await client(
            tmp_path, "task", desk.url, listed["id"], "--follow", "--transport", transport
        )
        try:
            await follower.wait_for(f"· task {listed['id']} (context {context}): working")
            desk.release.touch()
            assert await follower.finish(STEP) == 0, follower.err
        finally:
            await follower.close()
        assert follower.out == "one two three\n"
        assert await asking.finish(STEP) == 0, asking.err
    finally:
        await asking.close()
        desk.release.unlink(missing_ok=True)
    assert asking.out == "one two three\n"

    code, out, err = await run(tmp_path, "task", desk.url, listed["id"], "--transport", transport)
    assert code == 0, err
    assert out == "one two three\n"
    assert f"· task {listed['id']} (context {context}): completed" in err


async def test_cancel_task_cancels_a_running_task_of_another_client(
    tmp_path: Path, desk: OurAgent
) -> None:
    desk.release.unlink(missing_ok=True)
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    asking = await client(tmp_path, "ask", desk.url, "-m", "story", "--context", context)
    try:
        await asking.wait_for("one ", stream="out", timeout=COLD_START)
        code, out, err = await run(tmp_path, "tasks", desk.url, "--context", context, "-o", "json")
        [listed] = json.loads(out)
        code, out, err = await run(tmp_path, "cancel-task", desk.url, listed["id"])
        assert code == 0, err
        assert out == f"task {listed['id']}: canceled\n"
        assert await asking.finish(STEP) == 1
    finally:
        await asking.close()
    assert "error: the agent's turn canceled" in asking.err
    assert (await task_state(desk.url, listed["id"])).status.state == TaskState.TASK_STATE_CANCELED

    code, out, err = await run(tmp_path, "cancel-task", desk.url, listed["id"])
    assert code == 1 and out == ""
    assert err.startswith(f"error: {desk.url} answered CancelTask with an error: ")
    assert err.count("\n") == 1 and "Traceback" not in err


async def test_card_as_text_and_as_the_json_served(tmp_path: Path, desk: OurAgent) -> None:
    code, out, err = await run(tmp_path, "card", desk.url, "--transport", "grpc")
    assert code == 0, err
    assert out.startswith("name:        desk\n")
    assert f"  * GRPC       127.0.0.1:{desk.grpc_port} (A2A 1.0)\n" in out
    assert f"    JSONRPC    {desk.url} (A2A 1.0)\n" in out
    assert "streaming:   yes" in out

    code, out, err = await run(tmp_path, "card", desk.url, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["name"] == "desk"


async def test_remote_chat_on_stdin_with_a_question_and_its_answer(
    tmp_path: Path, desk: OurAgent
) -> None:
    chatting = await client(tmp_path, "chat", desk.url, "--transport", "grpc", stdin=True)
    try:
        assert chatting.process.stdin is not None
        await chatting.wait_for("you> ", stream="out", timeout=COLD_START)
        chatting.process.stdin.write(b"ask helper tea\n")
        await chatting.wait_for("desk> helper said: helper did: tea\n", stream="out")
        chatting.process.stdin.write(b"book a table\n")
        await chatting.wait_for("· desk asks: Which day?\n", stream="out")
        await chatting.wait_for("answer> ", stream="out")
        chatting.process.stdin.write(b"monday\n")
        await chatting.wait_for("desk> Booked for monday (Which day?)\n", stream="out")
        desk.release.unlink(missing_ok=True)
        chatting.process.stdin.write(b"story\n")
        await chatting.wait_for("desk> one ", stream="out")
        chatting.process.send_signal(signal.SIGINT)  # cancels the running turn, not the chat
        await chatting.wait_for(": canceled\n", stream="out")
        task_id = field_after(chatting.out, "· task ")
        await wait_state(desk.url, task_id, TaskState.TASK_STATE_CANCELED)
        # CancelTask leaves our agent's running turn to finish in its session: let it, so
        # the next turn of this context does not queue behind it.
        desk.release.touch()
        chatting.process.stdin.write(b"ask helper more\n")
        await chatting.wait_for("desk> helper said: helper did: more\n", stream="out")
        chatting.process.stdin.close()
        assert await chatting.finish(STEP) == 0, chatting.err
    finally:
        await chatting.close()
        desk.release.unlink(missing_ok=True)
    assert "· delegated to helper: ok: helper did: tea\n" in chatting.out
    assert "· chat ended; resume with --context " in chatting.out


async def test_remote_chat_resumes_a_context_whose_question_is_open(
    tmp_path: Path, desk: OurAgent
) -> None:
    code, out, err = await run(tmp_path, "ask", desk.url, "-m", "book a table")
    assert code == 4 and out == "Sure.\nWhich day?\n", err
    context = field_after(err, "--context ")
    chatting = await client(
        tmp_path, "chat", desk.url, "--context", context, "--transport", "rest", stdin=True
    )
    try:
        assert chatting.process.stdin is not None
        await chatting.wait_for(
            "· desk waits for an answer (task ", stream="out", timeout=COLD_START
        )
        await chatting.wait_for("answer> ", stream="out")
        chatting.process.stdin.write(b"tuesday\n")
        await chatting.wait_for("desk> Booked for tuesday (Which day?)\n", stream="out")
        chatting.process.stdin.close()
        assert await chatting.finish(STEP) == 0, chatting.err
    finally:
        await chatting.close()
    assert f"· chat ended; resume with --context {context}" in chatting.out

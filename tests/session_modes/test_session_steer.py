"""Steer and cancel over the control protocol, seen in run-mas's transcript; and the same
session messaged over A2A, where an extra message is only queued (A2A has no steer RPC)."""

from __future__ import annotations

import asyncio
import re
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from session_modes_support import (
    FULL_STORY,
    A2AStream,
    MasCtl,
    application,
    ask_a2a,
    mas_ctl,
    queued_turns,
    scripted,
    story,
    write_app,
)
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FULL = FULL_STORY


@dataclass
class Steered:
    code: int
    out: str
    err: str
    control_code: int
    control_out: str


async def _steer_during_story(tmp_path: Path, name: str, *control: str) -> Steered:
    """run-mas -m story in session ``name``; once "one " is out (the story holds there), run
    ``mas-ctl CONTROL``; then let the story go on (it matters only when nothing stopped it)."""
    control_dir = tmp_path / f"control-{name}"
    release = tmp_path / f"{name}.release"
    app = write_app(
        tmp_path / f"{name}.yaml", application({"desk": {"model": scripted(story(release))}})
    )
    run = await MasCtl.start(
        control_dir, "run-mas", "-f", str(app), "--session", name, "-m", "story"
    )
    try:
        await run.wait_for("one ", stream="out")
        control_code, control_out, control_err = await mas_ctl(control_dir, *control)
        assert control_code == 0, control_err
        release.touch()
        code = await run.finish(timeout=60)
    finally:
        await run.close()
    return Steered(code, run.out, run.err, control_code, control_out)


def _steer(mode: str, session: str, text: str) -> tuple[str, ...]:
    return ("steer", "--agent", "desk", "--session", session, "--mode", mode, text)


@pytest.mark.timeout(300)
async def test_each_steer_mode_and_cancel_are_visible_in_the_transcript(tmp_path: Path) -> None:
    # One story after the other: four at once start eight cold interpreters together, which
    # on two busy cores can outlast any fair per-step deadline.
    preempt = await _steer_during_story(tmp_path, "p", *_steer("preempt", "p", "left"))
    replace = await _steer_during_story(tmp_path, "r", *_steer("replace", "r", "fresh"))
    wait = await _steer_during_story(tmp_path, "w", *_steer("wait", "w", "later"))
    cancel = await _steer_during_story(tmp_path, "c", "cancel", "--agent", "desk", "--session", "c")
    # preempt: the prefix stays on stdout, the rest is replaced by the steered continuation.
    assert re.fullmatch(r"preempted: turn steer-\w+ of session 'p'\n", preempt.control_out)
    assert preempt.code == 0, preempt.err
    assert preempt.out.startswith("one ") and preempt.out.endswith("heard: left\n")
    assert "six" not in preempt.out
    assert (
        "· steer preempt on desk/p: 'left' (preempted: the prefix is kept, the rest replaced)"
        in preempt.err
    )
    assert f"(preempt) ended completed: {preempt.out.strip()}" in preempt.err
    assert "final answer" not in preempt.err

    # replace: the prefix is discarded; the final answer is only the new generation.
    assert re.fullmatch(r"replaced: turn steer-\w+ of session 'r'\n", replace.control_out)
    assert replace.code == 0, replace.err
    assert replace.out.startswith("one ") and replace.out.endswith("heard: fresh\n")
    assert "six" not in replace.out
    assert (
        "· steer replace on desk/r: 'fresh' (replaced: the prefix above is discarded)"
        in replace.err
    )
    assert "· final answer: heard: fresh\n" in replace.err

    # wait: the generation is untouched; the steer runs as its own turn right after it.
    assert re.fullmatch(r"queued: turn steer-\w+ of session 'w'\n", wait.control_out)
    assert (wait.code, wait.out) == (0, FULL + "\n"), wait.err
    assert "· steer wait on desk/w: 'later' (queued after the current generation)" in wait.err
    assert re.search(r"· steered turn steer-\w+ \(wait\) ended completed: heard: later\n", wait.err)

    # cancel: cancel_inflight stops the turn; run-mas says so and exits 1.
    assert cancel.control_out == "canceled the running turn of session 'c' of agent 'desk'\n"
    assert cancel.code == 1
    assert cancel.out.startswith("one ") and "six" not in cancel.out
    assert "· cancel on desk/c: the running turn was interrupted" in cancel.err
    assert re.search(
        r"error: the turn of agent 'desk' canceled: turn 'turn-\w+' was canceled while it ran\n$",
        cancel.err,
    )


async def test_a2a_messages_queue_while_the_control_protocol_steers_the_same_session(
    tmp_path: Path, control_dir: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    release = tmp_path / "release"
    app = write_app(
        tmp_path / "app.yaml",
        application(
            {"desk": {"model": scripted(story(release))}},
            {"desk": {"url": url, "usage": "deploy"}},
        ),
    )
    run = await MasCtl.start(control_dir, "run-mas", "-f", str(app))
    try:
        await run.wait_for("ready: serving until SIGINT or SIGTERM")
        # Over A2A: a second message on the working session is queued, never preempting.
        first = A2AStream(url, "story", context_id="shared")
        await first.started()
        quick = asyncio.create_task(ask_a2a(url, "quick", context_id="shared"))
        await queued_turns(url, "desk", 1)  # quick waits behind the held story
        release.touch()
        assert await first.done() == FULL
        assert await quick == "heard: quick"
        assert "steer" not in run.err
        release.unlink()  # the next story holds again

        # Over the control protocol: the same session's next generation is preempted.
        second = A2AStream(url, "story", context_id="shared")
        await second.started()
        code, out, err = await mas_ctl(control_dir, *_steer("preempt", "shared", "left"))
        assert code == 0 and out.startswith("preempted: turn steer-"), err
        text = await second.done()
        assert text.startswith("one ") and text.endswith("heard: left") and "six" not in text
        await run.wait_for("· steer preempt on desk/shared: 'left'", timeout=10)

        # mas-ctl ps lists the run-mas process's advertised endpoint.
        code, out, err = await mas_ctl(control_dir, "ps")
        assert code == 0, err
        header, row = out.strip().splitlines()
        assert header.split() == ["AGENT", "PID", "ADDRESS"]
        assert row.split()[:2] == ["desk", str(run.process.pid)]
        assert await run.signal(signal.SIGINT) == 0
        assert "SIGINT received: stopping" in run.err
        code, out, err = await mas_ctl(control_dir, "ps")
        assert (code, out.strip()) == (0, f"no control endpoints in {control_dir}")
    finally:
        await run.close()


async def test_ctrl_c_interrupts_the_turn_of_run_mas_m(tmp_path: Path, control_dir: Path) -> None:
    held = scripted(story(tmp_path / "never"))
    app = write_app(tmp_path / "app.yaml", application({"desk": {"model": held}}))
    args = ("run-mas", "-f", str(app), "--session", "int", "-m", "story")
    run = await MasCtl.start(control_dir, *args)
    try:
        await run.wait_for("one ", stream="out")
        assert await run.signal(signal.SIGINT) == 130
    finally:
        await run.close()
    assert "six" not in run.out
    assert run.err.splitlines()[-1] == "interrupted: the turn of session int was canceled"
    assert "Traceback" not in run.err


async def test_pid_chooses_between_two_processes_serving_one_agent(
    tmp_path: Path, control_dir: Path
) -> None:
    app = write_app(tmp_path / "app.yaml", application({"desk": {"model": scripted()}}))
    first = await MasCtl.start(control_dir, "run-mas", "-f", str(app))
    second = await MasCtl.start(control_dir, "run-mas", "-f", str(app))
    try:
        await asyncio.gather(first.wait_for("ready: serving"), second.wait_for("ready: serving"))
        pids = sorted([first.process.pid, second.process.pid])
        cancel = ("cancel", "--agent", "desk", "--session", "s")
        code, out, err = await mas_ctl(control_dir, *cancel)
        assert (code, out, err) == (
            1,
            "",
            f"error: several processes serve agent 'desk' (pids {pids[0]}, {pids[1]}); "
            "choose one with --pid\n",
        )
        code, out, err = await mas_ctl(control_dir, *cancel, "--pid", str(second.process.pid))
        assert (code, out) == (0, "no turn was running in session 's' of agent 'desk'\n"), err
        await second.wait_for("· cancel on desk/s: no turn was running", timeout=10)
        assert "· cancel" not in first.err
    finally:
        await asyncio.gather(first.close(), second.close())

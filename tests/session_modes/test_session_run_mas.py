"""``mas-ctl run-mas`` as real processes: the main job, A2A while the entry works, --bind to
a separate ``mas-ctl serve``, a bound name never listened on, failures and bad flags."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest
from session_modes_support import (
    FULL_STORY,
    MasCtl,
    application,
    ask_a2a,
    chat_app,
    listening,
    mas_ctl,
    scripted,
    story,
    write_app,
)
from tests.conftest import EXAMPLES
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_the_main_job_runs_the_example_agency(tmp_path: Path, control_dir: Path) -> None:
    concierge, researcher, search, unused = free_port(), free_port(), free_port(), free_port()
    door = free_port()
    # Merge order: the agency document, then --infra-ref, then --override/--bind in order.
    infra = write_app(
        tmp_path / "infra.yaml",
        {
            "spec": {
                "endpoints": {
                    "concierge": {"url": f"http://127.0.0.1:{concierge}"},
                    "concierge-mcp": {"url": f"http://127.0.0.1:{door}"},
                    "researcher": {"url": f"http://127.0.0.1:{unused}"},
                    "web-search": {"url": f"http://127.0.0.1:{search}"},
                }
            }
        },
    )
    code, out, err = await mas_ctl(
        control_dir,
        "run-mas",
        "-f",
        str(EXAMPLES / "agency.yaml"),
        "--infra-ref",
        str(infra),
        "--override",
        f"infra:spec.endpoints.researcher.url=http://127.0.0.1:{researcher}",
        "-m",
        "What changed in A2A 1.0?",
    )
    assert (code, out) == (0, "What changed in A2A 1.0?\n"), err
    lines = err.splitlines()
    assert lines[0] == "hosting concierge (entry), summarizer, researcher"
    assert lines[1].startswith(f"listening concierge: A2A http://127.0.0.1:{concierge} (JSON-RPC)")
    assert lines[2] == (
        "note concierge: gRPC is not served here (nor in its card); mas-ctl serve is the only "
        "path that starts the gRPC listener"
    )
    assert lines[3] == f"listening concierge: MCP http://127.0.0.1:{door}/mcp"
    assert lines[4].startswith(f"listening researcher: A2A http://127.0.0.1:{researcher} ")
    assert (
        f"route researcher -> web-search: a2a http://127.0.0.1:{search} (usage: use; owned by "
        "another process)"
    ) in lines
    assert "route concierge -> summarizer: in-process (local)" in lines
    assert lines[-1].startswith("ready: session run-") and lines[-1].endswith(" on concierge")
    assert str(unused) not in err and "Traceback" not in err


async def test_a_deployed_agent_answers_over_a2a_while_the_entry_works(
    tmp_path: Path, control_dir: Path
) -> None:
    helper = free_port()
    release = tmp_path / "release"
    app = write_app(
        tmp_path / "app.yaml",
        application(
            {
                "desk": {"model": scripted(story(release))},
                "helper": {"model": {"type": "echo"}},
            },
            {"helper": {"url": f"http://127.0.0.1:{helper}", "usage": "deploy"}},
        ),
    )
    run = await MasCtl.start(
        control_dir, "run-mas", "-f", str(app), "-m", "story", "--session", "s1"
    )
    try:
        await run.wait_for("ready: session s1 on desk")
        assert f"listening helper: A2A http://127.0.0.1:{helper} (JSON-RPC)" in run.err
        await run.wait_for("one ", stream="out")
        reply = await ask_a2a(f"http://127.0.0.1:{helper}", "are you there?")
        assert reply == "are you there?"
        assert run.process.returncode is None and "six" not in run.out  # the entry still works
        release.touch()
        assert await run.finish() == 0, run.err
        assert run.out == FULL_STORY + "\n"
    finally:
        await run.close()


def _delegating_app(tmp_path: Path, worker_port: int) -> Path:
    ask = {
        "match": "^ask worker (?P<q>.+)",
        "delegate": {"to": "worker", "message": "{q}"},
        "reply": "worker said: {result}",
    }
    return write_app(
        tmp_path / "delegating.yaml",
        application(
            {
                "desk": {"delegates_to": ["worker"], "model": scripted(ask)},
                "worker": {"model": scripted(default="worker did: {input}")},
            },
            {"worker": {"url": f"http://127.0.0.1:{worker_port}", "usage": "deploy"}},
        ),
    )


async def test_run_mas_delegates_through_bind_to_a_separate_serve(
    tmp_path: Path, control_dir: Path
) -> None:
    port = free_port()
    app = _delegating_app(tmp_path, port)
    served = await MasCtl.start(
        tmp_path / "serve-control", "serve", "-f", str(app), "--agent", "worker"
    )
    try:
        await served.wait_for("serving worker: A2A", stream="out")
        # Without --bind, run-mas hosts the deployed worker itself: serve owns the port.
        code, out, err = await mas_ctl(
            control_dir, "run-mas", "-f", str(app), "-m", "ask worker tea"
        )
        assert (code, out) == (1, "")
        assert err.splitlines() == [
            f"error: agent 'worker': cannot listen on 127.0.0.1:{port}: Address already in use"
        ]
        # --bind makes it a usage: use row: a client route to the serve process.
        code, out, err = await mas_ctl(
            control_dir,
            "run-mas",
            "-f",
            str(app),
            "--bind",
            f"worker=a2a://127.0.0.1:{port}",
            "-m",
            "ask worker tea",
        )
        assert (code, out) == (0, "worker said: worker did: tea\n"), err
        lines = err.splitlines()
        assert lines[0] == "hosting desk (entry)"
        assert (
            f"route desk -> worker: a2a http://127.0.0.1:{port} (usage: use; owned by another "
            "process)"
        ) in lines
        assert "· desk -> worker: working on 'tea'" in lines
        assert "· worker -> desk: done" in lines
        assert not any(line.startswith("listening") for line in lines)
        assert served.process.returncode is None
    finally:
        await served.close()


async def test_a_bound_name_is_never_listened_on_and_its_absence_is_a_tool_error(
    tmp_path: Path, control_dir: Path
) -> None:
    desk, search, grpc = free_port(), free_port(), free_port()
    rule = {
        "match": "^search (?P<q>.+)",
        "delegate": {"to": "search", "message": "{q}"},
        "reply": "search said: {result}",
    }
    app = write_app(
        tmp_path / "app.yaml",
        application(
            {"desk": {"delegates_to": ["search"], "model": scripted(rule)}},
            {
                "desk": {
                    "url": f"http://127.0.0.1:{desk}",
                    "usage": "deploy",
                    "a2a": {"grpc_port": grpc},
                }
            },
        ),
    )
    # Without the --bind row, the target does not exist: one clear error, no listener.
    code, _, err = await mas_ctl(control_dir, "run-mas", "-f", str(app), "-m", "search cats")
    assert code == 1 and "Traceback" not in err
    assert "search" in err and "desk" in err and len(err.strip().splitlines()) == 1
    run = await MasCtl.start(
        control_dir, "run-mas", "-f", str(app), "--bind", f"search=a2a://127.0.0.1:{search}"
    )
    try:
        await run.wait_for("ready: serving until SIGINT or SIGTERM")
        assert listening(desk)
        assert not listening(search)
        # Only serve starts gRPC: not listened on, and the card does not advertise it.
        assert not listening(grpc)
        async with httpx.AsyncClient(timeout=10) as http:
            card = (await http.get(f"http://127.0.0.1:{desk}/.well-known/agent-card.json")).json()
        bindings = {i["protocolBinding"] for i in card["supportedInterfaces"]}
        assert bindings == {"JSONRPC", "HTTP+JSON"}
        [advert] = list(control_dir.glob("desk.*.json"))
        reply = await ask_a2a(f"http://127.0.0.1:{desk}", "search cats")
        assert reply.startswith("search said: delegation to 'search' failed: ")
        assert f"127.0.0.1:{search}" in reply
        await run.wait_for("· search -> desk: failed: delegation to 'search' failed")
        assert not listening(search)
        assert await run.signal(signal.SIGTERM) == 0
        assert "SIGTERM received: stopping" in run.err and "Traceback" not in run.err
        assert not advert.exists()
        assert not listening(desk)
    finally:
        await run.close()


async def test_a_failed_turn_and_an_unanswerable_question_exit_1(
    tmp_path: Path, control_dir: Path
) -> None:
    app = write_app(
        tmp_path / "app.yaml",
        application(
            {
                "desk": {
                    "model": scripted(
                        {"match": "^broken", "fail": "simulated failure"},
                        {"match": "^book", "reply": "Sure.", "ask": "Which day?"},
                    )
                }
            }
        ),
    )
    (
        (failed_code, failed_out, failed_err),
        (asked_code, asked_out, asked_err),
    ) = await asyncio.gather(
        mas_ctl(control_dir, "run-mas", "-f", str(app), "--no-control", "-m", "broken"),
        mas_ctl(control_dir, "run-mas", "-f", str(app), "--session", "s9", "-m", "book a table"),
    )
    assert (failed_code, failed_out) == (1, "")
    assert failed_err.splitlines()[-1] == (
        "error: the turn of agent 'desk' failed: the model of agent 'desk' failed: "
        "simulated failure"
    )
    assert "control: off (--no-control)" in failed_err
    assert (asked_code, asked_out) == (1, "Sure.\n")
    assert asked_err.splitlines()[-1] == (
        "error: agent 'desk' asks for human input in session s9: 'Which day?'; run-mas -m has "
        "no human to answer (use mas-ctl chat)"
    )


@pytest.mark.timeout(300)
async def test_bad_flags_are_one_clear_line_and_a_non_zero_exit(
    tmp_path: Path, control_dir: Path
) -> None:
    app = str(write_app(tmp_path / "app.yaml", application({"desk": {"model": scripted()}})))
    two = str(chat_app(tmp_path, free_port()))
    desk_url = "infra:spec.endpoints.desk.url"
    cases = {
        ("run-mas", "-f", two, "--override", f"{desk_url}=http://127.0.0.1:9/a2a", "-m", "hi"): (
            1,
            "error: spec.endpoints.desk.url: 'http://127.0.0.1:9/a2a' has a path prefix '/a2a'; "
            "the advertised url cannot include one (accepted: scheme://host[:port])",
        ),
        (
            "run-mas",
            "-f",
            two,
            "--override",
            f"{desk_url}=http://127.0.0.1:9",
            "--override",
            "infra:spec.endpoints.helper={url: 'http://127.0.0.1:9', usage: deploy}",
            "-m",
            "hi",
        ): (
            1,
            "error: spec.endpoints.helper.url: 127.0.0.1:9 is also served by "
            "spec.endpoints.desk.url; a single port cannot host multiple independent AgentCards",
        ),
        ("run-mas",): (
            2,
            "mas-ctl run-mas: error: the following arguments are required: -f/--file",
        ),
        ("run-mas", "-f", str(tmp_path / "nope.yaml"), "-m", "hi"): (
            2,
            f"error: {tmp_path / 'nope.yaml'}: cannot read the file (No such file or directory)",
        ),
        ("run-mas", "-f", app, "--bind", "junk", "-m", "hi"): (
            2,
            "error: --bind 'junk': expected NAME=a2a://host:port (a2as://host:port for https)",
        ),
        ("run-mas", "-f", app, "-m", " "): (
            2,
            "error: -m: the message is empty; accepted: any non-empty text",
        ),
        ("chat", "-f", app, "--session", "a b"): (
            2,
            "mas-ctl chat: error: argument --session: 'a b' is not a session id; accepted: 1 to "
            "200 characters without spaces",
        ),
        ("tui", "-f", app): (
            2,
            "error: mas-ctl tui needs a terminal (stdin and stdout a tty, TERM set); use mas-ctl "
            "chat for pipes",
        ),
        ("steer", "--agent", "desk", "--session", "s", "--mode", "preempt", "x"): (
            1,
            f"error: no running process advertises a control endpoint for agent 'desk' in "
            f"{control_dir} (start it with mas-ctl serve, run-mas, chat or tui, without "
            "--no-control)",
        ),
    }
    # Two at a time (the machine has two cores): ten cold interpreters at once on busy cores
    # can each outlast the per-process deadline. A task group stops the rest if one fails.
    slots = asyncio.Semaphore(2)

    async def one(args: tuple[str, ...]) -> tuple[int, str, str]:
        async with slots:
            return await mas_ctl(control_dir, *args, timeout=90)

    async with asyncio.TaskGroup() as group:
        runs = [group.create_task(one(args)) for args in cases]
    results = [run.result() for run in runs]
    for (args, (code, last)), (got_code, _, err) in zip(cases.items(), results, strict=True):
        assert (got_code, err.strip().splitlines()[-1]) == (code, last), args
        assert "Traceback" not in err, args
        # argparse prints its usage line first; a shared port is reported for both endpoints
        if not last.startswith("mas-ctl ") and "also served by" not in last:
            assert len(err.strip().splitlines()) == 1, (args, err)

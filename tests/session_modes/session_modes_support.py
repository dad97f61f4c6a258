"""Support of the session-mode tests: real ``mas-ctl`` subprocesses and their output.

Every process is a real ``python -m mas.ctl.cli`` with its own control directory, bound
to 127.0.0.1 on ports the OS says are free. Output is collected as it arrives, so a test
waits for what a person would see (``wait_for``), always with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from prometheus_client.parser import text_string_to_metric_families
from tests.deadlines import COLD_START

START = COLD_START
STEP = 20.0  # the longest any other awaited step may take


def listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(2.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def environment(control_dir: Path) -> dict[str, str]:
    """The environment of a child: a private control directory, unbuffered output."""
    env = {**os.environ, "MAS_CONTROL_DIR": str(control_dir), "PYTHONUNBUFFERED": "1"}
    env.pop("MAS_DEBUG", None)
    return env


def command(*args: str) -> list[str]:
    """The argv of ``mas-ctl ARGS``."""
    return [sys.executable, "-m", "mas.ctl.cli", *args]


def write_app(path: Path, document: dict[str, Any]) -> Path:
    """Write an Application document; returns its path."""
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def application(
    agents: dict[str, dict[str, Any]],
    endpoints: dict[str, dict[str, Any]] | None = None,
    *,
    entry: str = "desk",
) -> dict[str, Any]:
    """An Application: ``agents`` maps id -> agent spec; ``endpoints`` id -> endpoint."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "session-modes"},
        "spec": {
            "agency": {"entry": entry, "agents": {a: {"spec": s} for a, s in agents.items()}},
            "endpoints": endpoints or {},
        },
    }


def scripted(*rules: dict[str, Any], default: str = "heard: {input}") -> dict[str, Any]:
    """A scripted model spec."""
    return {"type": "scripted", "params": {"rules": list(rules), "default": {"reply": default}}}


FULL_STORY = "one two three four five six"


def story(release: Path) -> dict[str, Any]:
    """Six chunks; after "one " the story holds until ``release`` exists, so a steer, a
    cancel or another client from a cold process lands mid-generation whatever the
    machine's pace, and the story ends only when the test creates the file."""
    return {
        "match": "^story",
        "chunks": ["one ", "two ", "three ", "four ", "five ", "six"],
        "release_file": str(release),
    }


def chat_app(tmp_path: Path, port: int) -> Path:
    """The chat and tui agency: desk (deployed on ``port``) delegating to a private helper."""
    rules = [
        {
            "match": "^ask helper (?P<q>.+)",
            "delegate": {"to": "helper", "message": "{q}"},
            "reply": "helper said: {result}",
        },
        {"match": "^book", "reply": "Sure.", "ask": "Which day?"},
        {"match": "^(mon|tues|wednes|thurs|fri)day$", "reply": "Booked for {input} ({question})"},
        story(tmp_path / "story.release"),
    ]
    return write_app(
        tmp_path / "chat.yaml",
        application(
            {
                "desk": {"delegates_to": ["helper"], "model": scripted(*rules)},
                "helper": {"model": scripted(default="helper did: {input}")},
            },
            {"desk": {"url": f"http://127.0.0.1:{port}", "usage": "deploy"}},
        ),
    )


def user_message(text: str, *, context_id: str | None = None) -> Message:
    """An A2A user message."""
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    return message


class MasCtl:
    """A running ``mas-ctl`` subprocess; stdout and stderr are collected as they arrive."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.out = ""
        self.err = ""
        self._changed = asyncio.Event()
        self._readers = [
            asyncio.create_task(self._pump("out"), name="mas-ctl-stdout"),
            asyncio.create_task(self._pump("err"), name="mas-ctl-stderr"),
        ]

    @classmethod
    async def start(cls, control_dir: Path, *args: str, stdin: bool = False) -> MasCtl:
        """Start ``mas-ctl ARGS``."""
        process = await asyncio.create_subprocess_exec(
            *command(*args),
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment(control_dir),
        )
        return cls(process)

    async def _pump(self, which: str) -> None:
        stream = self.process.stdout if which == "out" else self.process.stderr
        assert stream is not None
        while chunk := await stream.read(4096):
            text = chunk.decode(errors="replace")
            if which == "out":
                self.out += text
            else:
                self.err += text
            self._changed.set()
        self._changed.set()

    async def wait_for(self, text: str, *, stream: str = "err", timeout: float = START) -> None:
        """Wait until ``text`` was written on ``stream`` (``out`` or ``err``)."""
        try:
            async with asyncio.timeout(timeout):
                while text not in (self.out if stream == "out" else self.err):
                    if all(r.done() for r in self._readers):
                        raise AssertionError(
                            f"mas-ctl ended (rc {self.process.returncode}) before {text!r}; "
                            f"stdout: {self.out!r}; stderr: {self.err!r}"
                        )
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(
                f"no {text!r} on std{stream} within {timeout} s; stdout: {self.out!r}; "
                f"stderr: {self.err!r}"
            ) from None

    async def finish(self, timeout: float = STEP) -> int:
        """Wait for the exit and the last output; the exit code."""
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            await asyncio.gather(*self._readers)
        return code

    async def signal(self, signum: int = signal.SIGTERM, timeout: float = STEP) -> int:
        """Send ``signum``; the exit code."""
        self.process.send_signal(signum)
        return await self.finish(timeout)

    async def close(self) -> None:
        """Kill it if it still runs; stop the readers."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()
        await asyncio.gather(*self._readers, return_exceptions=True)


async def mas_ctl(control_dir: Path, *args: str, timeout: float = START) -> tuple[int, str, str]:
    """Run ``mas-ctl ARGS`` to its end: (exit code, stdout, stderr)."""
    run = await MasCtl.start(control_dir, *args)
    try:
        code = await run.finish(timeout)
    finally:
        await run.close()
    return code, run.out, run.err


async def queued_turns(url: str, agent: str, count: int) -> None:
    """Wait (at most STEP) until ``agent``'s mailbox has ``count`` turns queued, as its
    ``/metrics`` says (``maslab_queue_depth``)."""
    async with httpx.AsyncClient(timeout=STEP) as http, asyncio.timeout(STEP):
        while True:
            text = (await http.get(f"{url}/metrics")).text
            depth = next(
                (
                    sample.value
                    for family in text_string_to_metric_families(text)
                    for sample in family.samples
                    if sample.name == "maslab_queue_depth" and sample.labels.get("agent") == agent
                ),
                0.0,
            )
            if depth >= count:
                return
            await asyncio.sleep(0.05)


async def ask_a2a(url: str, text: str, *, context_id: str | None = None) -> str:
    """One blocking A2A send with the official client; the reply's text.

    A plain Message answer gives its text; a task gives its status message's text, else
    the text of its artifacts.
    """
    async with httpx.AsyncClient(timeout=STEP) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        client = await ClientFactory(config).create_from_url(url)
        try:
            request = SendMessageRequest(message=user_message(text, context_id=context_id))
            async with asyncio.timeout(STEP):
                responses = [r async for r in client.send_message(request)]
        finally:
            await client.close()
    last = responses[-1]
    if last.HasField("message"):
        return str(get_message_text(last.message))
    task = last.task
    if task.status.HasField("message"):
        return str(get_message_text(task.status.message))
    return "".join(p.text for a in task.artifacts for p in a.parts)


class A2AStream:
    """A streaming A2A send with the official client, read in a task as it arrives."""

    def __init__(self, url: str, text: str, *, context_id: str | None = None) -> None:
        self.url = url
        self.message = user_message(text, context_id=context_id)
        self.chunks: list[str] = []
        self.states: list[str] = []
        self.first_text = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name="a2a-stream")

    @property
    def text(self) -> str:
        """The streamed text so far."""
        return "".join(self.chunks)

    def _add(self, text: str) -> None:
        if text:
            self.chunks.append(text)
            self.first_text.set()

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=60.0) as http:
            client = await ClientFactory(
                ClientConfig(streaming=True, httpx_client=http)
            ).create_from_url(self.url)
            try:
                request = SendMessageRequest(message=self.message)
                async for response in client.send_message(request):
                    if response.HasField("artifact_update"):
                        for part in response.artifact_update.artifact.parts:
                            self._add(part.text)
                    elif response.HasField("status_update"):
                        self.states.append(TaskState.Name(response.status_update.status.state))
                    elif response.HasField("message"):
                        self._add(str(get_message_text(response.message)))
            finally:
                await client.close()

    async def started(self) -> None:
        """Wait for the first streamed text."""
        async with asyncio.timeout(STEP):
            await self.first_text.wait()

    async def done(self) -> str:
        """Wait for the end of the stream; the whole text."""
        async with asyncio.timeout(STEP * 2):
            await self.task
        return self.text

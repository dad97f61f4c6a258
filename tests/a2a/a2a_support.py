"""Support of the A2A tests: a scripted runner, served agents on loopback, SDK clients.

Everything is real: the a2a-sdk server stack on uvicorn and grpc.aio, the official client
over JSON-RPC, HTTP+JSON and gRPC, on 127.0.0.1 ports the OS picks.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse
from a2a.utils.constants import TransportProtocol
from tests.fast_path import fast_path_options
from tests.ports import free_port

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.plugins.a2a.parts import dict_to_struct
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest, Endpoint
from mas.runtime.metrics import REGISTRY
from mas.runtime.turns import (
    ArtifactEmitted,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
    TurnRunner,
)

STEP = 10.0  # the longest any single awaited step of a test may take


@dataclass
class ScriptRunner(TurnRunner):
    """A TurnRunner driven by the input text (the first word is the command).

    - ``quick TEXT``: ends at once with TEXT (no progress events);
    - ``echo TEXT`` (and anything unknown): streams TEXT word by word, then ends;
    - ``wait GATE TEXT``: signals ``started[GATE]``, waits for ``gates[GATE]``, then ends;
    - ``ask TEXT``: asks the human (input_required); the session's next input resumes;
    - ``artifacts``: emits a text, a data, a file and a URL artifact;
    - ``fail TEXT``: ends failed with TEXT;
    - ``history``: answers with the session's earlier inputs, joined by ``|``;
    - ``barrier N``: waits until N barrier turns (of any sessions) have started.
    """

    agent_id: str = "scripted"
    gates: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    started: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    history: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    asked: set[str] = field(default_factory=set)
    seen: list[TurnInput] = field(default_factory=list)
    arrived: int = 0

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        self.seen.append(turn)
        command, _, rest = turn.text.partition(" ")
        session = turn.session_id
        if session in self.asked:
            self.asked.discard(session)
            self.history[session].append(turn.text)
            yield TurnEnded("completed", text=f"resumed with: {turn.text}")
            return
        if command == "history":
            yield TurnEnded("completed", text="|".join(self.history[session]))
            return
        self.history[session].append(turn.text)
        if command == "quick":
            yield TurnEnded("completed", text=rest)
        elif command == "wait":
            self.history[session].pop()  # recorded when it finishes: that is its effect
            gate, _, text = rest.partition(" ")
            self.started[gate].set()
            await self.gates[gate].wait()
            self.history[session].append(turn.text)
            yield TextDelta(text)
            yield TurnEnded("completed", text=text)
        elif command == "barrier":
            self.arrived += 1
            if self.arrived >= int(rest):
                self.gates["barrier"].set()
            await self.gates["barrier"].wait()
            yield TurnEnded("completed", text=turn.text)
        elif command == "ask":
            self.asked.add(session)
            yield TurnEnded("input_required", text=f"question: {rest}")
        elif command == "artifacts":
            yield ArtifactEmitted("text", "notes.txt", text="some notes")
            yield ArtifactEmitted("data", "result.json", data={"answer": 42, "ok": True})
            yield ArtifactEmitted(
                "file", "blob.bin", content=b"\x00\x01binary", media_type="application/octet-stream"
            )
            yield ArtifactEmitted(
                "url",
                "link",
                url="https://example.invalid/report.pdf",
                media_type="application/pdf",
            )
            yield TurnEnded("completed", text="4 artifacts")
        elif command == "fail":
            yield TurnEnded("failed", message=rest)
        else:
            words = turn.text.split(" ")
            for index, word in enumerate(words):
                yield TextDelta(word if index == 0 else f" {word}")
                await asyncio.sleep(0)
            yield TurnEnded("completed", text=turn.text)


@dataclass
class Served:
    """One agent served on loopback."""

    exposure: A2AExposure
    runner: ScriptRunner
    mailbox: SessionTurnMailbox
    url: str

    @property
    def grpc_address(self) -> str:
        assert self.exposure.grpc_address is not None
        return self.exposure.grpc_address


def endpoint_for(
    port: int, grpc_port: int | None = None, a2a_options: dict[str, Any] | None = None, **caps: bool
) -> Endpoint:
    # the tests' push receivers listen on loopback, which the default a2a.push policy refuses
    a2a: dict[str, Any] = {"capabilities": caps, "push": {"allow_private": True}}
    for name, value in (a2a_options or {}).items():
        a2a[name] = {**a2a[name], **value} if name in a2a else value
    if grpc_port is not None:
        a2a["grpc_port"] = grpc_port
    return Endpoint(url=f"http://127.0.0.1:{port}", usage="deploy", a2a=fast_path_options(a2a))


@contextlib.asynccontextmanager
async def serve_agent(
    *,
    manifest: AgentManifest | None = None,
    grpc_on: bool = True,
    runner: ScriptRunner | None = None,
    max_pending_per_session: int = 64,
    push_url_validator: Any = None,
    message_grace: float = 5.0,  # generous: a busy CI machine must not turn a Message into a task
    a2a_options: dict[str, Any] | None = None,
    caller_check: Any = None,
    **caps: bool,
) -> AsyncIterator[Served]:
    """Serve a scripted agent on free loopback ports; stop it afterwards."""
    runner = runner or ScriptRunner()
    mailbox = SessionTurnMailbox(runner, max_pending_per_session=max_pending_per_session)
    port = free_port()
    endpoint = endpoint_for(port, free_port() if grpc_on else None, a2a_options, **caps)
    exposure = A2AExposure(
        agent_id="scripted",
        manifest=manifest or AgentManifest(),
        endpoint=endpoint,
        mailbox=mailbox,
        grpc=grpc_on,
        drain_timeout=2.0,
        message_grace=message_grace,
        push_url_validator=push_url_validator,
        caller_check=caller_check,
    )
    await exposure.start()
    try:
        yield Served(exposure, runner, mailbox, exposure.url)
    finally:
        await exposure.aclose()
        await mailbox.aclose()


@contextlib.asynccontextmanager
async def serve_with_store(
    task_store: dict[str, Any], runner: TurnRunner, agent_id: str
) -> AsyncIterator[A2AExposure]:
    """Serve ``runner`` with the endpoint's ``a2a.task_store`` options and ``/metrics``."""
    mailbox = SessionTurnMailbox(runner, max_pending_per_session=64)
    endpoint = Endpoint(
        url=f"http://127.0.0.1:{free_port()}",
        usage="deploy",
        a2a=fast_path_options({"task_store": task_store}),
    )
    exposure = A2AExposure(
        agent_id=agent_id,
        manifest=AgentManifest(),
        endpoint=endpoint,
        mailbox=mailbox,
        drain_timeout=1.0,
        metrics_registries=[REGISTRY],
    )
    await exposure.start()
    try:
        yield exposure
    finally:
        await exposure.aclose()
        await mailbox.aclose()


TRANSPORTS = ("jsonrpc", "rest", "grpc")


@contextlib.asynccontextmanager
async def sdk_client(
    served: Served,
    transport: str = "jsonrpc",
    *,
    streaming: bool = False,
    connections: int = 100,
) -> AsyncIterator[Client]:
    """The official a2a-sdk client for ``served`` over one transport."""
    binding = {
        "jsonrpc": TransportProtocol.JSONRPC,
        "rest": TransportProtocol.HTTP_JSON,
        "grpc": TransportProtocol.GRPC,
    }[transport].value
    channels: list[grpc.aio.Channel] = []

    def channel(target: str) -> grpc.aio.Channel:
        made = grpc.aio.insecure_channel(target)
        channels.append(made)
        return made

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(timeout=max(STEP, 8.0 * connections / 10), limits=limits) as http:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            grpc_channel_factory=channel,
            supported_protocol_bindings=[binding],
        )
        client = await ClientFactory(config).create_from_url(served.url)
        try:
            yield client
        finally:
            await client.close()
            for made in channels:
                await made.close()


def user_message(
    text: str,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Message:
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[Part(text=text)],
    )
    if context_id:
        message.context_id = context_id
    if task_id:
        message.task_id = task_id
    if metadata:
        message.metadata.CopyFrom(dict_to_struct(metadata))
    return message


async def send(
    client: Client,
    message: Message,
    *,
    return_immediately: bool = False,
    timeout: float = STEP,
) -> list[StreamResponse]:
    """Every response of one send (one for a blocking send, many for a stream)."""
    request = SendMessageRequest(message=message)
    request.configuration.return_immediately = return_immediately
    async with asyncio.timeout(timeout):
        return [response async for response in client.send_message(request)]


async def wait_for(event: asyncio.Event) -> None:
    async with asyncio.timeout(STEP):
        await event.wait()


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (bounded by STEP) until ``check`` holds."""
    async with asyncio.timeout(STEP):
        while not await check():
            await asyncio.sleep(0.02)
    assert await check(), what

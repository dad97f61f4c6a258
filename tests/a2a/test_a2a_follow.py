"""``A2AAgentComm`` following a task a peer answers a blocking send with while still working.

The peer is the a2a-sdk's own server (``DefaultRequestHandler``, the JSON-RPC and REST route
factories on uvicorn, ``GrpcHandler`` on grpc.aio) on loopback, with a request handler that
answers every send at once, as ``returnImmediately`` does: the task comes back ``WORKING``,
as from a peer that ends a blocking send early. Its executor finishes the task only when the
test opens the gate, and the test opens it only once the comm has begun to follow (the first
``GetTask`` or ``SubscribeToTask`` the peer sees), so the comm must follow to see the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
import uvicorn
from a2a.helpers.proto_helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
)
from a2a_support import STEP, free_port, wait_for
from compliance.a2a.baseline_server import open_task
from starlette.applications import Starlette
from test_a2a_delegation import outbound

from library_ioa.plugins.a2a.agent_comm import A2AAgentComm
from mas.runtime.errors import PeerTimeout

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


@dataclass
class Gates:
    """What the test and the peer signal each other."""

    followed: asyncio.Event = field(default_factory=asyncio.Event)  # a GetTask/SubscribeToTask
    finish: asyncio.Event = field(default_factory=asyncio.Event)  # the test lets the task end
    calls: Counter[str] = field(default_factory=Counter)
    short_streams: bool = False  # SubscribeToTask ends at once, seeing nothing


class GatedExecutor(AgentExecutor):
    """Takes the task to WORKING, then completes it when ``gates.finish`` is set."""

    def __init__(self, gates: Gates, *, end: TaskState = TaskState.TASK_STATE_COMPLETED) -> None:
        self.gates = gates
        self.end = end

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        text = get_message_text(message) if message else ""
        context_id = context.context_id or ""
        updater = await open_task(context, event_queue, context_id)
        await updater.start_work()
        await self.gates.finish.wait()
        reply = updater.new_agent_message([Part(text=f"done: {text}")])
        if self.end == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(reply)
        else:
            await updater.complete(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


class EarlyHandler(DefaultRequestHandler):
    """The SDK's handler, answering every send with the task as it is at once."""

    gates: Gates

    async def on_message_send(self, params: Any, context: Any) -> Any:
        params.configuration.return_immediately = True
        return await super().on_message_send(params, context)

    async def on_get_task(self, params: Any, context: Any) -> Task | None:
        self.gates.calls["GetTask"] += 1
        self.gates.followed.set()
        return await super().on_get_task(params, context)

    async def on_subscribe_to_task(self, params: Any, context: Any) -> AsyncGenerator[Any]:
        self.gates.calls["SubscribeToTask"] += 1
        if self.gates.short_streams:  # the task ends only once the comm reads it again
            return
        self.gates.followed.set()
        async for event in super().on_subscribe_to_task(params, context):
            yield event


def build_card(binding: str, port: int, grpc_port: int, *, streaming: bool) -> AgentCard:
    """A card with the one interface of ``binding``, so the comm can only use that one."""
    base = f"http://{HOST}:{port}"
    url = {"JSONRPC": base, "HTTP+JSON": f"{base}/a2a/rest", "GRPC": f"{HOST}:{grpc_port}"}
    return AgentCard(
        name="slow finisher",
        description="Answers a send while its task is still working.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url[binding], protocol_binding=binding, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="work", name="Work", description="Works a while", tags=["work"])],
    )


@contextlib.asynccontextmanager
async def early_peer(
    binding: str,
    gates: Gates,
    *,
    streaming: bool,
    end: TaskState = TaskState.TASK_STATE_COMPLETED,
) -> AsyncIterator[str]:
    """Serve the early-answering peer; yield its base URL."""
    port, grpc_port = free_port(), free_port()
    card = build_card(binding, port, grpc_port, streaming=streaming)
    handler = EarlyHandler(
        agent_executor=GatedExecutor(gates, end=end),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    handler.gates = gates
    routes = [
        *create_agent_card_routes(card),
        *create_rest_routes(handler, path_prefix="/a2a/rest"),
        *create_jsonrpc_routes(handler, rpc_url="/"),
    ]
    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
    grpc_server.add_insecure_port(f"{HOST}:{grpc_port}")
    await grpc_server.start()
    config = uvicorn.Config(
        Starlette(routes=routes),
        host=HOST,
        port=port,
        log_level="error",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        async with asyncio.timeout(STEP):
            while not server.started:
                if serving.done():
                    serving.result()
                await asyncio.sleep(0.01)
        yield f"http://{HOST}:{port}"
    finally:
        gates.finish.set()  # a task still waiting ends, so the servers stop at once
        server.should_exit = True
        await asyncio.wait_for(serving, STEP)
        await grpc_server.stop(grace=None)
        await handler.aclose()  # the active task of a task waiting for input


async def send_and_finish(comm: A2AAgentComm, gates: Gates, text: str) -> Any:
    """Send ``text``; once the peer sees the comm follow the task, let the task end."""
    sending = asyncio.create_task(comm.send(outbound(text)))
    try:
        followed = asyncio.create_task(gates.followed.wait())
        done, _ = await asyncio.wait(
            {sending, followed}, timeout=STEP, return_when="FIRST_COMPLETED"
        )
        followed.cancel()
        assert followed in done, f"the comm did not follow the task: {sending}"
        gates.finish.set()
        async with asyncio.timeout(STEP):
            return await sending
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sending


@pytest.mark.parametrize("streaming", [False, True], ids=["polled", "resubscribed"])
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_task_left_working_is_followed_to_its_end(binding: str, streaming: bool) -> None:
    """Fails before the fix: ``subscribe`` on the comm's non-streaming client raised
    ``NotImplementedError`` out of ``send``."""
    gates = Gates()
    async with early_peer(binding, gates, streaming=streaming) as url:
        comm = A2AAgentComm(url, timeout=STEP)
        try:
            reply = await send_and_finish(comm, gates, "the long job")
        finally:
            await comm.aclose()
        assert comm.protocol_binding == binding
    assert (reply.status, reply.text) == ("completed", "done: the long job")
    assert reply.task_id
    assert gates.calls["SubscribeToTask"] == int(streaming)  # subscribed only to a streamer
    assert gates.calls["GetTask"] >= 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_followed_task_that_asks_for_input_ends_the_send(binding: str) -> None:
    gates = Gates()
    async with early_peer(
        binding, gates, streaming=False, end=TaskState.TASK_STATE_INPUT_REQUIRED
    ) as url:
        comm = A2AAgentComm(url, timeout=STEP)
        try:
            reply = await send_and_finish(comm, gates, "a question")
        finally:
            await comm.aclose()
    assert (reply.status, reply.text) == ("input_required", "done: a question")


@pytest.mark.parametrize("streaming", [False, True], ids=["polled", "resubscribed"])
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_task_that_never_ends_is_the_delegations_timeout(
    binding: str, streaming: bool
) -> None:
    gates = Gates()  # finish is never set while the comm waits
    async with early_peer(binding, gates, streaming=streaming) as url:
        comm = A2AAgentComm(url, timeout=2.0)
        try:
            async with asyncio.timeout(STEP):
                with pytest.raises(PeerTimeout) as raised:
                    await comm.send(outbound("forever"))
        finally:
            await comm.aclose()
        assert gates.followed.is_set()
    assert str(raised.value) == f"peer {url} did not answer within 2s"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancelling_the_delegation_stops_the_follow(binding: str) -> None:
    gates = Gates()
    async with early_peer(binding, gates, streaming=False) as url:
        comm = A2AAgentComm(url, timeout=STEP)
        try:
            sending = asyncio.create_task(comm.send(outbound("to be cancelled")))
            await wait_for(gates.followed)
            sending.cancel()
            async with asyncio.timeout(STEP):
                with pytest.raises(asyncio.CancelledError):
                    await sending
        finally:
            await comm.aclose()
        assert sending.cancelled()


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_subscription_that_ends_early_is_followed_by_polling(binding: str) -> None:
    gates = Gates(short_streams=True)
    async with early_peer(binding, gates, streaming=True) as url:
        comm = A2AAgentComm(url, timeout=STEP)
        try:
            reply = await send_and_finish(comm, gates, "the long job")
        finally:
            await comm.aclose()
    assert (reply.status, reply.text) == ("completed", "done: the long job")
    assert gates.calls["SubscribeToTask"] == 1
    assert gates.calls["GetTask"] >= 1

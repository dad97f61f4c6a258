"""Real a2a-sdk servers for the conformance tests: one that conforms, and ways to break it.

:func:`sdk_agent` serves the SDK's own parts (``DefaultRequestHandler``, the JSON-RPC and REST
route factories on uvicorn, ``GrpcHandler`` on grpc.aio) on 127.0.0.1 ports the OS picks, with
library_ioa's corrections mounted. Each name in ``breaks`` spoils exactly one behaviour the probe
checks, the way a real server gets it wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCard,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InternalError, TaskNotFoundError, UnsupportedOperationError
from compliance.a2a.baseline_server import build_card as baseline_card
from compliance.a2a.baseline_server import open_task
from starlette.applications import Starlette
from tests.ports import free_port

from library_ioa.plugins.a2a.server.transport.corrections import HttpCorrections
from library_ioa.plugins.a2a.server.transport.grpc_corrections import GrpcVersionCheck

HOST = "127.0.0.1"
BREAKS = {
    "no-grpc-listener",  # the card advertises gRPC, nothing listens there
    "streaming-refused",  # the card declares streaming, the server refuses it
    "get-task-wrong",  # GetTask of an unknown id answers a made-up task
    "push-config-fails",  # the card declares push, the config endpoint fails
    "no-version-check",  # the gRPC side serves any A2A-Version (the bare SDK)
    "slow-send",  # SendMessage answers only after SLOW_SECONDS
    "message-only",  # every send is answered with a Message, never a task (not a fault)
}
SLOW_SECONDS = 2.0


class CompletingExecutor(AgentExecutor):
    """Completes a task whose reply echoes the input (``slow``: after a pause)."""

    def __init__(self, *, slow: bool = False, message_only: bool = False) -> None:
        self.slow = slow
        self.message_only = message_only

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if self.slow:
            await asyncio.sleep(SLOW_SECONDS)
        message = context.message
        text = get_message_text(message) if message else ""
        context_id = context.context_id or ""
        if self.message_only:
            await event_queue.enqueue_event(
                new_text_message(f"echo: {text}", context_id=context_id)
            )
            return
        updater = await open_task(context, event_queue, context_id)
        await updater.start_work()
        await updater.complete(updater.new_agent_message([Part(text=f"echo: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


class BreakableHandler(DefaultRequestHandler):
    """The SDK's request handler, with the chosen behaviours spoiled."""

    breaks: frozenset[str] = frozenset()

    async def on_get_task(self, params: Any, context: Any) -> Task | None:
        try:
            return await super().on_get_task(params, context)
        except TaskNotFoundError:
            if "get-task-wrong" not in self.breaks:
                raise
            done = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
            return Task(id="some-other-task", context_id="c", status=done)

    async def on_message_send_stream(self, params: Any, context: Any) -> AsyncGenerator[Any]:
        if "streaming-refused" in self.breaks:
            raise UnsupportedOperationError("streaming is switched off here")
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_create_task_push_notification_config(self, params: Any, context: Any) -> Any:
        if "push-config-fails" in self.breaks:
            raise InternalError("the push-config store is down")
        return await super().on_create_task_push_notification_config(params, context)


@dataclass(frozen=True)
class SdkAgent:
    """A served agent: its base URL and its card."""

    url: str
    grpc_port: int
    card: AgentCard


def build_card(port: int, grpc_port: int, *, streaming: bool, push: bool) -> AgentCard:
    """A card with the three 1.0 interfaces (the TCK baseline's card, renamed)."""
    return baseline_card(
        port,
        grpc_port,
        name="conformance subject",
        description="An a2a-sdk server for the conformance probe tests.",
        streaming=streaming,
        push=push,
    )


@contextlib.asynccontextmanager
async def sdk_agent(
    *breaks: str, streaming: bool = True, push: bool = True
) -> AsyncIterator[SdkAgent]:
    """Serve a conforming a2a-sdk agent, spoiled by ``breaks`` (names from :data:`BREAKS`)."""
    unknown = set(breaks) - BREAKS
    if unknown:
        raise ValueError(f"unknown breaks {sorted(unknown)}; known: {sorted(BREAKS)}")
    port, grpc_port = free_port(), free_port()
    card = build_card(port, grpc_port, streaming=streaming, push=push)
    store = InMemoryPushNotificationConfigStore()
    async with httpx.AsyncClient(timeout=5) as push_client:
        handler = BreakableHandler(
            agent_executor=CompletingExecutor(
                slow="slow-send" in breaks, message_only="message-only" in breaks
            ),
            task_store=InMemoryTaskStore(),
            agent_card=card,
            push_config_store=store if push else None,
            push_sender=BasePushNotificationSender(push_client, store) if push else None,
        )
        handler.breaks = frozenset(breaks)
        routes = [
            *create_agent_card_routes(card),
            *create_rest_routes(handler, path_prefix="/a2a/rest"),
            *create_jsonrpc_routes(handler, rpc_url="/"),
        ]
        app = HttpCorrections(Starlette(routes=routes), rpc_path="/", rest_prefix="/a2a/rest")
        grpc_server: grpc.aio.Server | None = None
        if "no-grpc-listener" not in breaks:
            checks = [] if "no-version-check" in breaks else [GrpcVersionCheck()]
            grpc_server = grpc.aio.server(interceptors=checks)
            a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
            grpc_server.add_insecure_port(f"{HOST}:{grpc_port}")
            await grpc_server.start()
        config = uvicorn.Config(
            app, host=HOST, port=port, log_level="error", timeout_graceful_shutdown=5
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(), name="uvicorn")
        try:
            async with asyncio.timeout(10):
                while not server.started:
                    if serving.done():
                        serving.result()
                    await asyncio.sleep(0.01)
            yield SdkAgent(f"http://{HOST}:{port}", grpc_port, card)
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, 10)
            if grpc_server is not None:
                await grpc_server.stop(grace=None)

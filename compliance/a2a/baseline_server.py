"""A bare a2a-sdk echo server: the baseline the TCK scores our runtime against.

Only the SDK's own parts: ``DefaultRequestHandler`` with the in-memory task and push stores,
the JSON-RPC and REST route factories on Starlette/uvicorn, and ``GrpcHandler`` on grpc.aio.
The executor answers every message with a Message echoing its text; nothing else is taught.

    python -m compliance.a2a.baseline_server --port 24001 --grpc-port 24002

Binds 127.0.0.1 only. The card advertises JSON-RPC at ``/``, HTTP+JSON at ``/a2a/rest`` and
gRPC, with streaming and push notifications declared.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import grpc
import httpx
import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.struct_pb2 import Value
from starlette.applications import Starlette

from library_ioa.plugins.a2a.server.transport.corrections import HttpCorrections
from library_ioa.plugins.a2a.server.transport.grpc_corrections import GrpcVersionCheck

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"


async def open_task(
    context: RequestContext, event_queue: EventQueue, context_id: str
) -> TaskUpdater:
    """The task's updater, after the SUBMITTED task a new message opens is enqueued.

    A follow-up (``context.current_task`` set) opens nothing. Shared by the test suites' own
    SDK executors.
    """
    task_id = context.task_id or ""
    if context.current_task is None and context.message is not None:
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
        )
    return TaskUpdater(event_queue, task_id, context_id)


class EchoExecutor(AgentExecutor):
    """Completes a task whose status message echoes the input text (``--taught``: see below).

    Taught, it also gives the behaviours the TCK 1.0 asks for by messageId prefix
    (``tck-input-required``, ``tck-message-response``, ``tck-artifact-*``, ``tck-stream-*``,
    ``tck-reject-task``), as the TCK's scenario files describe them.
    """

    def __init__(self, *, taught: bool = False) -> None:
        self.taught = taught

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        text = get_message_text(message) if message else ""
        mid = message.message_id if message else ""
        context_id = context.context_id or ""
        if context.current_task is not None:
            # A follow-up that names only the task: keep the task's own context.
            context_id = context.current_task.context_id
        if self.taught and mid.startswith("tck-message-response"):
            reply = new_text_message("Direct message response", context_id=context_id)
            await event_queue.enqueue_event(reply)
            return
        updater = await open_task(context, event_queue, context_id)
        if self.taught and await self._taught(mid, updater):
            return
        await updater.complete(updater.new_agent_message([Part(text=text or "(empty)")]))

    async def _taught(self, mid: str, updater: TaskUpdater) -> bool:
        """Act on a TCK prefix; False when the message asks for nothing special."""
        say = updater.new_agent_message
        if mid.startswith("tck-input-required"):
            await updater.requires_input(say([Part(text="Need more input")]))
        elif mid.startswith("tck-reject-task"):
            await updater.reject(say([Part(text="rejected")]))
        elif mid.startswith("tck-artifact-text"):
            await updater.add_artifact([Part(text="Generated text content")])
            await updater.complete()
        elif mid.startswith("tck-artifact-file-url"):
            part = Part(url="https://example.com/output.txt", filename="output.txt",
                        media_type="text/plain")  # fmt: skip
            await updater.add_artifact([part])
            await updater.complete()
        elif mid.startswith("tck-artifact-file"):
            part = Part(raw=b"file content", filename="output.txt", media_type="text/plain")
            await updater.add_artifact([part])
            await updater.complete()
        elif mid.startswith("tck-artifact-data"):
            data = Value()
            data.struct_value.update({"key": "value", "count": 42})
            await updater.add_artifact([Part(data=data)])
            await updater.complete()
        elif mid.startswith("tck-stream-artifact-chunked"):
            await updater.start_work()
            aid = "chunked"
            await updater.add_artifact([Part(text="chunk-1 ")], artifact_id=aid, last_chunk=False)
            await updater.add_artifact(
                [Part(text="chunk-2")], artifact_id=aid, append=True, last_chunk=True
            )
            await updater.complete()
        elif mid.startswith("tck-stream-002"):
            await updater.complete()
        elif mid.startswith(("tck-stream", "test-resubscribe")):
            await updater.start_work()
            if mid.startswith("test-resubscribe"):
                await asyncio.sleep(60)
            await updater.add_artifact([Part(text="Stream hello from TCK")])
            await updater.complete()
        else:
            return False
        return True

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def build_card(
    port: int,
    grpc_port: int,
    *,
    name: str = "bare a2a-sdk echo",
    description: str = "A bare a2a-sdk echo server (compliance baseline).",
    streaming: bool = True,
    push: bool = True,
) -> AgentCard:
    """A bare server's AgentCard: the three 1.0 interfaces, streaming and push as given."""
    base = f"http://{HOST}:{port}"
    return AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(
                url=f"{base}/a2a/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
            AgentInterface(
                url=f"{HOST}:{grpc_port}", protocol_binding="GRPC", protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes the input", tags=["echo"])],
    )


async def serve(
    port: int, grpc_port: int, *, taught: bool = False, corrected: bool = False
) -> None:
    """Serve until cancelled."""
    card = build_card(port, grpc_port)
    push_store = InMemoryPushNotificationConfigStore()
    async with httpx.AsyncClient(timeout=10) as push_client:
        handler = DefaultRequestHandler(
            agent_executor=EchoExecutor(taught=taught),
            task_store=InMemoryTaskStore(),
            agent_card=card,
            push_config_store=push_store,
            push_sender=BasePushNotificationSender(push_client, push_store),
        )
        routes = [
            *create_agent_card_routes(card),
            *create_rest_routes(handler, path_prefix="/a2a/rest"),
            *create_jsonrpc_routes(handler, rpc_url="/"),
        ]
        app: Any = Starlette(routes=routes)
        interceptors: list[Any] = []
        if corrected:
            app = HttpCorrections(app, rpc_path="/", rest_prefix="/a2a/rest")
            interceptors.append(GrpcVersionCheck())
        grpc_server = grpc.aio.server(interceptors=interceptors)
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        grpc_server.add_insecure_port(f"{HOST}:{grpc_port}")
        await grpc_server.start()
        config = uvicorn.Config(app, host=HOST, port=port, log_level="warning")
        try:
            await uvicorn.Server(config).serve()
        finally:
            await grpc_server.stop(grace=1)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="HTTP port (JSON-RPC and REST)")
    parser.add_argument("--grpc-port", type=int, required=True, help="gRPC port")
    parser.add_argument(
        "--taught", action="store_true", help="also act on the TCK's messageId prefixes"
    )
    parser.add_argument(
        "--corrected", action="store_true", help="mount library_ioa's corrections of the SDK"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.port, args.grpc_port, taught=args.taught, corrected=args.corrected))


if __name__ == "__main__":
    main()

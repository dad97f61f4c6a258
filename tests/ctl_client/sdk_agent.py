"""A bare a2a-sdk agent on loopback for the client tests: the SDK's own request handler,
JSON-RPC and REST routes on uvicorn and gRPC handler on grpc.aio, and an executor of our own
whose behaviours a test drives by the message text:

- ``hold``: streams ``first `` and ``second `` into a ``result`` artifact, then waits for
  :attr:`go` (``started`` is set meanwhile), then ``third`` and completes with no status
  message (the reply is the artifact, as many frameworks answer);
- ``book``: asks ``Which day?`` (input-required); the next message on that task completes it;
- ``files``: a text, a data and a file artifact, then completes with ``files sent``;
- anything else: completes with ``echo: <text>``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
import uvicorn
from a2a.helpers.proto_helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import Part, TaskState
from compliance.a2a.baseline_server import build_card, open_task
from google.protobuf import struct_pb2
from private_ca import PrivateCa
from starlette.applications import Starlette
from tests.ports import free_port

HOST = "127.0.0.1"


@dataclass
class Script(AgentExecutor):
    """The executor (see the module docstring)."""

    go: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message) if context.message else ""
        updater = await open_task(context, event_queue, context.context_id or "")
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.complete(updater.new_agent_message([Part(text=f"booked {text}")]))
            return
        await updater.start_work()
        if text == "hold":
            await updater.add_artifact(
                [Part(text="first ")], artifact_id="r1", name="result", last_chunk=False
            )
            await updater.add_artifact(
                [Part(text="second ")], artifact_id="r1", name="result", append=True
            )
            self.started.set()
            await self.go.wait()
            await updater.add_artifact(
                [Part(text="third")], artifact_id="r1", name="result", append=True, last_chunk=True
            )
            await updater.complete()
        elif text == "book":
            await updater.requires_input(updater.new_agent_message([Part(text="Which day?")]))
        elif text == "files":
            data = struct_pb2.Value()
            data.struct_value.update({"rows": 2, "name": "table"})
            await updater.add_artifact([Part(text="a note")], name="note")
            await updater.add_artifact(
                [Part(data=data, media_type="application/json")], name="table"
            )
            await updater.add_artifact(
                [Part(raw=b"\x00bytes", filename="/etc/passwd", media_type="application/x-bin")],
                name="blob",
            )
            await updater.complete(updater.new_agent_message([Part(text="files sent")]))
        else:
            await updater.complete(updater.new_agent_message([Part(text=f"echo: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


@dataclass(frozen=True)
class SdkAgent:
    """A served bare agent."""

    url: str
    script: Script
    store: InMemoryTaskStore


@contextlib.asynccontextmanager
async def sdk_agent(
    *, streaming: bool, tls: PrivateCa | None = None, bindings: tuple[str, ...] | None = None
) -> AsyncIterator[SdkAgent]:
    """Serve the bare agent (its card declaring ``streaming`` or not) until the block ends;
    with ``tls``, over https and gRPC over TLS with that server certificate; with
    ``bindings``, its card lists only the interfaces of those (all are served)."""
    port, grpc_port = free_port(), free_port()
    card = build_card(port, grpc_port, name="bare", streaming=streaming, push=False)
    if bindings is not None:
        kept = [i for i in card.supported_interfaces if i.protocol_binding in bindings]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(kept)
    scheme = "https" if tls else "http"
    for interface in card.supported_interfaces:
        interface.url = interface.url.replace("http://", f"{scheme}://")
    script = Script()
    store = InMemoryTaskStore()
    handler = DefaultRequestHandler(agent_executor=script, task_store=store, agent_card=card)
    routes = [
        *create_agent_card_routes(card),
        *create_rest_routes(handler, path_prefix="/a2a/rest"),
        *create_jsonrpc_routes(handler, rpc_url="/"),
    ]
    grpc_server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
    if tls is None:
        grpc_server.add_insecure_port(f"{HOST}:{grpc_port}")
    else:
        pair = (tls.key.read_bytes(), tls.cert.read_bytes())
        grpc_server.add_secure_port(f"{HOST}:{grpc_port}", grpc.ssl_server_credentials([pair]))
    await grpc_server.start()
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=routes),
            host=HOST,
            port=port,
            log_level="error",
            timeout_graceful_shutdown=5,
            ssl_certfile=str(tls.cert) if tls else None,
            ssl_keyfile=str(tls.key) if tls else None,
        )
    )
    serving = asyncio.create_task(server.serve(), name="bare-sdk-agent")
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if serving.done():
                    serving.result()
                await asyncio.sleep(0.01)
        yield SdkAgent(f"{scheme}://{HOST}:{port}", script, store)
    finally:
        script.go.set()
        server.should_exit = True
        await asyncio.wait_for(serving, 20)
        await grpc_server.stop(grace=None)

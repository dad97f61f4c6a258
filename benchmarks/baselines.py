"""The baselines of the hot-path benchmark, each run as its own process on 127.0.0.1.

- ``bare``: the smallest a2a-sdk 1.3 echo agent: ``DefaultRequestHandler`` +
  ``InMemoryTaskStore`` + the SDK's route factories (JSON-RPC at ``/``), on uvicorn with
  its default settings, and the SDK's ``GrpcHandler`` on ``grpc.aio`` when ``--grpc-port``
  is given. A blocking send is answered with one ``Message``; a streaming send gets the
  same event sequence ``mas-ctl serve`` (echo) produces: the task, ``working``, one
  artifact chunk per word, the closing chunk and ``completed``.
- ``raw``: the floors (``floors.py``): a bare ASGI app on uvicorn answering a fixed
  JSON-RPC result of the same shape or 20 canned SSE frames (no parsing, no protocol), and
  with ``--grpc-port`` a bare ``grpc.aio`` servicer answering a fixed response.

Usage (the driver, ``hot_path.py``, starts these)::

    python benchmarks/baselines.py bare PORT [--grpc-port N] [--gc-freeze]
    python benchmarks/baselines.py raw PORT [--grpc-port N]

Each prints ``ready`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
from typing import Any

import uvicorn
from floors import raw_app, start_grpc_floor

_WORD = re.compile(r"\s*\S+\s*")


def bare_handler(url: str, grpc_url: str | None) -> Any:
    """The SDK's ``DefaultRequestHandler`` on an echo executor, and its card."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Message,
        Part,
        Role,
        Task,
        TaskState,
        TaskStatus,
    )

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            text = context.get_user_input()
            task_id, context_id = context.task_id or "", context.context_id or ""
            if not context.call_context.state.get("streaming"):
                await event_queue.enqueue_event(
                    Message(
                        role=Role.ROLE_AGENT,
                        message_id=str(uuid.uuid4()),
                        context_id=context_id,
                        task_id=task_id,
                        parts=[Part(text=text)],
                    )
                )
                return
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.start_work()
            artifact = f"response-{uuid.uuid4().hex[:12]}"
            for index, word in enumerate(_WORD.findall(text)):
                await updater.add_artifact(
                    [Part(text=word)],
                    artifact_id=artifact,
                    name="response",
                    append=index > 0,
                    last_chunk=False,
                )
            await updater.add_artifact(
                [Part(text="")], artifact_id=artifact, name="response", append=True, last_chunk=True
            )
            await updater.complete(updater.new_agent_message([Part(text=text)]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    class Handler(DefaultRequestHandler):  # type: ignore[misc]
        async def on_message_send(self, params: Any, context: Any) -> Any:
            context.state["streaming"] = False
            return await super().on_message_send(params, context)

        def on_message_send_stream(self, params: Any, context: Any) -> Any:
            context.state["streaming"] = True
            return super().on_message_send_stream(params, context)

    interfaces = [AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")]
    if grpc_url:
        interfaces.append(
            AgentInterface(url=grpc_url, protocol_binding="GRPC", protocol_version="1.0")
        )
    card = AgentCard(
        name="bare",
        description="bare echo",
        version="1",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    return Handler(Echo(), InMemoryTaskStore(), card), card


def uvicorn_config(app: Any, port: int, loop: str, http: str) -> uvicorn.Config:
    """uvicorn's defaults (``auto``: uvloop and httptools when installed) unless overridden."""
    return uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop=loop,
        http=http,
        log_level="warning",
        access_log=False,
    )


async def serve_until_stopped(server: uvicorn.Server) -> None:
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            await serving
            return
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    await serving


async def serve_bare(port: int, grpc_port: int | None, loop: str, http: str) -> None:
    import grpc
    from a2a.server.request_handlers import GrpcHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.types import a2a_pb2_grpc
    from starlette.applications import Starlette

    grpc_url = f"127.0.0.1:{grpc_port}" if grpc_port else None
    handler, card = bare_handler(f"http://127.0.0.1:{port}", grpc_url)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn_config(app, port, loop, http))
    rpc = None
    if grpc_port:
        rpc = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), rpc)
        rpc.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await rpc.start()
    await serve_until_stopped(server)
    if rpc is not None:
        await rpc.stop(1)


async def serve_raw(config: uvicorn.Config, grpc_port: int | None) -> None:
    rpc = await start_grpc_floor(grpc_port) if grpc_port else None
    await serve_until_stopped(uvicorn.Server(config))
    if rpc is not None:
        await rpc.stop(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["bare", "raw"])
    parser.add_argument("port", type=int)
    parser.add_argument("--grpc-port", type=int, default=None)
    parser.add_argument("--loop", default="auto", help="uvicorn --loop (default auto)")
    parser.add_argument("--http", default="auto", help="uvicorn --http (default auto)")
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() before serving, as mas-ctl serve does"
    )
    args = parser.parse_args()
    if args.gc_freeze:
        import gc

        import a2a.server.request_handlers  # noqa: F401  (load what serving loads, then freeze)
        import starlette.applications  # noqa: F401

        gc.freeze()
    config = uvicorn_config(raw_app, args.port, args.loop, args.http)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        if args.kind == "raw":
            runner.run(serve_raw(config, args.grpc_port))
        else:
            runner.run(serve_bare(args.port, args.grpc_port, args.loop, args.http))


if __name__ == "__main__":
    main()

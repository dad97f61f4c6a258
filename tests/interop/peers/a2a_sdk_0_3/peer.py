"""An A2A peer built directly on the previous a2a-sdk line (0.3), speaking A2A 0.3.

    python peer.py --port PORT

Serves on 127.0.0.1:PORT until killed: a minimal ``AgentExecutor`` that answers every
message with a task whose artifact, named ``a2a-sdk-0.3 answer``, says
``a2a-sdk 0.3 heard: <the text>``. Runs in its own virtualenv (scripts/build-interop),
never imported by the test suite.
"""

from __future__ import annotations

import argparse

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, Part, TextPart
from a2a.utils import new_task


class HeardExecutor(AgentExecutor):
    """Completes each task with one artifact: ``a2a-sdk 0.3 heard: <the text>``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = f"a2a-sdk 0.3 heard: {context.get_user_input()}"
        await updater.add_artifact([Part(root=TextPart(text=text))], name="a2a-sdk-0.3 answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("this peer's tasks end at once")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    card = AgentCard(
        name="a2a-sdk-0.3-peer",
        description="echoes, no LLM",
        url=f"http://127.0.0.1:{port}/",
        version="1.0.0",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[],
    )
    handler = DefaultRequestHandler(agent_executor=HeardExecutor(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

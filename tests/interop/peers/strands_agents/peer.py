"""An A2A peer built on Strands Agents and its A2A server, with no LLM behind it.

    python peer.py --port PORT

Serves on 127.0.0.1:PORT until killed. Its model is a Strands ``Model`` of our own that
streams ``strands heard: <the latest user text>``; the Strands A2A server (on a2a-sdk 0.3,
speaking A2A 0.3) puts that answer in an artifact named ``agent_response`` of a completed
task. Runs in its own virtualenv (scripts/build-interop), never imported by the test suite.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any

from strands import Agent
from strands.models.model import Model
from strands.multiagent.a2a import A2AServer
from strands.types.content import Messages
from strands.types.streaming import StreamEvent


def latest_user_text(messages: Messages) -> str:
    """The text of the latest user message."""
    for message in reversed(messages):
        if message["role"] == "user":
            return "".join(block.get("text", "") for block in message["content"])
    return ""


class HeardModel(Model):
    """Answers ``strands heard: <the latest user text>``, as a model's event stream."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError("this peer has no structured output")

    async def stream(
        self, messages: Messages, *args: Any, **kwargs: Any
    ) -> AsyncIterable[StreamEvent]:
        text = f"strands heard: {latest_user_text(messages)}"
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": text}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    server = A2AServer(
        agent_factory=lambda _context: Agent(
            model=HeardModel(),
            name="strands-peer",
            description="echoes, no LLM",
            callback_handler=None,
        ),
        host="127.0.0.1",
        port=port,
        enable_a2a_compliant_streaming=True,
    )
    server.serve(host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

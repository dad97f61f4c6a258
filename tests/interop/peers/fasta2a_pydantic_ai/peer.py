"""An A2A peer built on pydantic-ai and its A2A server, fasta2a, with no LLM behind it.

    python peer.py --port PORT

Serves on 127.0.0.1:PORT until killed. Its model is a pydantic-ai ``FunctionModel`` that
answers every prompt with ``pydantic-ai heard: <the prompt>``; fasta2a puts that answer in
an artifact named ``result`` of a completed task. Runs in its own virtualenv
(scripts/build-interop), never imported by the test suite.
"""

from __future__ import annotations

import argparse

import uvicorn
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """``pydantic-ai heard: <the latest user prompt>``."""
    prompts = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]
    return ModelResponse(parts=[TextPart(f"pydantic-ai heard: {prompts[-1] if prompts else ''}")])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    agent = Agent(FunctionModel(answer), name="pydantic-ai-peer")
    app = agent_to_a2a(agent, url=f"http://127.0.0.1:{port}", description="echoes, no LLM")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

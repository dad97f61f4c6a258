"""``anthropic``: Claude through the Messages API, streamed, with tool use (the official SDK).

Params: ``model``, ``api_key_env`` (the environment variable holding the API key; required),
``base_url`` (default: the SDK's, ``https://api.anthropic.com``), ``max_tokens`` (default
4096: the API requires one), ``temperature``, ``timeout`` (seconds, default 60), and the
retry params of :mod:`mas.runtime.models.retries` (the SDK's own retries are off: one owner
decides when to ask again).

Each generation is one streamed ``POST <base_url>/v1/messages``: the agent's instructions as
``system``, the session's history as alternating user and assistant messages (a tool call is
a ``tool_use`` block of the assistant, its result a ``tool_result`` block of the next user
message; structured input is appended to its user message as JSON), and the delegate and
tool-server tools as ``tools`` with their JSON schema as ``input_schema``. ``text_delta``
events stream as text; a ``tool_use`` block's ``input_json_delta`` fragments are assembled
and handed to the agent when the stream ends; the usage of ``message_start`` and
``message_delta`` (cache reads and writes counted as input) becomes one :class:`Usage`.
An HTTP error (after the retries), a timeout, an unreachable server, an ``error`` event or a
stream that is not Messages events raises :class:`~mas.runtime.errors.ModelError` with the
status and the server's own message; the API key never appears in a message.

The SDK is imported when this module is, which the registry does only when a document
names the provider.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
from pydantic import ConfigDict, Field

from mas.runtime.errors import ModelError
from mas.runtime.models.base import (
    ChatMessage,
    ModelOutput,
    ModelPlugin,
    ModelRequest,
    TextChunk,
    ToolCall,
    Usage,
    validate_params,
)
from mas.runtime.models.provider_params import BaseURL, EnvName, Timeout, api_key
from mas.runtime.models.retries import Retrying, RetryParams, retried

DEFAULT_MAX_TOKENS = 4096


class AnthropicParams(RetryParams):
    """The anthropic model's params."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    api_key_env: EnvName
    base_url: BaseURL | None = None
    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=1)
    timeout: Timeout = 60.0


def wire_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The Messages API ``messages`` of a request: consecutive blocks of one role merged."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
        ]
    text = message.content
    if message.data is not None:
        text = f"{text}\n\nData (JSON): {json.dumps(dict(message.data), default=str)}"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in message.tool_calls:
        arguments = call.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments else {}
            except json.JSONDecodeError:
                arguments = {"arguments": arguments}
        blocks.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": arguments}
        )
    return blocks


@dataclass
class _ToolBlock:
    call_id: str
    name: str
    json: list[str] = field(default_factory=list)


@dataclass
class _Tokens:
    input: int = 0
    output: int = 0
    seen: bool = False

    def read(self, usage: Any) -> None:
        if usage is None:
            return
        inputs = [getattr(usage, n, None) for n in _INPUT_FIELDS]
        if any(isinstance(v, int) for v in inputs):
            self.input = sum(v for v in inputs if isinstance(v, int))
        output = getattr(usage, "output_tokens", None)
        if isinstance(output, int):
            self.output = output
        self.seen = True


_INPUT_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class AnthropicModel(ModelPlugin):
    """Streams Messages from the Anthropic API (or a server speaking it)."""

    def __init__(
        self, *, agent_id: str = "", env: Mapping[str, str] | None = None, **params: Any
    ) -> None:
        self.params = validate_params("anthropic", AnthropicParams, params)
        self.agent_id = agent_id
        key = api_key("anthropic", self.params.api_key_env, env)
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=self.params.base_url,
            timeout=self.params.timeout,
            max_retries=0,
        )
        self._url = f"{self.params.base_url or 'https://api.anthropic.com'}/v1/messages"
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # a test may watch it

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The arguments of one ``messages.create``."""
        kwargs: dict[str, Any] = {
            "model": self.params.model,
            "max_tokens": self.params.max_tokens,
            "messages": wire_messages(request),
        }
        if request.instructions:
            kwargs["system"] = request.instructions
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if self.params.temperature is not None:
            kwargs["temperature"] = self.params.temperature
        return kwargs

    def _where(self) -> str:
        return f"anthropic model {self.params.model!r} at {self._url}"

    async def _open(self, kwargs: dict[str, Any]) -> Any:
        """The event stream, asked again on a retried failure (:mod:`.retries`)."""
        retrying = Retrying(self.params, self.sleep)
        while True:
            try:
                return await self._client.messages.create(**kwargs, stream=True)
            except anthropic.APITimeoutError:
                raise ModelError(
                    f"{self._where()}: no answer within {self.params.timeout} s"
                ) from None
            except anthropic.APIStatusError as exc:
                status = f"HTTP {exc.status_code}: {_server_message(exc)}"
                if not retried(exc.status_code):
                    raise ModelError(f"{self._where()}: {status}") from None
                failure: tuple[str, Mapping[str, str]] = (status, dict(exc.response.headers))
            except anthropic.APIConnectionError as exc:
                failure = (f"cannot reach the server ({exc.__cause__ or exc})", {})
            await retrying.again_or_fail(self._where(), failure)

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        """One streamed Messages call."""
        stream = await self._open(self.request_kwargs(request))
        tools: dict[int, _ToolBlock] = {}
        tokens = _Tokens()
        model: str | None = None
        try:
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "message_start":
                    model = event.message.model
                    tokens.read(event.message.usage)
                elif kind == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    tools[event.index] = _ToolBlock(block.id, block.name)
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta" and delta.text:
                        yield TextChunk(delta.text)
                    elif delta.type == "input_json_delta" and event.index in tools:
                        tools[event.index].json.append(delta.partial_json)
                elif kind == "message_delta":
                    tokens.read(event.usage)
        except anthropic.APIStatusError as exc:  # an ``error`` event in the stream
            raise ModelError(f"{self._where()}: {_server_message(exc)}") from None
        except anthropic.APIError as exc:
            raise ModelError(f"{self._where()}: the stream broke ({exc})") from None
        except (ValueError, AttributeError, KeyError, TypeError) as exc:
            raise ModelError(
                f"{self._where()}: the stream is not Messages events ({type(exc).__name__}: "
                f"{str(exc)[:120]})"
            ) from None
        finally:
            await stream.close()
        for index in sorted(tools):
            block = tools[index]
            yield ToolCall(block.call_id, block.name, "".join(block.json) or "{}")
        if tokens.seen:
            yield Usage(tokens.input, tokens.output, model)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()


def _server_message(exc: anthropic.APIStatusError) -> str:
    """The server's error message (``error.message`` of an Anthropic error body), shortened."""
    body = exc.body
    message: Any = None
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else None
    text = str(message if message is not None else exc.message)
    return text if len(text) <= 300 else text[:297] + "..."

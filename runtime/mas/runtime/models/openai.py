"""``openai``: any OpenAI-compatible chat-completions server, streamed, with tool calling.

Params: ``base_url`` (the API root, default ``https://api.openai.com/v1``, or a local
server's ``http://127.0.0.1:8000/v1``), ``model``, ``api_key_env`` (the name of the environment
variable holding the API key; omit it for servers that need none), ``temperature``,
``timeout`` (seconds, default 60), ``max_tokens``.

Each generation is one ``POST <base_url>/chat/completions`` with ``stream: true``: the
agent's instructions as the system message, the session's history, and the delegate tools
as ``tools`` (function calling); structured input (``TurnInput.data``) is appended to its
user message as JSON, and ``stream_options.include_usage`` asks for the usage chunk (turn it
off with ``stream_usage: false`` for a server that refuses the option): its
``prompt_tokens`` and ``completion_tokens`` become one :class:`Usage` after the stream.
``delta.content`` chunks stream as text; ``delta.tool_calls``
fragments are assembled by index and handed to the agent when the choice finishes. An
HTTP error, a timeout, an unreachable server or a malformed stream raises
:class:`~mas.runtime.errors.ModelError` with the status and the server's own message (the
turn ends ``failed``); the API key never appears in a message. 429, 5xx and a refused
connection are asked again first (``retries``, ``backoff``, ``retry_max_seconds``:
:mod:`mas.runtime.models.retries`).

Azure OpenAI: ``azure: {deployment, api_version}`` with ``base_url`` the resource's
endpoint (``https://NAME.openai.azure.com``) posts to
``<base_url>/openai/deployments/<deployment>/chat/completions?api-version=<api_version>``
with the key in the ``api-key`` header.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from mas.runtime.errors import ModelError, PluginConfigError
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

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class AzureParams(BaseModel):
    """Azure OpenAI: the deployment and the API version."""

    model_config = ConfigDict(extra="forbid")

    deployment: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._-]+$")
    api_version: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")


class OpenAIParams(RetryParams):
    """The openai model's params."""

    model_config = ConfigDict(extra="forbid")

    base_url: BaseURL = DEFAULT_BASE_URL
    model: str = Field(min_length=1)
    api_key_env: EnvName | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout: Timeout = 60.0
    max_tokens: int | None = Field(default=None, ge=1)
    stream_usage: bool = True  # ask for the usage chunk (stream_options.include_usage)
    azure: AzureParams | None = None


def wire_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` of a request."""
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        out.append(_wire_message(message))
    return out


def _wire_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    content = message.content
    if message.data is not None:
        content = f"{content}\n\nData (JSON): {json.dumps(dict(message.data), default=str)}"
    item: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls:
        item["content"] = message.content or None
        item["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(dict(call.arguments)),
                },
            }
            for call in message.tool_calls
        ]
    return item


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIModel(ModelPlugin):
    """Streams chat completions from an OpenAI-compatible server."""

    def __init__(
        self, *, agent_id: str = "", env: Mapping[str, str] | None = None, **params: Any
    ) -> None:
        self.params = validate_params("openai", OpenAIParams, params)
        self.agent_id = agent_id
        self._key: str | None = None
        if self.params.api_key_env is not None:
            self._key = api_key("openai", self.params.api_key_env, env)
        if self.params.azure is not None:
            azure = self.params.azure
            if "base_url" not in params:
                raise PluginConfigError(
                    "model 'openai': params.base_url: is required with azure (the resource's "
                    "endpoint, e.g. https://NAME.openai.azure.com)"
                )
            self._url = (
                f"{self.params.base_url}/openai/deployments/{azure.deployment}/chat/completions"
                f"?api-version={azure.api_version}"
            )
        else:
            self._url = f"{self.params.base_url}/chat/completions"
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.params.timeout))
        self.sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # a test may watch it

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of one generation."""
        body: dict[str, Any] = {
            "model": self.params.model,
            "messages": wire_messages(request),
            "stream": True,
        }
        if self.params.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [tool.as_openai() for tool in request.tools]
        if self.params.temperature is not None:
            body["temperature"] = self.params.temperature
        if self.params.max_tokens is not None:
            body["max_tokens"] = self.params.max_tokens
        return body

    def _where(self) -> str:
        return f"openai model {self.params.model!r} at {self._url}"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._key and self.params.azure is not None:
            headers["api-key"] = self._key
        elif self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        """One streamed chat completion (asked again on a retried failure, module docstring)."""
        calls: dict[int, _PartialCall] = {}
        usage: list[Usage] = []
        retrying = Retrying(self.params, self.sleep)
        body = self.request_body(request)
        while True:
            failure: tuple[str, Mapping[str, str]] | None = None
            try:
                async with self._client.stream(
                    "POST", self._url, json=body, headers=self._headers()
                ) as response:
                    if response.status_code != 200:
                        text = (await response.aread()).decode("utf-8", "replace")
                        status = f"HTTP {response.status_code}: {_server_message(text)}"
                        if not retried(response.status_code):
                            raise ModelError(f"{self._where()}: {status}")
                        failure = (status, dict(response.headers))
                    else:
                        async for line in response.aiter_lines():
                            payload = _sse_data(line)
                            if payload is None:
                                continue
                            if payload == "[DONE]":
                                break
                            for output in self._chunk(payload, calls):
                                if isinstance(output, Usage):
                                    usage[:] = [output]  # the last report wins
                                else:
                                    yield output
            except httpx.TimeoutException:
                raise ModelError(
                    f"{self._where()}: no answer within {self.params.timeout} s"
                ) from None
            except httpx.ConnectError as exc:
                failure = (f"cannot reach the server ({exc})", {})
            except httpx.HTTPError as exc:
                raise ModelError(f"{self._where()}: cannot reach the server ({exc})") from None
            if failure is None:
                break
            await retrying.again_or_fail(self._where(), failure)
        for index in sorted(calls):
            partial = calls[index]
            yield ToolCall(
                partial.call_id or f"call-{index}", partial.name, "".join(partial.arguments)
            )
        if usage:
            yield usage[0]

    def _chunk(self, payload: str, calls: dict[int, _PartialCall]) -> list[ModelOutput]:
        try:
            chunk = json.loads(payload)
            choices = chunk.get("choices") or []
        except (json.JSONDecodeError, AttributeError):
            raise ModelError(
                f"{self._where()}: the stream is not chat-completions chunks: {payload[:120]!r}"
            ) from None
        out: list[ModelOutput] = []
        reported = chunk.get("usage")
        if isinstance(reported, dict):
            out.append(self._usage(reported, chunk.get("model")))
        for choice in choices:
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                out.append(TextChunk(str(content)))
            for fragment in delta.get("tool_calls") or []:
                partial = calls.setdefault(int(fragment.get("index", 0)), _PartialCall())
                partial.call_id = fragment.get("id") or partial.call_id
                function = fragment.get("function") or {}
                partial.name = function.get("name") or partial.name
                if function.get("arguments"):
                    partial.arguments.append(str(function["arguments"]))
        return out

    def _usage(self, reported: dict[str, Any], model: Any) -> Usage:
        """The chunk's ``usage`` block (``prompt_tokens``, ``completion_tokens``)."""
        counts = [reported.get("prompt_tokens", 0), reported.get("completion_tokens", 0)]
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise ModelError(
                f"{self._where()}: the usage block is not token counts: {reported!r:.120}"
            )
        return Usage(counts[0], counts[1], model if isinstance(model, str) else None)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _sse_data(line: str) -> str | None:
    """The payload of an SSE ``data:`` line, or ``None`` for anything else."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def _server_message(body: str) -> str:
    """The server's error message (``error.message`` of an OpenAI error body), shortened."""
    try:
        message = json.loads(body)["error"]["message"]
    except (json.JSONDecodeError, KeyError, TypeError):
        message = body.strip() or "(empty body)"
    text = str(message)
    return text if len(text) <= 300 else text[:297] + "..."

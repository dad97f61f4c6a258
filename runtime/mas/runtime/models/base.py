"""``ModelPlugin``: the contract of a model plugin (registry category ``model``).

A plugin is constructed by the registry as ``Factory(**params, agent_id=..., env=...)``
(``params`` from the agent manifest's ``spec.model.params``; refuse bad ones with
:class:`~mas.runtime.errors.PluginConfigError` naming the field, the value and what is
accepted). One instance serves every session of one agent, concurrently. A plugin that
serves named models (``spec.models``, :mod:`mas.infra.model_choice`) also accepts the params
``model``, ``base_url`` and ``api_key_env`` (the environment variable holding the key).

Rules of :meth:`ModelPlugin.generate`:

- It is given a :class:`ModelRequest`: the instructions, the conversation so far (the
  agent's bounded per-session history, ending with the new input), the tool specs, and the
  question this input answers when the previous turn asked for human input.
- It yields :data:`ModelOutput` items: :class:`TextChunk` (streamed reply text),
  :class:`ToolCall` (the agent runs each and calls ``generate`` again with the results
  appended as ``tool`` messages), :class:`AskHuman` (the turn ends ``input_required``; the
  session's next input is the answer), :class:`EmitArtifact`.
- It yields a :class:`Usage` with the tokens the provider reports for the generation (its
  usage fields, streamed usage included), at most one per generation; the agent counts them
  (metrics, the model span, the turn's task metadata, budgets). A plugin that yields none
  is counted as using none.
- It is interruptible between chunks: the agent may stop iterating at any ``await``
  (``asyncio.CancelledError`` or ``aclose``); release what you hold in ``finally``.
- A failure raises (preferably :class:`~mas.runtime.errors.ModelError` with a message a
  person can act on); the agent ends the turn ``failed`` with that message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from mas.runtime.boundary.delegation import ToolSpec
from mas.runtime.errors import PluginConfigError
from mas.runtime.turns import ArtifactEmitted

Role = Literal["system", "user", "assistant", "tool"]
ParamsT = TypeVar("ParamsT", bound=BaseModel)


@dataclass(frozen=True)
class ToolCall:
    """The model asks to call a tool; ``arguments`` is a mapping or the raw JSON text."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] | str


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    interrupted: bool = False
    data: Mapping[str, Any] | None = None  # structured input that came with a user message


@dataclass(frozen=True)
class ModelRequest:
    """Everything one generation sees."""

    agent_id: str
    instructions: str | None
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    answers_question: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    turn_id: str = ""  # the turn's id: an A2A messageId (falling back to the taskId)

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message ("" when there is none)."""
        return next((m.content for m in reversed(self.messages) if m.role == "user"), "")

    @property
    def tool_results(self) -> tuple[ChatMessage, ...]:
        """The ``tool`` messages after the latest user message."""
        out: list[ChatMessage] = []
        for message in reversed(self.messages):
            if message.role == "user":
                break
            if message.role == "tool":
                out.append(message)
        return tuple(reversed(out))


@dataclass(frozen=True)
class TextChunk:
    """A chunk of the reply text."""

    text: str


@dataclass(frozen=True)
class AskHuman:
    """Stop the turn and ask a person; the session's next input answers."""

    question: str


@dataclass(frozen=True)
class EmitArtifact:
    """An artifact of the turn."""

    artifact: ArtifactEmitted


@dataclass(frozen=True)
class Usage:
    """The tokens one generation used, as the provider reports them."""

    input_tokens: int
    output_tokens: int
    model: str | None = None  # the model that answered (the provider's response model)


ModelOutput = TextChunk | ToolCall | AskHuman | EmitArtifact | Usage


class ModelPlugin(ABC):
    """A model (see the module docstring for the rules)."""

    @abstractmethod
    def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        """One generation."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def validate_params(plugin: str, model: type[ParamsT], params: Mapping[str, Any]) -> ParamsT:
    """``params`` checked by ``model``; a :class:`PluginConfigError` names every bad field."""
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        raise params_error(plugin, exc) from None


def params_error(plugin: str, error: ValidationError, where: str = "params") -> PluginConfigError:
    """A :class:`PluginConfigError` naming each bad field, its value and the rule."""
    lines = []
    for item in error.errors(include_url=False):
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in item["loc"])
        path = f"{where}{loc}"
        if item["type"] == "extra_forbidden":
            lines.append(f"{path}: is not a known field")
        elif item["type"] == "missing":
            lines.append(f"{path}: is required")
        else:
            lines.append(f"{path}: {item['input']!r:.80}: {item['msg']}")
    return PluginConfigError(f"model {plugin!r}: " + "; ".join(lines))

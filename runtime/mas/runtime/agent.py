"""``Agent``: one hosted agent = its manifest + a model plugin + its delegation contract.

A turn: the model generates (chunks become :class:`TextDelta`); each tool call goes
through :meth:`DelegationContract.call` (a :class:`Delegated` event, then the result is fed
back to the model, which continues); a HITL question ends the turn ``input_required`` and
the session's next input is given to the model as the answer; artifacts become
:class:`ArtifactEmitted`. A model failure ends the turn ``failed`` with its message: ``run``
never raises for the turn's own failure.

State: the conversations live in a :class:`~mas.runtime.history.ConversationStore`; by
default a :class:`~mas.runtime.memory_history.MemoryConversationStore` (``max_history``
messages per session, oldest dropped; ``max_sessions`` sessions and a byte bound, least
recently used idle ones evicted), or the A2A endpoint's store
(:meth:`Agent.keep_history_in`): in memory with its ``a2a.task_store`` bounds, or in its
``sql`` database, so another replica or a restarted process continues the conversation.
Nothing of one session is visible to another. A turn's messages are stored before its
``TurnEnded`` is yielded: a caller that has the answer can send the follow-up anywhere.
An interrupted generation (steer, cancel) keeps its partial reply in history, marked
``interrupted``; a following ``replace`` steer drops it. A store that cannot be read or
written ends the turn ``failed`` with a message saying so.

Artifacts a delegate returned are passed on as this turn's artifacts, named
``<target>/<name>``.

Tokens: each :class:`~mas.runtime.models.base.Usage` the model yields, and each delegate's
reported totals, are counted by :mod:`mas.runtime.tokens` (metrics, the model span); the
turn's totals ride in its ``TurnEnded.metadata`` (``maslab.tokens``), and a used-up
``model.budget`` ends the turn ``failed`` with a message naming the budget, checked before
each model call and each delegation and as the turn ends.

Tool-server tools (a :class:`~mas.runtime.toolbox.Toolbox`, from ``spec.tools``) are offered
after the delegate tools; a call of one goes through the toolbox and is reported as a
:class:`Delegated` event of kind ``tool`` (``<server>/<tool>``), as is a notice that a
server's tools could not be offered this turn. Their artifacts (images, resources) are
named ``<server>/<name>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace

from mas.infra.model_choice import DEFAULT_MODEL, ModelChoice
from mas.infra.models import AgentManifest
from mas.runtime.boundary.control import STEER_METADATA_KEY
from mas.runtime.boundary.delegation import DelegationContract, ToolResult, ToolSpec
from mas.runtime.errors import HistoryError
from mas.runtime.history import DEFAULT_MAX_HISTORY, ConversationStore
from mas.runtime.memory_history import DEFAULT_MAX_SESSIONS, MemoryConversationStore
from mas.runtime.models.base import (
    AskHuman,
    ChatMessage,
    EmitArtifact,
    ModelPlugin,
    ModelRequest,
    TextChunk,
    ToolCall,
    Usage,
)
from mas.runtime.tokens import TokenLedger, TurnTokens
from mas.runtime.toolbox import Toolbox
from mas.runtime.turns import (
    CORRELATION_ID,
    DELEGATION_DEPTH,
    ArtifactEmitted,
    Delegated,
    TextDelta,
    TurnEnded,
    TurnEvent,
    TurnInput,
    TurnRunner,
    origin_metadata,
)
from mas.telemetry import tracing

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_HISTORY", "DEFAULT_MAX_SESSIONS", "DEFAULT_MAX_STEPS", "Agent"]

DEFAULT_MAX_STEPS = 16


@dataclass
class _TurnState:
    """What one turn adds to its session's history."""

    added: list[ChatMessage] = field(default_factory=list)
    generating: list[str] = field(default_factory=list)
    reply: list[str] = field(default_factory=list)


class Agent(TurnRunner):
    """Runs the turns of one agent (see the module docstring)."""

    def __init__(
        self,
        agent_id: str,
        manifest: AgentManifest,
        model: ModelPlugin,
        delegation: DelegationContract,
        *,
        max_history: int = DEFAULT_MAX_HISTORY,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_steps: int = DEFAULT_MAX_STEPS,
        history: ConversationStore | None = None,
        toolbox: Toolbox | None = None,
        choice: ModelChoice | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.manifest = manifest
        self.model = model
        self.delegation = delegation
        self.toolbox = toolbox
        self._max_steps = max_steps
        self._history = history or MemoryConversationStore(
            max_history=max_history, max_sessions=max_sessions
        )
        self._saving: dict[str, asyncio.Task[str | None]] = {}
        self.choice = choice or _inline_choice(manifest)
        label = self.choice.ref or self.choice.model or self.choice.plugin
        self.tokens = TokenLedger(agent_id, label, self.choice.budget)

    @property
    def conversations(self) -> ConversationStore:
        """Where this agent keeps its sessions' conversations."""
        return self._history

    def keep_history_in(self, store: ConversationStore) -> None:
        """Keep the conversations in ``store`` from now on; call it before the first turn
        (what the previous store holds is not carried over)."""
        self._history = store

    async def history(self, session_id: str) -> tuple[ChatMessage, ...]:
        """The session's conversation as the model sees it (empty for an unknown session)."""
        return (await self._history.peek(session_id)).messages

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        """The events of one turn, ending with one :class:`TurnEnded`."""
        session_id = turn.session_id
        pending = self._saving.get(session_id)
        if pending is not None:  # an interrupted turn's write still running: see it first
            await asyncio.wait({pending})
        try:
            conversation = await self._history.begin(
                session_id, drop_interrupted=turn.metadata.get(STEER_METADATA_KEY) == "replace"
            )
        except HistoryError as exc:
            logger.warning("agent %s: %s", self.agent_id, exc)
            yield TurnEnded("failed", message=f"agent {self.agent_id!r} {exc}")
            return
        question = conversation.question
        depth = _depth(turn.metadata.get(DELEGATION_DEPTH))
        correlation = str(turn.metadata.get(CORRELATION_ID) or turn.turn_id)
        state = _TurnState(added=[ChatMessage("user", turn.text, data=turn.data)])
        tokens = self.tokens.begin(session_id, turn.metadata)
        ended: TurnEnded | None = None
        asked: str | None = None
        try:
            offered: list[ToolSpec] = []
            if self.toolbox is not None:
                offered, notices = await self.toolbox.tools(session_id=turn.session_id)
                for line in notices:
                    yield Delegated("tools", "", False, line, kind="tool")
            for _step in range(self._max_steps):
                exhausted = tokens.exhausted()
                if exhausted is not None:
                    text = "".join(state.reply)
                    ended = TurnEnded("failed", text=text, message=tokens.stop(exhausted))
                    break
                request = ModelRequest(
                    self.agent_id,
                    self.manifest.spec.instructions,
                    (*conversation.messages, *state.added),
                    (*self.delegation.tools(), *offered),
                    question,
                    turn.metadata,
                    turn_id=turn.turn_id,
                )
                calls: list[ToolCall] = []
                ask: str | None = None
                try:
                    choice = self.choice
                    with tracing.model_span(self.agent_id, choice.plugin, choice.model) as span:
                        async for output in self.model.generate(request):
                            if isinstance(output, TextChunk):
                                if output.text:
                                    state.generating.append(output.text)
                                    yield TextDelta(output.text)
                            elif isinstance(output, ToolCall):
                                calls.append(output)
                            elif isinstance(output, AskHuman):
                                ask = output.question
                            elif isinstance(output, EmitArtifact):
                                yield output.artifact
                            elif isinstance(output, Usage):
                                tokens.add(output)
                                tracing.record_usage(
                                    span, output.input_tokens, output.output_tokens, output.model
                                )
                except Exception as exc:
                    logger.warning("agent %s: model failed: %s", self.agent_id, exc)
                    _close_generation(state)
                    ended = TurnEnded(
                        "failed",
                        text="".join(state.reply),
                        message=f"the model of agent {self.agent_id!r} failed: {exc}",
                    )
                    break
                _close_generation(state, calls if ask is None else None)
                if ask is not None:
                    state.added.append(ChatMessage("assistant", ask))
                    asked = ask
                    ended = TurnEnded("input_required", text=ask)
                    break
                if not calls:
                    ended = TurnEnded("completed", text="".join(state.reply))
                    break
                for call in calls:
                    exhausted = tokens.exhausted()
                    if exhausted is not None:  # no call, no delegation past a budget
                        _mark_interrupted(state)  # every call asked for gets an answer
                        text = "".join(state.reply)
                        ended = TurnEnded("failed", text=text, message=tokens.stop(exhausted))
                        break
                    tool = self.toolbox is not None and self.toolbox.server_of(call.name)
                    result = await self._call(
                        call, turn, correlation, depth, tool=bool(tool), tokens=tokens
                    )
                    tokens.absorb(result.metadata)
                    state.added.append(
                        ChatMessage("tool", result.text, tool_call_id=call.call_id, name=call.name)
                    )
                    where = result.target or call.name
                    yield Delegated(
                        f"{where}/{call.name}" if tool else where,
                        result.call_id,
                        result.ok,
                        result.text[:500],
                        kind="tool" if tool else "delegate",
                    )
                    for artifact in result.artifacts:
                        yield _forwarded(artifact, where)
                if ended is not None:
                    break
            else:
                ended = TurnEnded(
                    "failed",
                    text="".join(state.reply),
                    message=f"agent {self.agent_id!r} stopped after {self._max_steps} model "
                    "steps without a final answer",
                )
            trouble = await self._keep(session_id, state.added, asked)
        finally:
            if ended is None:  # interrupted (steer, cancel, shutdown): keep what it said
                _mark_interrupted(state)
                await self._keep(session_id, state.added, None)
        assert ended is not None  # every way out of the loop above sets it
        exhausted = tokens.exhausted(ending=True) if ended.status != "failed" else None
        if exhausted is not None:  # the last call passed a cap: the turn does not succeed
            ended = TurnEnded("failed", text=ended.text, message=tokens.stop(exhausted))
        if trouble is not None:
            ended = TurnEnded(
                "failed",
                text=ended.text,
                message=f"agent {self.agent_id!r} answered, but a follow-up would miss this "
                f"turn: {trouble}",
            )
        if tokens.by_model:
            ended = replace(ended, metadata={**ended.metadata, **tokens.metadata()})
        yield ended

    async def _keep(
        self, session_id: str, messages: Sequence[ChatMessage], question: str | None
    ) -> str | None:
        """Store one turn's messages; the reason when the store refused them.

        A store that does I/O is written in a task of its own: a steer or cancel arriving
        meanwhile never cuts the write in half, and the session's next turn waits for it
        (``run``).
        """
        if not self._history.suspends:
            return await self._write(session_id, messages, question)
        write = asyncio.ensure_future(self._write(session_id, messages, question))
        self._saving[session_id] = write
        write.add_done_callback(lambda done: self._forget_write(session_id, done))
        return await asyncio.shield(write)

    async def _write(
        self, session_id: str, messages: Sequence[ChatMessage], question: str | None
    ) -> str | None:
        try:
            await self._history.append(session_id, messages, question=question)
        except HistoryError as exc:
            logger.warning("agent %s: %s", self.agent_id, exc)
            return str(exc)
        return None

    def _forget_write(self, session_id: str, write: asyncio.Task[str | None]) -> None:
        if self._saving.get(session_id) is write:
            del self._saving[session_id]

    async def _call(
        self,
        call: ToolCall,
        turn: TurnInput,
        correlation: str,
        depth: int,
        *,
        tool: bool,
        tokens: TurnTokens,
    ) -> ToolResult:
        """One tool call: a tool-server tool through the toolbox, else a delegation."""
        if tool and self.toolbox is not None:
            return await self.toolbox.call(
                call.name, call.arguments, turn_id=turn.turn_id, session_id=turn.session_id
            )
        return await self.delegation.call(
            call.name,
            call.arguments,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            correlation_id=correlation,
            depth=depth,
            metadata={**tokens.delegation_metadata(), **origin_metadata(turn.metadata)},
        )


def _close_generation(state: _TurnState, calls: list[ToolCall] | None = None) -> None:
    """Move the generated text (and the tool calls asked for) into the turn's messages."""
    text = "".join(state.generating)
    state.generating.clear()
    state.reply.append(text)
    if text or calls:
        state.added.append(ChatMessage("assistant", text, tool_calls=tuple(calls or ())))


def _mark_interrupted(state: _TurnState) -> None:
    """Keep an interrupted turn's history well formed: the partial reply, and an answer
    for every tool call that got none (chat APIs reject a call without its result)."""
    answered = {m.tool_call_id for m in state.added if m.role == "tool"}
    for message in list(state.added):
        for call in message.tool_calls:
            if call.call_id not in answered:
                state.added.append(
                    ChatMessage(
                        "tool",
                        "interrupted before an answer",
                        tool_call_id=call.call_id,
                        name=call.name,
                        interrupted=True,
                    )
                )
    if state.generating:
        partial = "".join(state.generating)
        state.added.append(ChatMessage("assistant", partial, interrupted=True))


def _depth(value: object) -> int:
    try:
        depth = int(str(value)) if value is not None else 0
    except ValueError:
        return 0
    return max(depth, 0)


def _forwarded(artifact: ArtifactEmitted, target: str) -> ArtifactEmitted:
    """A delegate's artifact, passed on under a name that says where it came from."""
    return ArtifactEmitted(
        kind=artifact.kind,
        name=f"{target}/{artifact.name}",
        text=artifact.text,
        data=artifact.data,
        content=artifact.content,
        url=artifact.url,
        media_type=artifact.media_type,
    )


def _inline_choice(manifest: AgentManifest) -> ModelChoice:
    """The model choice of an agent built without its document (a plugin inline, or echo)."""
    selector = manifest.spec.model or DEFAULT_MODEL
    return ModelChoice(selector.type or "echo", dict(selector.params), budget=selector.budget)

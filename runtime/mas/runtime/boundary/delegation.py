"""``DelegationContract``: the LLM-visible ``delegate_to_<agent>`` tool surface of one agent.

Rules:

- One tool per ``delegates_to`` target, in that order, named ``delegate_to_<target>`` with
  ``-`` mapped to ``_`` (:meth:`DelegationContract.target_of` maps a name back). Parameters
  are a JSON schema usable for OpenAI function calling: ``message`` (string, required) and
  ``data`` (object, optional).
- :meth:`DelegationContract.call` turns one tool call into exactly one
  :meth:`AgentCommContract.send` on that target's route, or into none when it is refused.
  It never raises for a failed delegation: the model gets a :class:`ToolResult` with
  ``ok=False`` and a text saying what went wrong, and the turn goes on.
- Refused without a send: an unknown tool name, arguments that are not an object with a
  non-empty ``message`` string (``data`` must be an object when given), and a delegation
  deeper than ``max_depth`` (default 8): the caller's turn runs at ``depth``, the callee's
  at ``depth + 1``, so a cycle in the graph stops there.
- A :class:`~mas.runtime.errors.CommError` (peer down, slow past the endpoint timeout,
  garbage) becomes ``ok=False`` with the error's message, counted as ``unreachable``,
  ``timeout`` or ``protocol`` (``error`` for another comm's own subclass). A peer whose
  turn failed or was canceled is ``ok=False`` too; a peer asking for input is ``ok=True``
  with its question.
- The callee's session id is derived from (caller session, target) only, so repeated
  delegations from one session continue one peer session, and it never equals the caller's.
- Concurrency: ``call`` may run concurrently; it keeps no state besides the routes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mas.runtime import metrics
from mas.runtime.boundary.agentcomm import AgentCommContract, OutboundMessage
from mas.runtime.errors import CommError, PeerProtocolError, PeerTimeout, PeerUnavailable
from mas.runtime.turns import ArtifactEmitted
from mas.telemetry import tracing

logger = logging.getLogger(__name__)

DEFAULT_MAX_DEPTH = 8
# The outcome label of a failed send (maslab_delegation_calls_total), as the tool calls'.
_OUTCOMES: Mapping[type[CommError], str] = {
    PeerUnavailable: "unreachable",
    PeerTimeout: "timeout",
    PeerProtocolError: "protocol",
}
TOOL_PREFIX = "delegate_to_"

PARAMETERS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask the agent, in plain words."},
        "data": {"type": "object", "description": "Optional structured input for the agent."},
    },
    "required": ["message"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ToolSpec:
    """One tool offered to the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def as_openai(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gave back; ``text`` is what the model reads."""

    tool_name: str
    target: str | None
    call_id: str
    ok: bool
    text: str
    status: str | None = None
    artifacts: tuple[ArtifactEmitted, ...] = field(default=())
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the peer's (maslab.tokens)


def tool_name_for(target: str) -> str:
    """``delegate_to_<target>`` with ``-`` mapped to ``_``."""
    return TOOL_PREFIX + target.replace("-", "_")


def callee_session_id(caller_session: str, target: str) -> str:
    """The peer session continued by every delegation from ``caller_session`` to ``target``."""
    digest = hashlib.sha256(f"{caller_session}\0{target}".encode()).hexdigest()[:24]
    return f"{target}-{digest}"


class DelegationContract:
    """The delegate tools of agent ``source`` over its routes (see the module docstring)."""

    def __init__(
        self,
        source: str,
        comms: Mapping[str, AgentCommContract],
        *,
        descriptions: Mapping[str, str] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if max_depth < 1:
            raise ValueError(f"max_depth must be at least 1, got {max_depth!r}")
        self.source = source
        self.max_depth = max_depth
        self._comms = dict(comms)
        self._by_tool: dict[str, str] = {}
        for target in self._comms:
            name = tool_name_for(target)
            if name in self._by_tool:
                raise ValueError(
                    f"targets {self._by_tool[name]!r} and {target!r} of agent {source!r} map "
                    f"to the same tool name {name!r}"
                )
            self._by_tool[name] = target
        described = descriptions or {}
        self._tools = tuple(
            ToolSpec(
                tool_name_for(target),
                f"Delegate a task to the agent {target!r}"
                + (f": {described[target]}" if described.get(target) else "."),
                PARAMETERS_SCHEMA,
            )
            for target in self._comms
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """The delegation targets, in ``delegates_to`` order."""
        return tuple(self._comms)

    def tools(self) -> list[ToolSpec]:
        """One :class:`ToolSpec` per target."""
        return list(self._tools)

    def target_of(self, tool_name: str) -> str | None:
        """The target a tool name delegates to, or ``None``."""
        return self._by_tool.get(tool_name)

    async def call(
        self,
        tool_name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        session_id: str,
        turn_id: str,
        correlation_id: str,
        depth: int,
        metadata: Mapping[str, Any] | None = None,
    ) -> ToolResult:
        """Run one tool call: at most one send, never an exception for a failed delegation.

        ``metadata`` goes to the peer with the message (a session budget's chain use)."""
        call_id = f"{turn_id}.{uuid.uuid4().hex[:12]}"
        target = self.target_of(tool_name)
        if target is None:
            known = ", ".join(self._by_tool) or "(none)"
            return self._refused(
                tool_name,
                None,
                call_id,
                f"unknown tool {tool_name!r}; the tools of agent {self.source!r} are: {known}",
            )
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            return self._refused(tool_name, target, call_id, f"{tool_name}: {parsed}")
        message, data = parsed
        if depth + 1 > self.max_depth:
            return self._refused(
                tool_name,
                target,
                call_id,
                f"delegation refused: {self.source!r} -> {target!r} would run at depth "
                f"{depth + 1}, past the limit of {self.max_depth} (is there a cycle in "
                "delegates_to?)",
            )
        outbound = OutboundMessage(
            source=self.source,
            target=target,
            text=message,
            session_id=callee_session_id(session_id, target),
            call_id=call_id,
            correlation_id=correlation_id,
            depth=depth + 1,
            data=data,
            metadata=dict(metadata or {}),
        )
        try:
            with tracing.span(
                f"delegate {target}",
                kind="client",
                attributes=self._span_attributes(target, outbound, turn_id),
            ):
                reply = await self._comms[target].send(outbound)
        except CommError as exc:
            logger.warning("delegation %s -> %s failed: %s", self.source, target, exc)
            outcome = next((o for k, o in _OUTCOMES.items() if isinstance(exc, k)), "error")
            metrics.DELEGATIONS.labels(self.source, target, outcome).inc()
            return ToolResult(
                tool_name,
                target,
                call_id,
                False,
                f"delegation to {target!r} failed: {exc}",
                "error",
            )
        if reply.status in ("failed", "canceled"):
            metrics.DELEGATIONS.labels(self.source, target, "peer_failed").inc()
            return ToolResult(
                tool_name,
                target,
                call_id,
                False,
                f"agent {target!r} {reply.status}: {reply.text}",
                reply.status,
                reply.artifacts,
                reply.metadata,
            )
        metrics.DELEGATIONS.labels(self.source, target, "ok").inc()
        text = reply.text
        if reply.status == "input_required":
            text = f"agent {target!r} needs more input (delegate again to answer): {reply.text}"
        return ToolResult(
            tool_name, target, call_id, True, text, reply.status, reply.artifacts, reply.metadata
        )

    def _span_attributes(
        self, target: str, outbound: OutboundMessage, turn_id: str
    ) -> dict[str, object] | None:
        if not tracing.on():
            return None
        return {
            tracing.MAS_AGENT: self.source,
            tracing.MAS_TURN_ID: turn_id,
            "mas.delegation.target": target,
            "mas.delegation.comm": type(self._comms[target]).__name__,
            "mas.delegation.depth": outbound.depth,
            "mas.delegation.call_id": outbound.call_id,
            tracing.MAS_SESSION_ID: outbound.session_id,
        }

    def _refused(self, tool: str, target: str | None, call_id: str, why: str) -> ToolResult:
        metrics.DELEGATIONS.labels(self.source, target or "unknown", "refused").inc()
        return ToolResult(tool, target, call_id, False, why, "refused")

    async def aclose(self) -> None:
        """Close every route's comm."""
        for comm in self._comms.values():
            await comm.aclose()


def delegation_message(arguments: Mapping[str, Any] | str | None) -> str:
    """The ``message`` argument of a delegate tool call, as a mapping or as the JSON text a
    model sends (the openai model passes the text); ``""`` when there is none to read."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else None
        except json.JSONDecodeError:
            return ""
    message = arguments.get("message") if isinstance(arguments, Mapping) else None
    return message if isinstance(message, str) else ""


def arguments_object(
    arguments: Mapping[str, Any] | str | None, expected: str = "a JSON object"
) -> Mapping[str, Any] | str:
    """A tool call's arguments as an object (raw JSON text parsed), or why they are refused."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(arguments, Mapping):
        return f"arguments must be {expected}, got {arguments!r:.80}"
    return arguments


def _parse_arguments(
    arguments: Mapping[str, Any] | str | None,
) -> tuple[str, Mapping[str, Any] | None] | str:
    """``(message, data)``, or the reason the arguments are refused."""
    parsed = arguments_object(arguments, "a JSON object with a 'message' string")
    if isinstance(parsed, str):
        return parsed
    arguments = parsed
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        return f"argument 'message' must be a non-empty string, got {message!r:.80}"
    data = arguments.get("data")
    if data is not None and not isinstance(data, Mapping):
        return f"argument 'data' must be a JSON object when given, got {data!r:.80}"
    extra = sorted(set(arguments) - {"message", "data"})
    if extra:
        return f"unknown arguments {extra}; accepted: message, data"
    return message, data

"""The turn: what goes into one agent run and the events that come out of it.

Every layer speaks these types: the session mailbox queues :class:`TurnInput`, a
:class:`TurnRunner` (an agent) turns it into a stream of :data:`TurnEvent`, and ingress
adapters (the A2A executor, mas-ctl chat) map the events onto their protocol.

A stream ends with exactly one :class:`TurnEnded`. Everything before it is progress.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# Metadata keys carried in A2A message metadata (the spec's names).
CALLER_CALL_ID = "mas.caller_call_id"
CORRELATION_ID = "mas.correlation_id"
DELEGATION_DEPTH = "mas.delegation_depth"
# The principal that started a chain of delegations (a person's oidc:user:..., an a2a.auth
# scheme, a ServiceAccount), beside mas.correlation_id: see origin_principal().
ORIGIN_PRINCIPAL = "mas.origin_principal"
AGENT_SUBJECT_PREFIX = "system:serviceaccount:"


def origin_principal(claimed: object, principal: str) -> str:
    """The origin of a request that arrived as ``principal`` claiming ``claimed``.

    A claim is trusted only from a hop authenticated as an agent (its verified ServiceAccount
    subject, ``system:serviceaccount:NS:NAME``): agents relay the origin they were given. From
    anyone else (a person, an ``a2a.auth`` scheme, an anonymous caller: ``""``) the claim is
    dropped and the hop's own principal is the origin, so no caller can name someone else
    as the one who asked."""
    if principal.startswith(AGENT_SUBJECT_PREFIX) and isinstance(claimed, str) and claimed:
        return claimed
    return principal


def origin_metadata(turn_metadata: Mapping[str, Any]) -> dict[str, str]:
    """The metadata a delegation of a turn carries to name its origin (none if unknown)."""
    origin = turn_metadata.get(ORIGIN_PRINCIPAL)
    return {ORIGIN_PRINCIPAL: origin} if isinstance(origin, str) and origin else {}


@dataclass(frozen=True)
class TurnInput:
    """One input to a session: a user or peer message, or the answer to a HITL question."""

    session_id: str
    turn_id: str
    text: str
    data: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextDelta:
    """A streamed chunk of the reply text."""

    text: str


@dataclass(frozen=True)
class ArtifactEmitted:
    """An artifact of the turn: text, structured data, a file's bytes, or a URL."""

    kind: Literal["text", "data", "file", "url"]
    name: str
    text: str | None = None
    data: Mapping[str, Any] | None = None
    content: bytes | None = None
    url: str | None = None
    media_type: str | None = None
    artifact_id: str | None = None


@dataclass(frozen=True)
class Delegated:
    """Progress: the agent delegated to ``target`` (``ok`` false when the send failed).

    With ``kind`` ``tool`` it called a tool-server tool instead: ``target`` is
    ``<server>/<tool>`` (or the server alone for a notice that its tools are not offered).
    """

    target: str
    call_id: str
    ok: bool
    detail: str = ""
    kind: Literal["delegate", "tool"] = "delegate"


@dataclass(frozen=True)
class TurnEnded:
    """The last event of every turn."""

    status: Literal["completed", "input_required", "failed", "canceled"]
    text: str = ""
    message: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)  # for the task (maslab.tokens)


TurnEvent = TextDelta | ArtifactEmitted | Delegated | TurnEnded


class TurnRunner(ABC):
    """Runs turns of one agent.

    Rules: ``run`` yields progress events then exactly one :class:`TurnEnded`; it never
    raises for a failure of the turn itself (a model error ends the turn ``failed`` with a
    message). Two calls for one session are never concurrent (the mailbox guarantees it);
    calls for different sessions may be. A turn that ended ``input_required`` is resumed by
    the session's next input.
    """

    agent_id: str

    @abstractmethod
    def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        """The events of one turn."""

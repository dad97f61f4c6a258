"""One reading of a peer's A2A answer: the text a model reads and the artifacts passed on.

Every part of MAS Lab that reads what another agent answered (the delegation comm
:class:`~library_ioa.plugins.a2a.agent_comm.A2AAgentComm`, and the clients of ``mas-ctl``)
reads it here, so what the model receives and what a person sees agree, whichever
framework the peer is built on. A2A leaves to each agent where it puts its words; the
places are read in this order, the first that holds text wins:

1. a ``Message`` answer: the text of its parts (its data and file parts are artifacts);
2. a ``Task``: the message of its final status (where our own agents, and the protocol's
   examples, put the reply);
3. else the text parts of its artifacts, whatever their names (``result``,
   ``agent_response``, our ``response``...), several joined in order by a blank line; the
   artifacts' data, file and URL parts are still passed on;
4. else the last agent message of its history.

Artifacts passed on: every artifact of the task, except a text-only artifact whose text
is the reply (read in step 3, our own streamed ``response`` artifact, or one that repeats
the reply word for word): what the model reads is not handed to the user twice.

Strict where the protocol is: an answer without the fields the protocol requires (a task
without an id or a state, a message without parts) raises
:class:`~mas.runtime.errors.PeerProtocolError` naming the field and what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from a2a.types import Artifact, Message, Part, Role, Task, TaskState

from library_ioa.plugins.a2a.parts import artifact_from_a2a, struct_to_dict, text_of
from mas.runtime.boundary.agentcomm import CommReply
from mas.runtime.errors import PeerProtocolError
from mas.runtime.turns import ArtifactEmitted

RESPONSE_ARTIFACT = "response"  # our own agents stream their reply into this artifact
PARAGRAPH = "\n\n"  # between the texts of several artifacts

# The states a peer's turn ends in (for this send), as a CommReply status.
FINAL_STATUS = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input_required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "input_required",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
}


def check_task(task: Task, where: str) -> Task:
    """``task`` when it has what the protocol requires of any task; else a
    :class:`PeerProtocolError` naming the field (``where`` says which answer it came in)."""
    if not task.id:
        raise PeerProtocolError(f"{where}: task.id is missing (a task must have an id)")
    if task.status.state == TaskState.TASK_STATE_UNSPECIFIED:
        raise PeerProtocolError(
            f"{where}: task {task.id} has no status.state (accepted: one of the TaskState "
            "values, e.g. TASK_STATE_COMPLETED)"
        )
    return task


def reply_of_message(message: Message, where: str) -> CommReply:
    """A ``Message`` answer: its text, its other parts as artifacts."""
    if not message.parts:
        raise PeerProtocolError(f"{where}: message.parts is empty (a message needs a part)")
    name = f"message-{message.message_id or 'answer'}"
    return CommReply("completed", text_of(message.parts), _non_text(name, message.parts))


def reply_of_task(task: Task, where: str) -> CommReply:
    """A task whose turn has ended (its state is in :data:`FINAL_STATUS`), read in the
    module's order."""
    check_task(task, where)
    status = FINAL_STATUS.get(task.status.state)
    if status is None:
        raise PeerProtocolError(
            f"{where}: task {task.id} is still {TaskState.Name(task.status.state)}, "
            "not an ended turn"
        )
    text = text_of(task.status.message.parts) if task.status.HasField("message") else ""
    from_artifacts = False
    if not text:
        text = PARAGRAPH.join(t for t in (text_of(a.parts) for a in task.artifacts) if t)
        from_artifacts = bool(text)
    if not text:
        text = _last_agent_text(task.history)
    artifacts: list[ArtifactEmitted] = []
    for artifact in task.artifacts:
        artifacts.extend(_passed_on(artifact, text, from_artifacts))
    metadata = struct_to_dict(task.metadata) if task.HasField("metadata") else {}
    return CommReply(status, text, tuple(artifacts), task.id, metadata)  # type: ignore[arg-type]


def _passed_on(artifact: Artifact, reply: str, reply_is_artifacts: bool) -> list[ArtifactEmitted]:
    """What of one artifact goes to the user beside the reply (see the module docstring)."""
    text_only = all(part.WhichOneof("content") == "text" for part in artifact.parts)
    if text_only:
        text = text_of(artifact.parts)
        if reply_is_artifacts or artifact.name == RESPONSE_ARTIFACT or text == reply:
            return []
        return [artifact_from_a2a(artifact)]
    if reply_is_artifacts:  # its text is in the reply; its other parts are passed on
        return list(_non_text(artifact.name or artifact.artifact_id, artifact.parts))
    return [artifact_from_a2a(artifact)]


def _non_text(name: str, parts: Iterable[Part]) -> tuple[ArtifactEmitted, ...]:
    """One artifact per data, file or URL part, named ``name`` (``name-2``... after one)."""
    found = [part for part in parts if part.WhichOneof("content") != "text"]
    out = []
    for index, part in enumerate(found, start=1):
        label = name if index == 1 else f"{name}-{index}"
        out.append(artifact_from_a2a(Artifact(artifact_id=label, name=label, parts=[part])))
    return tuple(out)


def _last_agent_text(history: Iterable[Message]) -> str:
    for message in reversed(list(history)):
        if message.role == Role.ROLE_AGENT:
            text = text_of(message.parts)
            if text:
                return text
    return ""

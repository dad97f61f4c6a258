"""The MCP tools of a served agent: each call is one turn on the agent's session mailbox.

Tools (written against ``mcp`` 2.3):

- ``ask``: ``message`` (required) and ``session`` (optional). The turn is queued on the same
  :class:`~mas.ctl.session.mailbox.SessionTurnMailbox` as the agent's A2A door, so MCP and
  A2A callers share one ordering and one history per session: an MCP ``session`` is the
  A2A ``contextId`` of the same agent, and under ``a2a.auth`` it is the caller's own as a
  ``contextId`` is (``principals.owned_session``). Without ``session`` a new one is made;
  the result names it (``structuredContent.session``) so the caller can continue it.
- one tool per skill of the agent, named by the skill id (characters outside
  ``[A-Za-z0-9_.-]`` become ``_``; a skill whose name is taken is left to ``ask``), with
  the same arguments; the skill id travels in the turn's metadata (``mas.skill``).

While the turn streams, each text chunk and each delegation or tool call is a progress
notification (when the caller asked for progress). A cancelled request is mapped as A2A's
``tasks/cancel`` is: the caller stops waiting (``TurnTicket.cancel_wait``), and the
running turn finishes inside the mailbox, its effects kept.

The result: the turn's text as a text block, the turn's artifacts as image, resource or
link blocks, and ``structuredContent`` ``{session, status, text}``; ``failed`` and
``canceled`` turns are ``isError`` results with the message. A full mailbox is an
``isError`` result too.

An ``input_required`` turn (call again with the same session to answer) may say something
before it asks: its text is what it streamed (less what a ``replace`` steer withdrew), a
blank line, then the question (the question alone when nothing came before), and
``structuredContent`` adds ``question``. So the caller reads the same words an A2A client
gets from the task (the ``response`` artifact, then the status message).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from library_ioa.serving.principals import Principal, owned_session
from mas.infra.models import AgentManifest
from mas.runtime.errors import MailboxError
from mas.runtime.turns import (
    ArtifactEmitted,
    Delegated,
    TextDelta,
    TurnEnded,
    TurnInput,
)

logger = logging.getLogger(__name__)

ASK_TOOL = "ask"
SKILL_METADATA_KEY = "mas.skill"
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def tool_name_of_skill(skill_id: str) -> str:
    """The MCP tool name of a skill id."""
    return _NOT_NAME.sub("_", skill_id)[:128]


def add_agent_tools(
    server: MCPServer, agent_id: str, manifest: AgentManifest, mailbox: Any
) -> None:
    """Register ``ask`` and one tool per skill of the agent on ``server``."""
    description = manifest.spec.description or manifest.metadata.description or ""
    server.add_tool(
        _turn_tool(agent_id, mailbox, None),
        name=ASK_TOOL,
        description=f"Ask the agent {agent_id!r}" + (f": {description}" if description else "."),
    )
    taken = {ASK_TOOL}
    for skill in manifest.spec.skills:
        name = tool_name_of_skill(skill.id)
        if name in taken:
            logger.warning(
                "agent %s: skill %r has no MCP tool of its own (%r is taken)",
                agent_id,
                skill.id,
                name,
            )
            continue
        taken.add(name)
        what = skill.description or skill.name or skill.id
        server.add_tool(
            _turn_tool(agent_id, mailbox, skill.id),
            name=name,
            title=skill.name,
            description=f"The skill {skill.id!r} of agent {agent_id!r}: {what}",
        )


def _turn_tool(agent_id: str, mailbox: Any, skill: str | None) -> Callable[..., Any]:
    async def tool(message: str, ctx: Context, session: str | None = None) -> CallToolResult:
        """Run one turn of the agent (see the module docstring)."""
        return await run_turn(
            mailbox, agent_id=agent_id, message=message, session=session, skill=skill, ctx=ctx
        )

    return tool


async def run_turn(
    mailbox: Any,
    *,
    agent_id: str,
    message: str,
    session: str | None,
    skill: str | None,
    ctx: Context,
) -> CallToolResult:
    """One turn on the mailbox, progress while it streams, the result as MCP content."""
    session_id = session or f"mcp-{uuid.uuid4().hex[:16]}"
    metadata = {SKILL_METADATA_KEY: skill} if skill else {}
    owned = owned_session(caller_of(ctx), session_id)  # the caller's own, as a contextId is
    turn = TurnInput(owned, f"mcp-{uuid.uuid4().hex[:16]}", message, metadata=metadata)
    try:
        ticket = mailbox.submit(turn)
    except MailboxError as exc:
        return _error(session_id, "rejected", f"agent {agent_id!r} refused the turn: {exc}")
    ended = TurnEnded("canceled", message="the turn did not end")
    artifacts: list[ArtifactEmitted] = []
    streamed: list[str] = []
    step = 0
    try:
        async for event in ticket.events():
            if isinstance(event, TurnEnded):
                ended = event
            elif isinstance(event, ArtifactEmitted):
                artifacts.append(event)
            elif isinstance(event, TextDelta | Delegated):
                if isinstance(event, TextDelta):
                    streamed.append(event.text)
                step += 1
                await ctx.report_progress(step, None, _progress_text(event))
    except BaseException:
        ticket.cancel_wait()  # as tasks/cancel: stop waiting, the turn runs to its end
        raise
    before = "".join(streamed[getattr(ticket, "discarded", 0) :])
    return _result(session_id, ended, artifacts, before)


def caller_of(ctx: Context) -> str:
    """The principal ``HttpAuth`` put on the HTTP request of this call (``""``: none)."""
    scope = getattr(ctx.request_context.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user.user_name if isinstance(user, Principal) else ""


def _progress_text(event: TextDelta | Delegated) -> str:
    if isinstance(event, TextDelta):
        return event.text
    what = "tool" if event.kind == "tool" else "delegated to"
    return f"{what} {event.target}: {'ok' if event.ok else 'failed'}"


def _result(
    session: str, ended: TurnEnded, artifacts: list[ArtifactEmitted], before: str = ""
) -> CallToolResult:
    """The call's result; ``before``: the text an ``input_required`` turn streamed."""
    if ended.status in ("failed", "canceled"):
        return _error(session, ended.status, ended.message or ended.text or ended.status)
    text = ended.text
    structured: dict[str, Any] = {"session": session, "status": ended.status, "text": text}
    if ended.status == "input_required":
        text = _asked_text(before, ended.text)
        structured.update(text=text, question=ended.text)
    content: list[ContentBlock] = [TextContent(text=text)]
    content += [_block(a) for a in artifacts]
    return CallToolResult(content=content, structured_content=structured)


def _asked_text(before: str, question: str) -> str:
    """What an ``input_required`` turn said: the text before its question, then the question."""
    if not before.strip():
        return question
    return f"{before.rstrip()}\n\n{question}"


def _error(session: str, status: str, message: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=message)],
        structured_content={"session": session, "status": status, "text": message},
        is_error=True,
    )


def _block(artifact: ArtifactEmitted) -> ContentBlock:
    """One artifact as an MCP content block."""
    media = artifact.media_type
    if artifact.kind == "file" and artifact.content is not None:
        data = base64.b64encode(artifact.content).decode()
        if media and media.startswith("image/"):
            return ImageContent(data=data, mime_type=media)
        uri = f"artifact:///{artifact.name}"
        return EmbeddedResource(resource=BlobResourceContents(uri=uri, mime_type=media, blob=data))
    if artifact.kind == "url" and artifact.url is not None:
        return ResourceLink(name=artifact.name, uri=artifact.url, mime_type=media)
    if artifact.kind == "data" and artifact.data is not None:
        return TextContent(text=json.dumps(dict(artifact.data), default=str))
    return TextContent(text=artifact.text or "")

"""What the fast-path comparison tests share: two exposures of one scripted agent, one on
the fast path and one on the SDK's own (``fast_send=False``), and the helpers that post the
same bytes to both and compare the answers after :func:`normalised` replaces what is
generated per request (UUIDs, artifact suffixes, timestamps).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a_support import ScriptRunner, endpoint_for, free_port

from library_ioa.plugins.a2a.exposure import A2AExposure
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SUFFIX = re.compile(r"-[0-9a-f]{12}\b")


def normalised(value: Any) -> Any:
    """``value`` with generated ids and times replaced by placeholders."""
    if isinstance(value, dict):
        return {k: "<time>" if k == "timestamp" else normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    if isinstance(value, str):
        return _SUFFIX.sub("-<hex>", _UUID.sub("<uuid>", value))
    return value


MAILBOXES: list[SessionTurnMailbox] = []  # the latest exposure's mailbox is last
EXPOSURES: dict[str, A2AExposure] = {}  # by URL, while served


@contextlib.asynccontextmanager
async def exposure(
    fast: bool,
    message_grace: float = 5.0,
    runner: ScriptRunner | None = None,
    grpc: bool = False,
) -> AsyncIterator[str]:
    """Serve the scripted agent; its URL (``EXPOSURES[url]``: the exposure, while served)."""
    mailbox = SessionTurnMailbox(runner or ScriptRunner(), max_pending_per_session=1)
    MAILBOXES.append(mailbox)
    served = A2AExposure(
        agent_id="scripted",
        manifest=AgentManifest(),
        endpoint=endpoint_for(free_port(), free_port() if grpc else None),
        mailbox=mailbox,
        grpc=grpc,
        drain_timeout=2.0,
        message_grace=message_grace,
        fast_send=fast,
    )
    await served.start()
    EXPOSURES[served.url] = served
    try:
        yield served.url
    finally:
        del EXPOSURES[served.url]
        await served.aclose()
        await mailbox.aclose()


def body(
    text: str = "quick hello",
    *,
    method: str = "SendMessage",
    message: dict[str, Any] | None = None,
    **members: Any,
) -> bytes:
    if message is None:
        message = {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": text}]}
    data: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    data["params"] = {"message": message}
    data.update(members)
    return json.dumps(data).encode()


V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


async def both(
    http: httpx.AsyncClient,
    fast: str,
    sdk: str,
    content: bytes,
    *,
    headers: dict[str, str] | None = None,
    path: str = "/",
) -> tuple[int, Any]:
    """Post ``content`` to both; assert equal answers; return the fast one (normalised)."""
    headers = V1 if headers is None else headers
    answers = []
    for base in (fast, sdk):
        reply = await http.post(base + path, content=content, headers=headers)
        answers.append((reply.status_code, normalised(reply.json())))
    assert answers[0] == answers[1]
    return answers[0]

"""Answering an HTTP request with a JSON body straight from ASGI middleware.

The guards in front of the SDK's app (request limits, authentication, the protocol
corrections) answer some requests themselves, before the app sees them; each answer is
one JSON document with its ``Content-Length``, sent by :func:`send_json`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import Send


async def send_json(
    send: Send, status: int, payload: Any, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Send ``payload`` as the whole ``application/json`` response, with ``status`` and any
    extra ``headers``."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

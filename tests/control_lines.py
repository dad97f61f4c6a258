"""Talking to a real control endpoint line by line, for the control-endpoint tests."""

from __future__ import annotations

import asyncio
import contextlib

STEP = 10.0


async def exchange(address: str, *lines: bytes, within: float = STEP) -> list[bytes]:
    """Send each line on one connection; the reply lines (b'' once the server hung up)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    replies = []
    try:
        for line in lines:
            writer.write(line)
            await writer.drain()
            async with asyncio.timeout(within):
                replies.append(await reader.readline())
    except ConnectionError:
        replies.append(b"")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return replies

"""Fixtures of the conformance tests (the servers live in ``compliance_servers``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from compliance_servers import SdkAgent, sdk_agent


@pytest.fixture
async def conforming() -> AsyncIterator[SdkAgent]:
    """An a2a-sdk agent that passes every check (corrections mounted)."""
    async with sdk_agent() as agent:
        yield agent


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running after its fixtures are torn down."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    leaked: list[asyncio.Task[object]] = []
    for _ in range(20):
        leaked = [
            t
            for t in asyncio.all_tasks() - before
            if t is not current and not t.done() and not _library_singleton(t)
        ]
        if not leaked:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"leaked asyncio tasks: {[t.get_name() for t in leaked]}")

"""Fixtures of the bad-input tests: a real served echo agent on loopback, its log captured."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from bad_input_support import LIMIT, Agent, serve_echo


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    async with serve_echo(max_body_bytes=LIMIT) as served:
        yield served


@pytest.fixture
async def http(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=agent.url, timeout=10) as client:
        yield client


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at DEBUG; the test ends asserting none carries a traceback."""
    caplog.set_level(logging.DEBUG)
    yield caplog
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not tracebacks, [f"{r.name}: {r.getMessage()}" for r in tracebacks]


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running after its fixtures are torn down."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    leaked: list[asyncio.Task[Any]] = []
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

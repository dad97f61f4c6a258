"""Fixtures of the bad-input tests: a real served echo agent on loopback, its log captured."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

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

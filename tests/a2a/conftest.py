"""Fixtures of the A2A tests (the helpers live in ``a2a_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a_support import STEP, Served, serve_agent
from fast_path_support import exposure

from library_ioa.plugins.a2a.server.fast.stream import StreamRun


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with serve_agent(pushNotifications=True) as agent:
        yield agent


@pytest.fixture
async def pair() -> AsyncIterator[tuple[httpx.AsyncClient, str, str]]:
    """A fast-path exposure and an SDK-path one of the same agent, and a client."""
    async with (
        exposure(fast=True) as fast,
        exposure(fast=False) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        yield http, fast, sdk


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[StreamRun]:
    """Every StreamRun started: proof that the fast exposure took the fast path."""
    started: list[StreamRun] = []
    start = StreamRun.start

    def counted(run: StreamRun, requester: Any) -> None:
        started.append(run)
        start(run, requester)

    monkeypatch.setattr(StreamRun, "start", counted)
    return started

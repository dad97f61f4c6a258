"""Fixtures of the A2A tests (the helpers live in ``a2a_support``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from a2a_support import Served, serve_agent


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with serve_agent(pushNotifications=True) as agent:
        yield agent

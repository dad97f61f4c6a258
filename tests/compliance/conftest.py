"""Fixtures of the conformance tests (the servers live in ``compliance_servers``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from compliance_servers import SdkAgent, sdk_agent


@pytest.fixture
async def conforming() -> AsyncIterator[SdkAgent]:
    """An a2a-sdk agent that passes every check (corrections mounted)."""
    async with sdk_agent() as agent:
        yield agent

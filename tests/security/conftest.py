"""Fixtures of the security tests: task-leak guard and distinctive secret values."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from security_support import BEARER_REF, Secrets

from mas.infra.secrets import secret_env_name


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> Secrets:
    """Distinctive credentials, exported the way the operator exports Secret keys."""
    made = Secrets(
        token=f"tok-{secrets.token_hex(12)}",
        api_key=f"key-{secrets.token_hex(12)}",
    )
    monkeypatch.setenv(secret_env_name(BEARER_REF), made.token)
    monkeypatch.setenv("SEC_TEST_API_KEY", made.api_key)
    return made


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

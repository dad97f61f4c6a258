"""Suite-wide fixtures: a test that leaks an asyncio task fails (as kopf's own suite does)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.envtest.fixtures import control_plane, envtest_namespace  # noqa: F401
from tests.fast_path import FAST_PATH

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "examples"


def pytest_report_header() -> str:
    """Which A2A path the tests serve by default (tests/fast_path.py)."""
    return "A2A fast path: " + ("on" if FAST_PATH else "off (MAS_A2A_FAST_PATH=0)")


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running behind it (after a 2 s settle)."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2.0
    while True:
        leaked = [
            t
            for t in asyncio.all_tasks() - before
            if t is not current and not t.done() and not _library_singleton(t)
        ]
        if not leaked or loop.time() > deadline:
            break
        await asyncio.sleep(0.05)
    if leaked:
        for task in leaked:
            task.cancel()
        await asyncio.gather(*leaked, return_exceptions=True)
        pytest.fail(f"test leaked {len(leaked)} asyncio task(s): {[t.get_name() for t in leaked]}")

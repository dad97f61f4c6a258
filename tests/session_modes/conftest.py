"""Fixtures of the session-mode tests: a leaked-task check and a private control directory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.tmux_pane import tmux  # noqa: F401 (a fixture of the TUI test)


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running behind it."""
    before = set(asyncio.all_tasks())
    yield
    for _ in range(5):  # let finished tasks be reaped; a bounded number of loop turns
        await asyncio.sleep(0)
    leaked = [
        t
        for t in asyncio.all_tasks() - before
        if t is not asyncio.current_task() and not t.done() and not _library_singleton(t)
    ]
    for task in leaked:
        task.cancel()
    assert not leaked, f"tasks leaked by the test: {[t.get_name() for t in leaked]}"


@pytest.fixture
def control_dir(tmp_path: Path) -> Path:
    """A private control directory (MAS_CONTROL_DIR of the children), never the user's."""
    return tmp_path / "control"

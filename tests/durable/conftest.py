"""Fixtures of the durable-storage and fault tests: a real PostgreSQL server, fresh databases.

The server is Debian's PostgreSQL, started once per test session on a free 127.0.0.1 port.
Without the binaries the PostgreSQL tests are skipped with a message, unless
``MAS_REQUIRE_POSTGRES=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Iterator

import pytest
from pg_server import Postgres, binaries, running_postgres

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    bin_dir = binaries()
    if bin_dir is None:
        message = (
            "PostgreSQL is not installed (initdb/postgres not found; scripts/install-system-deps "
            "installs it)"
        )
        if os.environ.get("MAS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"MAS_REQUIRE_POSTGRES=1 but {message}")
        pytest.skip(message)
    with running_postgres(bin_dir) as server:
        yield server


@pytest.fixture
def pg_url(postgres: Postgres) -> str:
    """The asyncpg URL of a database of its own for this test."""
    name = f"t{os.getpid()}_{next(_names)}"
    postgres.create_database(name)
    return postgres.url(name)


def _library_singleton(task: asyncio.Task[object]) -> bool:
    """sse-starlette keeps one shutdown watcher per event loop; it is not ours to stop."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves an asyncio task running after its fixtures are torn down."""
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
        if not leaked:
            return
        if loop.time() > deadline:
            raise AssertionError(f"leaked asyncio tasks: {[t.get_name() for t in leaked]}")
        await asyncio.sleep(0.05)

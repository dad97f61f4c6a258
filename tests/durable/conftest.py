"""Fixtures of the durable-storage and fault tests: a real PostgreSQL server, fresh databases.

The server is Debian's PostgreSQL, started once per test session on a free 127.0.0.1 port.
Without the binaries the PostgreSQL tests are skipped with a message, unless
``MAS_REQUIRE_POSTGRES=1`` (CI), where they fail instead.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import Postgres, binaries, running_postgres

_names = itertools.count()


def _binaries() -> Path:
    bin_dir = binaries()
    if bin_dir is None:
        message = (
            "PostgreSQL is not installed (initdb/postgres not found; scripts/install-system-deps "
            "installs it)"
        )
        if os.environ.get("MAS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"MAS_REQUIRE_POSTGRES=1 but {message}")
        pytest.skip(message)
    return bin_dir


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    with running_postgres(_binaries()) as server:
        yield server


@pytest.fixture
def own_postgres() -> Iterator[Postgres]:
    """A server of this test's own, which it may stop and start (an outage)."""
    with running_postgres(_binaries()) as server:
        server.create_database("outage")
        yield server


@pytest.fixture
def pg_url(postgres: Postgres) -> str:
    """The asyncpg URL of a database of its own for this test."""
    name = f"t{os.getpid()}_{next(_names)}"
    postgres.create_database(name)
    return postgres.url(name)

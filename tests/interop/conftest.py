"""Fixtures of the interop tests: each peer served once per module, a private control
directory, and the runtime tests' leaked-task check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop.interop_peers import ALL, Peer, Served, serve_peer
from tests.runtime.conftest import control_dir, no_leaked_tasks

__all__ = ["control_dir", "no_leaked_tasks", "peer"]


@pytest.fixture(scope="module", params=ALL, ids=[p.name for p in ALL])
def peer(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """Each peer in turn, served for the whole module."""
    spec: Peer = request.param
    with serve_peer(spec, tmp_path_factory.mktemp(spec.name)) as served:
        yield served

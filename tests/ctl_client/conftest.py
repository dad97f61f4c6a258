"""Fixtures of the client tests: our agent served once per module (its cold start is the
slow part), with and without ``a2a.auth``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ctl_client_support import OurAgent, serve_desk
from tests.tmux_pane import tmux  # noqa: F401 (a fixture of the remote TUI test)


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OurAgent]:
    """The scripted desk, served by ``mas-ctl serve`` (JSON-RPC, HTTP+JSON, gRPC)."""
    with serve_desk(tmp_path_factory.mktemp("desk")) as agent:
        yield agent


@pytest.fixture(scope="module")
def guarded_desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OurAgent]:
    """The desk under ``a2a.auth``: a bearer token or an X-API-Key."""
    with serve_desk(tmp_path_factory.mktemp("guarded"), auth=True) as agent:
        yield agent

"""Which of the a2a-sdk's extras a document uses (``sdk_extras.extras_used``): pure, no
sockets. That ``mas-ctl serve`` then loads only those is ``tests/a2a/test_serve_extras.py``."""

from __future__ import annotations

from typing import Any

import pytest

from library_ioa.plugins.a2a.sdk_extras import Extras, extras_used
from mas.infra.wiring import wire

ECHO = {"model": {"type": "echo"}}


def document(
    endpoints: dict[str, Any], agents: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    agency = {
        "agents": {k: {"spec": v} for k, v in (agents or {"echo": ECHO}).items()},
        "entry": "echo",
    }
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "extras"},
        "spec": {"agency": agency, "endpoints": endpoints, **spec},
    }


def served(a2a: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"url": "http://127.0.0.1:8080", "usage": "deploy", "a2a": a2a or {}}


SQL = {"task_store": {"type": "sql", "url": "sqlite+aiosqlite:////tmp/tasks.db"}}
PEER = {"url": "http://peer.example:8080", "usage": "use"}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (document({"echo": served()}), Extras(grpc=False, sql=False)),
        (document({"echo": served({"grpc_port": 50051})}), Extras(grpc=True, sql=False)),
        (
            document({"echo": served({"grpc_url": "echo.example:50051"})}),
            Extras(grpc=True, sql=False),
        ),
        (document({"echo": served(SQL)}), Extras(grpc=False, sql=True)),
        (
            document(
                {"echo": served(), "peer": PEER}, {"echo": {**ECHO, "delegates_to": ["peer"]}}
            ),
            Extras(grpc=True, sql=False),
        ),
        (
            document({"echo": served()}, agent_comm={"type": "a2a"}),
            Extras(grpc=True, sql=False),
        ),
    ],
    ids=["plain", "grpc-port", "grpc-url", "sql-store", "remote-peer", "a2a-comm"],
)
def test_the_extras_a_document_uses(doc: dict[str, Any], expected: Extras) -> None:
    assert extras_used(wire(doc), ["echo"]) == expected


def test_another_agents_sql_store_does_not_count() -> None:
    doc = document(
        {"echo": served(), "other": {**served(SQL), "url": "http://127.0.0.1:8081"}},
        {"echo": ECHO, "other": ECHO},
    )
    assert extras_used(wire(doc), ["echo"]) == Extras(grpc=False, sql=False)
    assert extras_used(wire(doc), ["other"]) == Extras(grpc=False, sql=True)

"""A real ``mas-ctl serve`` loads an optional extra only when its document uses it.

gRPC for a gRPC port or an A2A peer, OpenTelemetry's SDK for tracing, MCP for an MCP door
or tool server, SQLAlchemy and the driver for a ``sql`` task store; never the TUI pieces
(``library_ioa.plugins.a2a.sdk_extras``, docs/performance.md, Agent pod footprint). Each
case runs the console script's entry point in a fresh interpreter (``PROBE`` of
``test_serve_imports``) and reads its ``sys.modules`` once ``/readyz`` answers 200 and the
server handles SIGTERM (every door bound).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from a2a_support import free_port
from tests.a2a.test_serve_imports import PROBE, run_probe
from tests.security.served_process import app_document

# PROBE, once /readyz answers, also waits until serve handles SIGTERM (it installs its
# handler after the ready line, once every door is bound), then reports and stops it.
READY_PROBE = PROBE.replace(
    "    import gc\n",
    "    while signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None) "
    "and time.monotonic() < deadline:\n"
    "        time.sleep(0.02)\n"
    "    import gc\n",
)
assert READY_PROBE != PROBE

pytestmark = pytest.mark.integration

# The extras, and what a pod never needs.
EXTRAS = ["grpc", "opentelemetry.sdk", "mcp", "sqlalchemy", "aiosqlite", "asyncpg"]
NEVER = ["curses", "rich", "pygments", "mas.ctl.session.tui_screen"]


def _plain(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    endpoint = {"usage": "deploy", "url": f"http://127.0.0.1:{port}"}
    return app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint}), {}


def _grpc(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    endpoint = {
        "usage": "deploy",
        "url": f"http://127.0.0.1:{port}",
        "a2a": {"grpc_port": free_port()},
    }
    return app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint}), {}


def _tracing(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    document, _ = _plain(port, tmp)
    # What the operator sets for spec.runtime.tracing; nothing listens there (export fails
    # quietly in the background, after the probe).
    return document, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}


def _mcp_door(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    endpoints = {
        "echo": {"usage": "deploy", "url": f"http://127.0.0.1:{port}"},
        "echo-mcp": {
            "protocol": "mcp",
            "agent": "echo",
            "usage": "deploy",
            "url": f"http://127.0.0.1:{free_port()}",
        },
    }
    return app_document({"echo": {"model": {"type": "echo"}}}, endpoints), {}


def _mcp_tools(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    # A tool server the agent may use; nothing listens there (tools are listed at a turn).
    endpoints = {
        "echo": {"usage": "deploy", "url": f"http://127.0.0.1:{port}"},
        "maths": {"protocol": "mcp", "usage": "use", "url": f"http://127.0.0.1:{free_port()}"},
    }
    agents = {"echo": {"model": {"type": "echo"}, "tools": [{"server": "maths"}]}}
    return app_document(agents, endpoints), {}


def _sql(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    endpoint = {
        "usage": "deploy",
        "url": f"http://127.0.0.1:{port}",
        "a2a": {"task_store": {"type": "sql", "url": f"sqlite+aiosqlite:///{tmp}/tasks.db"}},
    }
    return app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint}), {}


def _a2a_peer(port: int, tmp: Path) -> tuple[dict[str, Any], dict[str, str]]:
    endpoints = {
        "echo": {"usage": "deploy", "url": f"http://127.0.0.1:{port}"},
        "peer": {"usage": "use", "url": f"http://127.0.0.1:{free_port()}"},
    }
    agents = {"echo": {"model": {"type": "echo"}, "delegates_to": ["peer"]}}
    return app_document(agents, endpoints), {}


Case = Callable[[int, Path], tuple[dict[str, Any], dict[str, str]]]


def probe(tmp_path: Path, case: Case, watched: list[str]) -> list[str]:
    """Which of ``watched`` a real ``serve`` of ``case``'s document has loaded when ready."""
    port = free_port()
    document, extra_env = case(port, tmp_path)
    state = run_probe(tmp_path, port, document, watched, code=READY_PROBE, extra_env=extra_env)
    loaded: list[str] = state["loaded"]
    return loaded


def test_a_plain_agent_loads_no_extra_and_no_tui(tmp_path: Path) -> None:
    assert probe(tmp_path, _plain, EXTRAS + NEVER) == []


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (_grpc, ["grpc"]),
        (_tracing, ["opentelemetry.sdk"]),
        (_mcp_door, ["mcp"]),
        (_mcp_tools, ["mcp"]),
        (_sql, ["aiosqlite", "sqlalchemy"]),
        (_a2a_peer, ["grpc"]),  # A2AAgentComm speaks gRPC to a peer whose card offers it
    ],
    ids=["grpc-port", "tracing", "mcp-door", "mcp-tools", "sql-store", "a2a-peer"],
)
def test_each_extra_is_loaded_when_the_document_asks_for_it(
    tmp_path: Path, case: Case, expected: list[str]
) -> None:
    assert probe(tmp_path, case, EXTRAS) == expected

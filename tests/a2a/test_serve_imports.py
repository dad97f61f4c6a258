"""What a real ``mas-ctl serve`` has loaded once ``/readyz`` answers 200 (docs/performance.md,
cold start): nothing the served endpoint does not use, and the collector back on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a_support import free_port
from tests.security.served_process import app_document

pytestmark = pytest.mark.integration

START = 60.0  # a cold interpreter importing the SDK on a busy machine

# Runs the console script's entry point (mas.ctl.cli:run) in this interpreter; a thread
# waits for /readyz 200, prints what is loaded of WATCHED and the collector's state, and
# stops the server with SIGTERM.
PROBE = """
import json, os, signal, sys, threading, time, urllib.error, urllib.request
watched, url = json.loads(sys.argv[1]), sys.argv[2]
def report():
    deadline = time.monotonic() + {start}
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as reply:
                if reply.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.02)
    import gc
    loaded = sorted(m for m in watched if m in sys.modules)
    state = {{"loaded": loaded, "gc": gc.isenabled(), "frozen": gc.get_freeze_count()}}
    print("PROBE " + json.dumps(state), file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=report, daemon=True).start()
sys.argv = ["mas-ctl", *sys.argv[3:]]
from mas.ctl.cli import run
run()
"""

# Modules an echo agent served from a memory task store, without a control endpoint,
# MCP door or tracing, has no use for.
UNUSED = [
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.sqlite",
    "library_ioa.plugins.a2a.server.stores.sql_history",
    "mas.ctl.session.control",
    "mas.ctl.session.tui_screen",
    "mas.ctl.session.modes",
    "mas.ctl.conformance",
    "curses",
    "kubernetes",
    "kopf",
    "mcp",
    "opentelemetry.sdk",
]


def application(port: int, grpc_port: int) -> dict[str, Any]:
    endpoint = {
        "usage": "deploy",
        "url": f"http://127.0.0.1:{port}",
        "a2a": {"grpc_port": grpc_port, "capabilities": {"streaming": True}},
    }
    return app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint})


def run_probe(
    tmp_path: Path,
    port: int,
    document: dict[str, Any],
    watched: list[str],
    *,
    code: str = PROBE,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What ``code`` (``PROBE`` or a variant) reported of ``watched`` from a real ``serve`` of
    ``document``'s echo agent, listening on ``port``, in a fresh interpreter."""
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(document), encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("OTEL_") and key != "MAS_DEBUG"
    }
    env |= {"MAS_CONTROL_DIR": str(tmp_path / "control"), **(extra_env or {})}
    command = ["serve", "-f", str(app), "--agent", "echo", "--no-control"]
    readyz = f"http://127.0.0.1:{port}/readyz"
    done = subprocess.run(
        [sys.executable, "-c", code.format(start=START), json.dumps(watched), readyz, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=START + 30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("PROBE ")]
    assert len(lines) == 1, done.stderr
    assert "serving echo" in done.stdout
    return dict(json.loads(lines[0][len("PROBE ") :]))


def probe_serve(tmp_path: Path, watched: list[str]) -> dict[str, Any]:
    port = free_port()
    return run_probe(tmp_path, port, application(port, free_port()), watched)


def test_ready_serve_loaded_nothing_its_endpoint_does_not_use(tmp_path: Path) -> None:
    state = probe_serve(tmp_path, UNUSED)
    assert state["loaded"] == []


def test_ready_serve_runs_with_the_collector_on_and_its_start_up_frozen(
    tmp_path: Path,
) -> None:
    state = probe_serve(tmp_path, [])
    assert state["gc"] is True
    assert state["frozen"] > 10_000  # the modules, classes and descriptors loaded at start

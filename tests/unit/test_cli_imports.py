"""mas-ctl loads only what the command it runs needs (docs/performance.md, cold start)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration  # each test runs a fresh interpreter

EXAMPLE = str(EXAMPLES / "agency.yaml")

# Run in a fresh interpreter: which modules a command left in sys.modules, of these.
PROBE = """
import contextlib, io, json, sys
from mas.ctl.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
watched = {watched!r}
print(json.dumps({{"code": code, "loaded": sorted(m for m in watched if m in sys.modules)}}))
"""

SERVER_SIDE = [
    "a2a.server.request_handlers",
    "a2a.client",
    "grpc",
    "sqlalchemy",
    "starlette.applications",
    "uvicorn",
    "httpx",
    "curses",
    "kubernetes",
    "mas.ctl.session.tui_screen",
    "mas.ctl.conformance",
]


def loaded_by(argv: list[str], watched: list[str]) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(watched=watched), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    return int(result["code"]), list(result["loaded"])


def test_validate_loads_no_server_client_sql_or_tui_module() -> None:
    code, loaded = loaded_by(["validate", "-f", EXAMPLE], SERVER_SIDE)
    assert code == 0
    assert loaded == []


def test_routes_loads_no_server_module() -> None:
    code, loaded = loaded_by(["-v", "routes", "-f", EXAMPLE], SERVER_SIDE)
    assert code == 0
    assert loaded == []


def test_ask_of_a_url_never_loads_the_kubernetes_client() -> None:
    """Only an APP/AGENT target needs mas.ctl.cluster (and so the kubernetes client)."""
    watched = ["kubernetes", "mas.ctl.cluster", "mas.ctl.forwarding"]
    code, loaded = loaded_by(["ask", "http://127.0.0.1:9", "-m", "hi"], watched)
    assert code == 1  # nothing listens there
    assert loaded == []
    code, loaded = loaded_by(
        ["ask", "research-desk/concierge", "--kubeconfig", "/nonexistent", "-m", "hi"], watched
    )
    assert code == 1  # no such kubeconfig
    assert loaded == watched


def test_serve_help_loads_no_tui_or_probe_module() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from mas.ctl.cli import build_parser; build_parser(['serve']); "
            "print(sorted(m for m in ('curses', 'mas.ctl.session.tui_screen', "
            "'mas.ctl.conformance', 'mas.ctl.session.modes') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_top_level_help_still_lists_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    for command, help_text in [
        ("validate", "check an Application document"),
        ("serve", "serve one deployed agent over A2A"),
        ("run-mas", "run the whole agency in this process"),
        ("tui", "the chat on a curses screen"),
        ("conformance", "probe an agent's advertised A2A interfaces"),
    ]:
        assert command in done.stdout
        assert help_text in done.stdout


def test_an_unknown_command_still_names_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mas.ctl.cli", "valdate", "-f", EXAMPLE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice: 'valdate'" in done.stderr
    for command in ("'validate'", "'serve'", "'run-mas'", "'conformance'"):
        assert command in done.stderr
    assert "Traceback" not in done.stderr


# Loaded only when the endpoint asks for them: a database task store (the SQL dialects and
# the conversation table) or a control endpoint (without --no-control).
SERVE_ON_DEMAND = [
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.sqlite",
    "library_ioa.plugins.a2a.server.stores.sql_history",
    "mas.ctl.session.control",
    "kubernetes",
    "kopf",
    "curses",
    "mcp",
]


def test_serve_command_loads_no_sql_dialect_or_control_module() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from mas.ctl.cli import build_parser; build_parser(['serve']); "
            f"print(sorted(m for m in {SERVE_ON_DEMAND!r} if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


# In a fresh interpreter: the collector's state after each step, as JSON.
COLLECTOR = """
import gc, json, sys
from mas.ctl import collector
steps = []
def note(step):
    steps.append([step, gc.isenabled(), gc.get_freeze_count() > 0])
if sys.argv[1] == "paused":
    collector.pause(); note("pause")
    import mas.ctl.commands.validate
    collector.resume(); note("resume")
    collector.resume(); note("resume again")
elif sys.argv[1] == "off":
    gc.disable(); collector.pause(); collector.resume(); note("resume")
else:
    import contextlib, io
    from mas.ctl.cli import main
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(sys.argv[2:])
    note(f"main {code}")
print(json.dumps(steps))
"""


def collector_steps(*argv: str) -> list[list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_the_collector_paused_for_loading_comes_back_on_with_the_load_frozen() -> None:
    assert collector_steps("paused") == [
        ["pause", False, False],
        ["resume", True, True],
        ["resume again", True, True],
    ]


def test_resume_leaves_a_collector_turned_off_elsewhere_off() -> None:
    assert collector_steps("off") == [["resume", False, False]]


def test_main_in_process_leaves_the_collector_alone() -> None:
    assert collector_steps("main", "validate", "-f", EXAMPLE) == [["main 0", True, False]]


def test_ask_loads_the_client_only() -> None:
    """``ask`` (here against a closed port: exit 1) loads no server, store, TUI, YAML or
    Application model, and neither the SDK's client nor gRPC before it has read a card
    (benchmarks/ask_cold_start.py; tests/ctl_client/test_client_imports.py)."""
    watched = [m for m in SERVER_SIDE if m != "httpx"]
    watched += ["a2a.server", "yaml", "mas.infra.models", "mas.ctl.session.modes", "httpx._main"]
    code, loaded = loaded_by(["ask", "http://127.0.0.1:9", "-m", "hi"], watched)
    assert code == 1
    assert loaded == []

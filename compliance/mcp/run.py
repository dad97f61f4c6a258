"""Run the official MCP conformance framework against our MCP server and our MCP client.

    python -m compliance.mcp.run [--mode server|client|all] [--out compliance/out]
                                 [--scenario NAME]

The framework is the npm package ``@modelcontextprotocol/conformance``, pinned to
:data:`FRAMEWORK_VERSION` (the newest that runs on Node 20: later ones import Node 22's
``fs.globSync``); it is installed with ``npm`` into ``<out>/mcp/node`` on first use.

- ``server``: ``mas-ctl serve`` of ``compliance/mcp/application.yaml`` (agent ``subject``,
  its A2A endpoint and its MCP door moved to free loopback ports), then
  ``conformance server --url <door>/mcp --suite all``.
- ``client``: ``conformance client --command "python -m compliance.mcp.client"`` for every
  client scenario (the framework starts a test server per scenario and spawns our client
  with its url).

Reports land in ``<out>/mcp/<mode>/``: the framework's own result folders (``results/``) and
ours (``report.json``, ``report.md``). Exit status: 0 when the runs completed (failures are
reported, not fatal: compliance/README.md explains each), 2 for bad arguments, a framework
that cannot be installed or a server that did not come up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from compliance.mcp.report import build_report, write_reports

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HOST = "127.0.0.1"
FRAMEWORK = "@modelcontextprotocol/conformance"
FRAMEWORK_VERSION = "0.1.13"
START_DEADLINE_S = 60.0
CLIENT_SCENARIOS = (
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
)
CLIENT_SUITES = ("auth",)


def free_port() -> int:
    """A port the OS says is free on loopback."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def ensure_framework(out: Path) -> Path:
    """The framework's ``conformance`` command, installed with npm on first use."""
    prefix = out / "mcp" / "node"
    command = prefix / "node_modules" / ".bin" / "conformance"
    marker = prefix / f".installed-{FRAMEWORK_VERSION}"
    if command.exists() and marker.exists():
        return command
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("error: npm is not installed (Node 20 and npm are needed)")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            f"{FRAMEWORK}@{FRAMEWORK_VERSION}",
        ],
        check=False,
    )
    if done.returncode != 0 or not command.exists():
        raise SystemExit(f"error: npm could not install {FRAMEWORK}@{FRAMEWORK_VERSION}")
    marker.write_text(FRAMEWORK_VERSION + "\n")
    return command


@contextlib.contextmanager
def serving(log: Path) -> Iterator[str]:
    """``mas-ctl serve`` of the compliance Application; yields the MCP door's endpoint."""
    a2a, door = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "mas.ctl.cli",
        "serve",
        "-f",
        str(HERE / "application.yaml"),
        "--agent",
        "subject",
        "--no-control",
        "--override",
        f"infra:spec.endpoints.subject.url=http://{HOST}:{a2a}",
        "--override",
        f"infra:spec.endpoints.subject-mcp.url=http://{HOST}:{door}",
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
        try:
            deadline = time.monotonic() + START_DEADLINE_S
            while "serving subject:" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"error: mas-ctl serve did not come up; see {log}")
                time.sleep(0.2)
            yield f"http://{HOST}:{door}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def run_server(command: Path, out: Path, scenario: str | None) -> None:
    results = out / "results"
    shutil.rmtree(results, ignore_errors=True)
    with serving(out / "serve.log") as url:
        args = [str(command), "server", "--url", url, "-o", str(results)]
        args += ["--scenario", scenario] if scenario else ["--suite", "all"]
        subprocess.run(args, check=False, cwd=REPO)
    write_reports(build_report(results, "server", f"{FRAMEWORK}@{FRAMEWORK_VERSION}"), out)


def run_client(command: Path, out: Path, scenario: str | None) -> None:
    results = out / "results"
    shutil.rmtree(results, ignore_errors=True)
    client = f"{sys.executable} -m compliance.mcp.client"
    base = [str(command), "client", "--command", client, "--timeout", "20000", "-o", str(results)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = (
        [["--scenario", scenario]]
        if scenario
        else [
            *(["--scenario", name] for name in CLIENT_SCENARIOS),
            *(["--suite", suite] for suite in CLIENT_SUITES),
        ]
    )
    for extra in runs:
        subprocess.run([*base, *extra], check=False, cwd=REPO, env=env)
    write_reports(build_report(results, "client", f"{FRAMEWORK}@{FRAMEWORK_VERSION}"), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the MCP conformance framework")
    parser.add_argument("--mode", choices=("server", "client", "all"), default="all")
    parser.add_argument("--out", type=Path, default=REPO / "compliance" / "out")
    parser.add_argument("--scenario", default=None, help="run one scenario only")
    args = parser.parse_args(argv)
    command = ensure_framework(args.out)
    for mode in ("server", "client") if args.mode == "all" else (args.mode,):
        target = args.out / "mcp" / mode
        (run_server if mode == "server" else run_client)(command, target, args.scenario)
        print((target / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

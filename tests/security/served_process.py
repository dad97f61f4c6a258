"""A real ``mas-ctl -vv serve`` process on loopback, its log captured to a file.

Used by the security and bad-input tests that need what a user runs (the CLI, its logging
set-up, its exit code) or a server whose event loop is not the test's (the hypothesis fuzz).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tests.deadlines import COLD_START
from tests.fast_path import fast_path_document

START_DEADLINE = COLD_START


def app_document(
    agents: Mapping[str, Mapping[str, Any]],
    endpoints: Mapping[str, Any],
    *,
    entry: str | None = None,
) -> dict[str, Any]:
    """An Application with these agents (each value is its ``spec``) and endpoints (their
    ``a2a`` options through :func:`tests.fast_path.fast_path_options`)."""
    agency: dict[str, Any] = {"agents": {k: {"spec": dict(v)} for k, v in agents.items()}}
    agency["entry"] = entry or next(iter(agents))
    return fast_path_document(
        {
            "apiVersion": "infra.maslab.io/v1",
            "kind": "Application",
            "metadata": {"name": "sec-app"},
            "spec": {"agency": agency, "endpoints": dict(endpoints)},
        }
    )


@dataclass
class ServedProcess:
    """A running ``mas-ctl serve``: its process, ready line and log file."""

    process: subprocess.Popen[bytes]
    ready: str
    stdout: Path
    stderr: Path

    def log(self) -> str:
        """Everything the process logged so far (stderr)."""
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def output(self) -> str:
        """Everything the process printed so far (stdout)."""
        return self.stdout.read_text(encoding="utf-8", errors="replace")


@contextmanager
def serve_process(
    document: Mapping[str, Any],
    agent: str,
    tmp: Path,
    *extra: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServedProcess]:
    """Start ``mas-ctl -vv serve`` for ``agent``; wait (bounded) for its ready line."""
    path = tmp / f"{agent}.yaml"
    path.write_text(yaml.safe_dump(dict(document)), encoding="utf-8")
    stdout, stderr = tmp / f"{agent}.out", tmp / f"{agent}.err"
    full_env = {**os.environ, "MAS_CONTROL_DIR": str(tmp / "control"), **(env or {})}
    argv = [sys.executable, "-m", "mas.ctl.cli", "-vv", "serve", "-f", str(path)]
    argv += ["--agent", agent, *extra]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=full_env)
    served = ServedProcess(process, "", stdout, stderr)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not served.output().startswith("serving "):
            if process.poll() is not None:
                raise AssertionError(f"mas-ctl serve exited {process.returncode}:\n{served.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"mas-ctl serve did not get ready:\n{served.log()}")
            time.sleep(0.05)
        served.ready = served.output().splitlines()[0]
        yield served
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

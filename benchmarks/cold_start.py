"""Cold start of ``mas-ctl``: exec to ``/readyz`` 200 for ``serve``, exec to exit for ``validate``.

Measured in alternating runs against two floors in the same run:

- ``python``: ``python -c pass`` (the interpreter and ``site``, nothing of ours);
- ``sdk``: ``python -c "import ..."`` of the dependencies ``serve`` cannot start without
  (``SDK_IMPORTS``: the a2a-sdk server, gRPC, uvicorn, Starlette, pydantic, ...);
- ``validate``: ``mas-ctl validate -f app.yaml`` until it exits 0;
- ``serve``: ``mas-ctl serve -f app.yaml --agent echo --no-control`` until ``GET /readyz``
  answers 200 (polled every 5 ms on a fresh connection), then SIGTERM;
- with ``--baseline REV`` (a git revision, e.g. ``main``): ``validate@base`` and
  ``serve@base``, the same commands run from that revision's ``runtime/`` (extracted with
  ``git archive`` and put first on ``PYTHONPATH``; same interpreter, same dependencies).

Every command runs as ``python -m mas.ctl.cli`` from the same interpreter (the console script
adds nothing but its own import of ``mas.ctl.cli``). Printed: per run the wall time and
the process's CPU time (user + system: less sensitive to other load on the machine than
the wall time), then the medians and the ratios over both floors. ``--importtime`` also
runs each command once under ``-X importtime`` and prints the modules with the largest
cumulative import time::

    .venv/bin/python benchmarks/cold_start.py [--runs 7] [--importtime] [--baseline main]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from hot_path import application, free_port

START_TIMEOUT = 60.0


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "mas.ctl.cli", *argv]


@dataclass
class Sample:
    wall: float  # seconds from exec to the end (exit, or /readyz 200)
    cpu: float  # user + system seconds of the process until then


def time_exit(argv: list[str], env: dict[str, str]) -> Sample:
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    took = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{argv} exited {process.returncode}")
    return Sample(took, usage.ru_utime + usage.ru_stime)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def time_serve(
    app: Path, port: int, env: dict[str, str], flags: tuple[str, ...] = ()
) -> tuple[Sample, str]:
    """Exec to ``/readyz`` 200, and what the process wrote to stderr (``flags``: python's)."""
    url = f"http://127.0.0.1:{port}/readyz"
    argv = cli("serve", "-f", str(app), "--agent", "echo", "--no-control")
    argv[1:1] = flags
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while not ready(url):
                if process.poll() is not None:
                    stderr.seek(0)
                    raise SystemExit(f"serve exited {process.returncode}: {stderr.read()!r}")
                if time.perf_counter() - started > START_TIMEOUT:
                    raise SystemExit(f"serve was not ready within {START_TIMEOUT:.0f}s")
                time.sleep(0.005)
            took = Sample(time.perf_counter() - started, cpu_seconds(process.pid))
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        stderr.seek(0)
        return took, stderr.read().decode(errors="replace")


def importtime_rows(stderr: str, depth: int, top: int) -> list[tuple[int, str]]:
    """The ``top`` modules at nesting ``depth`` or less by cumulative import time (us)."""
    rows: list[tuple[int, str]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        level = (len(name) - len(name.lstrip()) - 1) // 2
        if level <= depth:
            rows.append((int(cumulative), "  " * level + name.strip()))
    return sorted(rows, reverse=True)[:top]


def package_shares(stderr: str, top: int) -> list[tuple[float, str]]:
    """The ``top`` top-level packages by their share of the summed import self time."""
    totals: dict[str, int] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, _, name = line[len("import time:") :].split("|")
        package = name.strip().split(".")[0]
        totals[package] = totals.get(package, 0) + int(own)
    whole = sum(totals.values()) or 1
    return sorted(((us / whole, p) for p, us in totals.items()), reverse=True)[:top]


# What ``serve`` cannot start without, from its dependencies alone: the SDK's server
# handlers and routes (which import its client, the 0.3 compat types and, because it is
# installed, SQLAlchemy), gRPC, uvicorn, Starlette, pydantic and the YAML loader.
SDK_IMPORTS = (
    "import a2a.server.request_handlers, a2a.server.routes, a2a.compat.v0_3.grpc_handler, "
    "grpc, uvicorn, starlette.applications, pydantic, yaml, prometheus_client"
)


def baseline_env(revision: str, into: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the ``runtime/`` of git ``revision`` first on ``PYTHONPATH``."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", revision, "runtime"],
        capture_output=True,
        check=True,
        timeout=START_TIMEOUT,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    path = [str(into / "runtime"), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def median(samples: list[Sample], kind: str) -> float:
    return statistics.median(getattr(s, kind) for s in samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="alternating runs (default 7)")
    parser.add_argument("--importtime", action="store_true", help="print the import profile")
    parser.add_argument("--top", type=int, default=30, help="modules shown by --importtime")
    parser.add_argument("--depth", type=int, default=1, help="nesting shown by --importtime")
    parser.add_argument(
        "--baseline", metavar="REV", help="also time validate and serve from git revision REV"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control")}
        port = free_port()
        app = Path(tmp) / "cold.yaml"
        app.write_text(yaml.safe_dump(application(port, free_port())))
        commands: dict[str, Callable[[], Sample]] = {
            "python": lambda: time_exit([sys.executable, "-c", "pass"], env),
            "sdk": lambda: time_exit([sys.executable, "-c", SDK_IMPORTS], env),
            "validate": lambda: time_exit(cli("validate", "-f", str(app)), env),
            "serve": lambda: time_serve(app, port, env)[0],
        }
        if args.baseline:
            base = baseline_env(args.baseline, Path(tmp) / "baseline", env)
            commands["validate@base"] = lambda: time_exit(cli("validate", "-f", str(app)), base)
            commands["serve@base"] = lambda: time_serve(app, port, base)[0]
        samples: dict[str, list[Sample]] = {name: [] for name in commands}
        for measure in commands.values():  # warm the page cache once
            measure()
        for index in range(args.runs):
            order = list(commands) if index % 2 == 0 else list(reversed(commands))
            for name in order:
                samples[name].append(commands[name]())
            print(
                f"run {index + 1}: "
                + ", ".join(
                    f"{n} {samples[n][-1].wall:.3f}s ({samples[n][-1].cpu:.2f} cpu)"
                    for n in commands
                ),
                flush=True,
            )
        print(f"\nmedians of {args.runs} runs (load average {os.getloadavg()[0]:.1f})")
        print(f"{'':>13} {'wall s':>7} {'cpu s':>6} {'/python':>8} {'/sdk':>6}")
        floor = {kind: {n: median(samples[n], kind) for n in commands} for kind in ("wall", "cpu")}
        for name in commands:
            wall, cpu = floor["wall"][name], floor["cpu"][name]
            print(
                f"{name:>13} {wall:7.3f} {cpu:6.2f} {wall / floor['wall']['python']:7.1f}x "
                f"{wall / floor['wall']['sdk']:5.2f}x"
            )
        for name in ("validate", "serve") if args.baseline else ():
            wall, cpu = (floor[k][name] / floor[k][f"{name}@base"] for k in ("wall", "cpu"))
            print(f"{name} / {name}@base: wall {wall:.2f}x, cpu {cpu:.2f}x")
        if args.importtime:
            done = subprocess.run(
                [sys.executable, "-X", "importtime", *cli("validate", "-f", str(app))[1:]],
                env=env,
                capture_output=True,
                timeout=START_TIMEOUT,
                check=True,
            )
            profiles = {
                "validate": done.stderr.decode(),
                "serve (to /readyz)": time_serve(app, port, env, ("-X", "importtime"))[1],
            }
            if args.baseline:
                profiles["serve@base (to /readyz)"] = time_serve(
                    app, port, base, ("-X", "importtime")
                )[1]
            for label, stderr in profiles.items():
                print(f"\n-X importtime, mas-ctl {label}: cumulative ms")
                for micros, name in importtime_rows(stderr, args.depth, args.top):
                    print(f"{micros / 1000:9.1f} ms  {name}")
                print(f"share of the import self time, by top-level package ({label})")
                for share, package in package_shares(stderr, args.top // 2):
                    print(f"{100 * share:8.1f} %  {package}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

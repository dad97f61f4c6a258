"""Cold start of ``mas-ctl ask``: exec to the first token of the answer, against ``mas-ctl
validate``'s exec to exit, alternating in the same run.

One ``mas-ctl serve`` of an echo agent (its card declares streaming) runs for the whole
benchmark; then, ``--runs`` times each, alternating:

- ``validate``: ``mas-ctl validate -f examples/agency.yaml`` until it exits 0;
- ``ask``: ``mas-ctl ask URL -m hi`` until the first byte of the answer reaches its stdout
  (the card fetched, the transport chosen, the message sent, the first chunk streamed back);
- ``sdk-client``: a ``python -c`` that loads the official a2a-sdk client as ``ask`` does
  (``sdk_extras.load_client``: without httpx's command line, and without gRPC unless the
  transport is gRPC), to exit, the cyclic collector paused as ``mas-ctl`` pauses it while
  it loads its command: the floor ``ask`` cannot go below while it uses that client.

Both run as ``python -m mas.ctl.cli`` from the same interpreter. Printed: per run the wall
times, then the medians and the ratios ask/validate (the goal: at most 1.5) and
sdk-client/validate, plus each
command's CPU time (user + system, to its exit), which other load on the machine disturbs
less than wall time::

    .venv/bin/python benchmarks/ask_cold_start.py [--runs 7] [--transport jsonrpc|rest|grpc]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml
from hot_path import application, free_port

START_TIMEOUT = 60.0
GOAL = 1.5
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agency.yaml"


def cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "mas.ctl.cli", *argv]


@dataclass
class Sample:
    wall: float  # seconds from exec to the event timed (exit, or the first byte of the answer)
    cpu: float  # user + system seconds of the process, to its exit


def time_exit(argv: list[str], env: dict[str, str]) -> Sample:
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    took = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return Sample(took, usage.ru_utime + usage.ru_stime)


def time_validate(env: dict[str, str]) -> Sample:
    return time_exit(cli("validate", "-f", str(EXAMPLE)), env)


def time_sdk_client(grpc: bool, env: dict[str, str]) -> Sample:
    # with the cyclic collector paused during the import, as mas-ctl loads its command
    floor = (
        "import gc; gc.disable(); from library_ioa.plugins.a2a.sdk_extras import load_client; "
        f"load_client(grpc={grpc})"
    )
    return time_exit([sys.executable, "-c", floor], env)


def time_ask(url: str, transport: str | None, env: dict[str, str]) -> Sample:
    argv = cli("ask", url, "-m", "hi", *(("--transport", transport) if transport else ()))
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    first = time.perf_counter() - started
    if not readable or not os.read(process.stdout.fileno(), 1):
        process.kill()
        raise SystemExit(f"mas-ctl ask printed nothing within {START_TIMEOUT:.0f}s")
    process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("mas-ctl ask failed")
    return Sample(first, usage.ru_utime + usage.ru_stime)


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def serve(app: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        cli("serve", "-f", str(app), "--agent", "echo", "--no-control"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while not ready(f"http://127.0.0.1:{port}/readyz"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit("mas-ctl serve did not get ready")
        time.sleep(0.05)
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--transport", choices=("jsonrpc", "rest", "grpc"), default=None)
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the first, untimed runs write the caches
    env.pop("MAS_DEBUG", None)
    with tempfile.TemporaryDirectory() as tmp:
        port, grpc_port = free_port(), free_port()
        app = Path(tmp) / "echo.yaml"
        app.write_text(yaml.safe_dump(application(port, grpc_port)))
        server = serve(app, port, env)
        try:
            url = f"http://127.0.0.1:{port}"
            time_ask(url, args.transport, env)  # warm the bytecode caches of both, untimed
            time_validate(env)
            asks: list[Sample] = []
            validates: list[Sample] = []
            floors: list[Sample] = []
            for run in range(1, args.runs + 1):
                validates.append(time_validate(env))
                asks.append(time_ask(url, args.transport, env))
                floors.append(time_sdk_client(args.transport == "grpc", env))
                print(
                    f"run {run}: validate {validates[-1].wall * 1000:7.0f} ms   "
                    f"ask to first token {asks[-1].wall * 1000:7.0f} ms   "
                    f"SDK client {floors[-1].wall * 1000:7.0f} ms"
                )
        finally:
            server.terminate()
            server.wait()
    ask_wall = statistics.median(s.wall for s in asks)
    validate_wall = statistics.median(s.wall for s in validates)
    ask_cpu = statistics.median(s.cpu for s in asks)
    validate_cpu = statistics.median(s.cpu for s in validates)
    floor_wall = statistics.median(s.wall for s in floors)
    ratio = ask_wall / validate_wall
    print(
        f"median wall: validate {validate_wall * 1000:.0f} ms, ask {ask_wall * 1000:.0f} ms, "
        f"SDK client {floor_wall * 1000:.0f} ms"
    )
    print(f"median CPU:  validate {validate_cpu * 1000:.0f} ms, ask {ask_cpu * 1000:.0f} ms")
    verdict = "within" if ratio <= GOAL else "OVER"
    print(f"ratio ask/validate (wall): {ratio:.2f} ({verdict} the goal of {GOAL})")
    print(f"ratio ask/validate (CPU):  {ask_cpu / validate_cpu:.2f}")
    floor = floor_wall / validate_wall
    print(f"ratio SDK client/validate (wall, the floor of ask): {floor:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

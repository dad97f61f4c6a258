"""What tracing costs on the hot path: ``mas-ctl serve`` (echo) untraced, traced at 100%, at 1%.

Three ``mas-ctl serve`` processes run on 127.0.0.1 in the same run, the same Application:

- ``off``: no ``OTEL_*`` variable (the default; tracing is off);
- ``on-100``: ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, ``parentbased_always_on``: every request
  is a trace (request, SDK and turn spans) exported over OTLP/HTTP;
- ``on-1``: the same with ``parentbased_traceidratio`` at 0.01.

The spans go to a real Jaeger when ``scripts/build-jaeger`` has built one, else to a small
OTLP/HTTP sink in its own process that answers every export with 200. JSON-RPC
``SendMessage`` (blocking, a new ``messageId`` per request, no ``traceparent``: the server
decides) is driven by ``wrk`` over 32 keep-alive connections, the servers alternating round
after round; printed: requests/s, p50 and p99, the server's CPU time per request (from
``/proc/<pid>/stat``, which a busy shared machine disturbs far less than throughput), and
each traced server's ratios to ``off``.

Usage::

    python benchmarks/tracing_overhead.py [--duration 10] [--rounds 3]

``wrk`` as for ``hot_path.py``. The exit code is 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hot_path import (
    CONNECTIONS,
    LUA,
    Run,
    Series,
    ensure_wrk,
    free_port,
    run_wrk,
    start_echo,
    stop,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.tracing.jaeger import Jaeger, jaeger_binary  # noqa: E402

SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink)
print("ready", flush=True)
server.serve_forever()
"""

SAMPLERS = {
    "off": None,
    "on-100": ("parentbased_always_on", None),
    "on-1": ("parentbased_traceidratio", "0.01"),
}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def traced_env(base: dict[str, str], endpoint: str, sampler: tuple[str, str | None] | None):
    env = {k: v for k, v in base.items() if not k.startswith("OTEL_")}
    if sampler is None:
        return env
    env |= {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_SAMPLER": sampler[0]}
    if sampler[1] is not None:
        env["OTEL_TRACES_SAMPLER_ARG"] = sampler[1]
    return env


async def collector(tmp: Path) -> tuple[str, object]:
    """Jaeger when it is built, else the sink; returns its endpoint and a stop handle."""
    binary = jaeger_binary()
    if binary.is_file():
        jaeger = Jaeger.start(binary, tmp)
        print(f"collector: Jaeger ({binary})")
        return jaeger.otlp_endpoint, jaeger
    port = free_port()
    sink = subprocess.Popen(
        [sys.executable, "-c", SINK, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
    print("collector: an OTLP/HTTP sink (no Jaeger built)")
    return f"http://127.0.0.1:{port}", sink


def shutdown(handle: object) -> None:
    if isinstance(handle, Jaeger):
        handle.stop()
    elif isinstance(handle, subprocess.Popen):
        handle.terminate()
        handle.wait(10)


async def main(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "send.lua"
        script.write_text(LUA)
        endpoint, handle = await collector(Path(tmp))
        base = {
            **os.environ,
            "MAS_CONTROL_DIR": str(Path(tmp) / "control"),
            "PYTHONUNBUFFERED": "1",
        }
        servers = {}
        try:
            for name, sampler in SAMPLERS.items():
                env = traced_env(base, endpoint, sampler)
                servers[name] = await start_echo(name, Path(tmp), env)
            names = list(SAMPLERS)
            for name in names:  # warm up
                await run_wrk(wrk, script, servers[name].url, 2)
            series = Series()
            cpu: dict[str, list[float]] = {name: [] for name in names}  # CPU ms per request
            for round_ in range(args.rounds):
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in order:
                    pid = servers[name].process.pid
                    before = cpu_seconds(pid)
                    run = await run_wrk(wrk, script, servers[name].url, args.duration)
                    requests = run.rate * args.duration
                    if requests:
                        cpu[name].append((cpu_seconds(pid) - before) * 1000 / requests)
                    series.add(name, run)
            base_run, base_cpu = series.median("off"), statistics.median(cpu["off"])
            print(f"JSON-RPC SendMessage, wrk, {CONNECTIONS} connections, {args.rounds} rounds")
            print(
                f"{'':>8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'ratio':>6} "
                f"{'CPU ms/req':>10} {'ratio':>6} errors"
            )
            errors = 0
            for name in names:
                median: Run = series.median(name)
                per_request = statistics.median(cpu[name])
                errors += median.errors
                print(
                    f"{name:>8} {median.rate:>9.0f} {median.p50:>8.2f} {median.p99:>8.2f} "
                    f"{median.rate / base_run.rate:>6.2f} {per_request:>10.3f} "
                    f"{per_request / base_cpu:>6.2f} {median.errors}"
                )
            return 1 if errors else 0
        finally:
            for server in servers.values():
                await stop(server)
            shutdown(handle)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

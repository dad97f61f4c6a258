"""The runtime hot path: ``mas-ctl serve`` (echo) against a bare a2a-sdk server and raw uvicorn.

Three servers run as subprocesses on 127.0.0.1 in the same run (see ``baselines.py``):

- ``raw``: the floors (``floors.py``): uvicorn answering a fixed JSON-RPC result or 20
  canned SSE frames, and a bare ``grpc.aio`` servicer answering a fixed response;
- ``bare``: the smallest a2a-sdk 1.3 echo agent (``DefaultRequestHandler``,
  ``InMemoryTaskStore``, the SDK's route factories and ``GrpcHandler``) on uvicorn with its
  default settings;
- ``serve``: ``mas-ctl serve`` with the echo model (JSON-RPC, HTTP+JSON, gRPC).

Measured, alternating the servers round after round so machine noise hits all alike
(each run also prints the server's CPU time per request or event, from ``/proc``, which
the machine's other load disturbs less than throughput):

1. memory: the RSS of ``serve`` idle (before any request) and after 1,000 sessions (one
   blocking send each on its own ``contextId``; sessions keep their history), the bare
   server likewise;
2. JSON-RPC ``SendMessage`` (blocking, protocol 1.0, ``A2A-Version: 1.0``, a new
   ``messageId`` per request) with ``wrk`` over 32 keep-alive connections: requests/s,
   p50 and p99 latency, and the ratios to the bare server and to the raw floor;
3. SSE: ``SendStreamingMessage`` with a 16-word text (the task, ``working``, one artifact
   chunk per word, the closing chunk, ``completed``: 20 events per stream) from ``wrk``
   over 16 keep-alive connections, each stream checked for its 20 frames and no error:
   events/s and per-stream p50/p99 (``--sse-client httpx``: the bounded httpx client
   instead, which saturates a core by itself at about 3,000 events/s on this machine);
4. gRPC ``SendMessage`` from a bounded ``grpc.aio`` client, 32 concurrent calls.

Usage::

    python benchmarks/hot_path.py [--duration 10] [--rounds 3] [--skip-sse] [--skip-grpc]
                                  [--sse-client wrk|httpx] [--bare-gc-freeze]
                                  [--compare CHECKOUT]

``--compare`` adds a fourth server, ``before``: ``mas-ctl serve`` run from another
checkout's ``runtime/`` (first on ``PYTHONPATH``), so a change is measured against the
code before it in the same alternating rounds.

``wrk`` is the Debian package; when it is missing the script installs it with
``apt-get install -y wrk`` if it runs as root, and otherwise says how. Everything is bounded
in count and in time; the exit code is 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 60.0
CONNECTIONS = 32
SSE_TEXT = " ".join(f"word{i}" for i in range(16))
SSE_EVENTS = 20
SSE_STREAMS = 16

LUA = """
local counter = 0
local tid = 0
function setup(thread)
  thread:set("tid", tid)
  tid = tid + 1
end
function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["A2A-Version"] = "1.0"
end
function request()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"SendMessage","params":'
    .. '{"message":{"role":"ROLE_USER","messageId":"m-' .. tid .. '-' .. counter
    .. '","parts":[{"text":"hello from the benchmark"}]}}}'
  return wrk.format(nil, nil, nil, body)
end
"""

# SSE with wrk: a SendStreamingMessage per request; a stream that is not 200 with exactly
# SSE_EVENTS "data:" frames and no error is counted as bad (printed by done()).
SSE_LUA = """
local counter = 0
local tid = 0
local threads = {}
function setup(thread)
  thread:set("tid", tid)
  tid = tid + 1
  table.insert(threads, thread)
end
function init(args)
  bad = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["A2A-Version"] = "1.0"
end
function request()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"SendStreamingMessage",'
    .. '"params":{"message":{"role":"ROLE_USER","messageId":"s-' .. tid .. '-' .. counter
    .. '","parts":[{"text":"TEXT"}]}}}'
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  local frames = 0
  for _ in string.gmatch(body, "data: {") do frames = frames + 1 end
  if status ~= 200 or frames ~= EVENTS or string.find(body, '"error"', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do total = total + thread:get("bad") end
  io.write(string.format("Bad streams: %d\\n", total))
end
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=True)
        found = shutil.which("wrk")
        if found:
            return found
    raise SystemExit(
        "wrk is not installed: run 'sudo apt-get install -y wrk' (Debian/Ubuntu) "
        "or scripts/install-system-deps, then run this again"
    )


@dataclass
class Server:
    name: str
    http_port: int
    grpc_port: int | None
    process: asyncio.subprocess.Process

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/"

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


async def start(
    name: str, argv: list[str], env: dict[str, str], ready: str, **ports: int | None
) -> Server:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env
    )
    assert process.stdout is not None
    async with asyncio.timeout(START_TIMEOUT):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise SystemExit(f"{name} exited before it was ready")
            if line.startswith(ready):
                break
    http_port = ports["http_port"]
    assert http_port is not None
    return Server(name, http_port, ports.get("grpc_port"), process)


async def stop(server: Server) -> None:
    process = server.process
    if process.returncode is None:
        process.terminate()
        try:
            async with asyncio.timeout(15):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()


def application(port: int, grpc_port: int, **a2a: object) -> dict[str, object]:
    """One echo agent on 127.0.0.1; ``a2a``: more of its endpoint's ``a2a`` options."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "bench"},
        "spec": {
            "agency": {"agents": {"echo": {"spec": {"model": {"type": "echo"}}}}},
            "endpoints": {
                "echo": {
                    "url": f"http://127.0.0.1:{port}",
                    "usage": "deploy",
                    "a2a": {"grpc_port": grpc_port, "capabilities": {"streaming": True}, **a2a},
                }
            },
        },
    }


async def start_echo(name: str, folder: Path, env: dict[str, str], **a2a: object) -> Server:
    """``mas-ctl serve`` of :func:`application`'s echo agent on two free ports (HTTP, gRPC),
    its document written to ``folder/<name>.yaml``; ready once it prints ``serving echo``."""
    http_port, grpc_port = free_port(), free_port()
    app = folder / f"{name}.yaml"
    app.write_text(yaml.safe_dump(application(http_port, grpc_port, **a2a)))
    argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app)]
    argv += ["--agent", "echo", "--no-control"]
    return await start(name, argv, env, "serving echo", http_port=http_port, grpc_port=grpc_port)


# -- results ------------------------------------------------------------------------


@dataclass
class Run:
    rate: float  # requests (or events) per second
    p50: float  # ms
    p99: float  # ms
    errors: int
    cpu_ms: float = float("nan")  # the server's CPU ms per request (or event)


@dataclass
class Series:
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, name: str, run: Run) -> None:
        self.runs.setdefault(name, []).append(run)

    def median(self, name: str) -> Run:
        runs = self.runs[name]
        return Run(
            statistics.median(r.rate for r in runs),
            statistics.median(r.p50 for r in runs),
            statistics.median(r.p99 for r in runs),
            sum(r.errors for r in runs),
            statistics.median(r.cpu_ms for r in runs),
        )


def quantile(latencies: list[float], q: float) -> float:
    if not latencies:
        return float("nan")
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip()).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse_wrk(output: str) -> Run:
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", output).group(1))  # type: ignore[union-attr]
    errors = 0
    if match := re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output):
        errors += int(match.group(1))
    if match := re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    ):
        errors += sum(int(n) for n in match.groups())
    if match := re.search(r"Bad streams: (\d+)", output):
        errors += int(match.group(1))
    return Run(rate, p50, p99, errors)


async def run_wrk(
    wrk: str, script: Path, url: str, duration: float, connections: int = CONNECTIONS
) -> Run:
    process = await asyncio.create_subprocess_exec(
        wrk, f"-t{min(2, connections)}", f"-c{connections}", f"-d{duration:g}s",
        "--timeout", "10s", "--latency", "-s", str(script), url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(duration + 30):
        out, _ = await process.communicate()
    return parse_wrk(out.decode())


async def run_wrk_sse(wrk: str, script: Path, url: str, duration: float) -> Run:
    """SSE streams from wrk (``SSE_LUA``): events/s, per-stream p50/p99 latency."""
    run = await run_wrk(wrk, script, url, duration, SSE_STREAMS)
    return Run(run.rate * SSE_EVENTS, run.p50, run.p99, run.errors)


# -- bounded Python clients ----------------------------------------------------------


def send_body(
    text: str, method: str = "SendMessage", context_id: str | None = None
) -> dict[str, object]:
    message: dict[str, object] = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "parts": [{"text": text}],
    }
    if context_id:
        message["contextId"] = context_id
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


async def bounded(
    work: Callable[[], Awaitable[int]], concurrency: int, duration: float
) -> tuple[int, int, list[float], float]:
    """``work`` from ``concurrency`` workers for ``duration`` s: units, errors, latencies, s."""
    units = errors = 0
    latencies: list[float] = []
    deadline = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal units, errors
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                done = await work()
            except Exception:
                done = 0
            if done:
                units += done
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1

    started = time.perf_counter()
    async with asyncio.timeout(duration + 60):
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return units, errors, latencies, time.perf_counter() - started


async def run_sse(url: str, duration: float, concurrency: int = 16) -> Run:
    """SSE streams from a bounded httpx client (``--sse-client httpx``)."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        timeout=30.0, limits=limits, headers={"A2A-Version": "1.0"}
    ) as http:

        async def stream() -> int:
            events = 0
            body = send_body(SSE_TEXT, "SendStreamingMessage")
            async with http.stream("POST", url, json=body) as reply:
                if reply.status_code != 200:
                    return 0
                async for line in reply.aiter_lines():
                    if line.startswith("data:"):
                        if '"error"' in line:
                            return 0
                        events += 1
            return events if events == SSE_EVENTS else 0

        units, errors, latencies, seconds = await bounded(stream, concurrency, duration)
    return Run(units / seconds, quantile(latencies, 0.5), quantile(latencies, 0.99), errors)


async def run_grpc(port: int, duration: float, concurrency: int = CONNECTIONS) -> Run:
    import grpc
    from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)

        async def call() -> int:
            request = SendMessageRequest(
                message=Message(
                    role=Role.ROLE_USER,
                    message_id=str(uuid.uuid4()),
                    parts=[Part(text="hello from the benchmark")],
                )
            )
            reply = await stub.SendMessage(request, metadata=(("a2a-version", "1.0"),), timeout=30)
            return 1 if reply.HasField("message") or reply.HasField("task") else 0

        units, errors, latencies, seconds = await bounded(call, concurrency, duration)
    return Run(units / seconds, quantile(latencies, 0.5), quantile(latencies, 0.99), errors)


async def open_sessions(url: str, count: int, concurrency: int = 32) -> int:
    """``count`` blocking sends, each on a new ``contextId``; the number that failed."""
    failed = 0
    queue = list(range(count))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        timeout=30.0, limits=limits, headers={"A2A-Version": "1.0"}
    ) as http:

        async def worker() -> None:
            nonlocal failed
            while queue:
                index = queue.pop()
                reply = await http.post(
                    url, json=send_body("remember me", context_id=f"session-{index}")
                )
                if reply.status_code != 200 or "result" not in reply.json():
                    failed += 1

        async with asyncio.timeout(300):
            await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failed


# -- the run -------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def table(title: str, unit: str, series: Series, names: list[str]) -> None:
    print(f"\n{title} (median of the rounds)")
    print(f"{'server':>7} {unit:>10} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'CPU ms':>8}")
    for name in names:
        run = series.median(name)
        print(
            f"{name:>7} {run.rate:>10.1f} {run.p50:>8.2f} {run.p99:>8.2f} {run.errors:>6} "
            f"{run.cpu_ms:>8.3f}"
        )
    serve, bare = series.median("serve"), series.median("bare")
    print(
        f"ratio serve/bare: throughput {ratio(serve.rate, bare.rate)}, "
        f"p50 {ratio(serve.p50, bare.p50)}, p99 {ratio(serve.p99, bare.p99)}"
    )
    if "before" in names:
        before = series.median("before")
        print(
            f"serve/before (--compare): throughput {ratio(serve.rate, before.rate)}, p50 "
            f"{ratio(serve.p50, before.p50)}, p99 {ratio(serve.p99, before.p99)}, CPU per unit "
            f"{ratio(serve.cpu_ms, before.cpu_ms)}"
        )
    if "raw" in names:
        raw = series.median("raw")
        print(
            f"serve/raw floor: throughput {ratio(serve.rate, raw.rate)}, p50 "
            f"{ratio(serve.p50, raw.p50)}, p99 {ratio(serve.p99, raw.p99)}, CPU per unit "
            f"{ratio(serve.cpu_ms, raw.cpu_ms)}; bare/raw floor {ratio(bare.rate, raw.rate)}"
        )


async def rounds(
    label: str,
    series: Series,
    names: list[str],
    count: int,
    measure: Callable[[str], Awaitable[Run]],
    *,
    servers: dict[str, Server],
) -> None:
    for index in range(count):
        order = names if index % 2 == 0 else list(reversed(names))
        for name in order:
            cpu, started = servers[name].cpu_seconds(), time.perf_counter()
            run = await measure(name)
            units = run.rate * (time.perf_counter() - started)
            if units:
                run.cpu_ms = (servers[name].cpu_seconds() - cpu) * 1000 / units
            series.add(name, run)
            print(
                f"{label} round {index + 1} {name:>5}: {run.rate:9.1f}/s "
                f"p50 {run.p50:7.2f} ms p99 {run.p99:7.2f} ms errors {run.errors} "
                f"CPU {run.cpu_ms:.3f} ms each"
            )


async def main(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "send.lua"
        script.write_text(LUA)
        sse_script = Path(tmp) / "stream.lua"
        sse_script.write_text(SSE_LUA.replace("TEXT", SSE_TEXT).replace("EVENTS", str(SSE_EVENTS)))
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control"), "PYTHONUNBUFFERED": "1"}
        kinds = ("serve", "bare", "raw", "before")
        ports = {name: (free_port(), free_port()) for name in kinds}
        app = Path(tmp) / "bench.yaml"
        app.write_text(yaml.safe_dump(application(*ports["serve"])))
        baselines = [sys.executable, str(HERE / "baselines.py")]
        serve_argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app)]
        serve_argv += ["--agent", "echo", "--no-control"]
        (serve_http, serve_grpc), (bare_http, bare_grpc) = ports["serve"], ports["bare"]
        raw_http, raw_grpc = ports["raw"]
        bare_argv = [*baselines, "bare", str(bare_http), "--grpc-port", str(bare_grpc)]
        if args.bare_gc_freeze:
            bare_argv.append("--gc-freeze")
        servers = {
            "serve": await start(
                "serve", serve_argv, env, "serving echo", http_port=serve_http, grpc_port=serve_grpc
            ),
            "bare": await start(
                "bare", bare_argv, env, "ready", http_port=bare_http, grpc_port=bare_grpc
            ),
            "raw": await start(
                "raw", [*baselines, "raw", str(raw_http), "--grpc-port", str(raw_grpc)],
                env, "ready", http_port=raw_http, grpc_port=raw_grpc,
            ),
        }  # fmt: skip
        if args.compare is not None:  # the same serve from another checkout's runtime/
            before_app = Path(tmp) / "before.yaml"
            before_app.write_text(yaml.safe_dump(application(*ports["before"])))
            before_env = {**env, "PYTHONPATH": str(args.compare.resolve() / "runtime")}
            before_argv = [*serve_argv[:5], str(before_app), *serve_argv[6:]]
            servers["before"] = await start(
                "before", before_argv, before_env, "serving echo",
                http_port=ports["before"][0], grpc_port=ports["before"][1],
            )  # fmt: skip
        compared = ["before"] if args.compare is not None else []
        try:
            print("memory (RSS, MiB)")
            for name in ("serve", "bare", *compared):
                server = servers[name]
                idle = server.rss_mib()
                failed = await open_sessions(server.url, args.sessions)
                errors += failed
                print(
                    f"{name:>7}: idle {idle:.1f}, after {args.sessions} sessions "
                    f"{server.rss_mib():.1f} ({failed} failed)"
                )
            names = ["serve", "bare", "raw", *compared]
            for name in names:  # warm up
                await run_wrk(wrk, script, servers[name].url, 2)
            jsonrpc = Series()
            await rounds(
                "jsonrpc", jsonrpc, names, args.rounds,
                lambda name: run_wrk(wrk, script, servers[name].url, args.duration),
                servers=servers,
            )  # fmt: skip
            table(f"JSON-RPC SendMessage, wrk, {CONNECTIONS} connections", "req/s", jsonrpc, names)
            errors += sum(jsonrpc.median(n).errors for n in names)
            if not args.skip_sse:
                sse = Series()

                async def sse_run(name: str) -> Run:
                    if args.sse_client == "httpx":
                        return await run_sse(servers[name].url, args.duration)
                    return await run_wrk_sse(wrk, sse_script, servers[name].url, args.duration)

                sse_names = ["serve", "bare", "raw", *compared]
                await rounds("sse", sse, sse_names, args.rounds, sse_run, servers=servers)
                table(
                    f"SSE SendStreamingMessage, {SSE_STREAMS} streams ({args.sse_client}), events",
                    "events/s",
                    sse,
                    sse_names,
                )
                errors += sum(sse.median(n).errors for n in sse_names)
            if not args.skip_grpc:
                rpc = Series()

                async def grpc_run(name: str) -> Run:
                    port = servers[name].grpc_port
                    assert port is not None
                    return await run_grpc(port, args.duration)

                rpc_names = ["serve", "bare", "raw", *compared]
                await rounds("grpc", rpc, rpc_names, args.rounds, grpc_run, servers=servers)
                table(
                    f"gRPC SendMessage, {CONNECTIONS} concurrent calls",
                    "req/s",
                    rpc,
                    rpc_names,
                )
                errors += sum(rpc.median(n).errors for n in rpc_names)
            print(
                f"\nRSS after the run: serve {servers['serve'].rss_mib():.1f} MiB, "
                f"bare {servers['bare'].rss_mib():.1f} MiB"
            )
        finally:
            for server in servers.values():
                await stop(server)
    return 1 if errors else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--sessions", type=int, default=1000, help="sessions for the memory figure")
    parser.add_argument(
        "--bare-gc-freeze",
        action="store_true",
        help="give the bare server the gc.freeze() mas-ctl serve does (a stricter baseline)",
    )
    parser.add_argument("--skip-sse", action="store_true")
    parser.add_argument(
        "--sse-client",
        choices=["wrk", "httpx"],
        default="wrk",
        help="SSE load from wrk (default) or the bounded httpx client (which saturates a core "
        "by itself at about 3,000 events/s here)",
    )
    parser.add_argument("--skip-grpc", action="store_true")
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="also serve 'before': mas-ctl serve with CHECKOUT/runtime first on PYTHONPATH "
        "(e.g. a 'git archive' of an earlier commit), alternated with the others",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

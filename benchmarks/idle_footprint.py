"""An agent pod at rest: ``mas-ctl serve`` as a pod runs it, against a bare a2a-sdk server.

Every server runs as its own process on 127.0.0.1, in the same run:

- ``bare``: the smallest a2a-sdk JSON-RPC server (``python idle_footprint.py bare PORT``): an
  ``AgentExecutor`` answering each send with one ``Message``, ``DefaultRequestHandler``,
  ``InMemoryTaskStore``, the SDK's card and JSON-RPC route factories on Starlette, uvicorn
  with its defaults. It imports nothing else, so it loads what the SDK loads by itself in
  this environment (the SDK probes its installed extras: gRPC, SQLAlchemy, httpx's CLI);
- ``lean``: the same bare server with the SDK's probes of gRPC, SQL and httpx's CLI turned
  off first (``library_ioa.plugins.a2a.sdk_extras.load_sdk``, as ``mas-ctl serve`` does
  for a plain document): what the SDK itself needs, so ``plain`` minus ``lean`` is what
  our runtime adds;
- one ``mas-ctl serve`` per document, run the way the operator's Deployment runs it (the
  command of ``mas_operator.deployments.serve_command``: ``serve -f <mounted document>
  --agent ID --listen ... --metrics-port N --no-control``, ``MAS_AGENT`` set, the document
  a read-only file): ``plain`` (an echo agent, memory task store), ``grpc`` (its endpoint
  with ``a2a.grpc_port``), ``tracing`` (the OTLP variables the operator sets for
  ``spec.runtime.tracing``, pointing at a closed loopback port), ``mcp`` (an MCP door beside
  the A2A endpoint) and ``sql`` (``a2a.task_store`` of type ``sql`` on a SQLite file).

For each server and run:

1. cold start: exec to the first ``GET /.well-known/agent-card.json`` 200 (polled every
   5 ms on a fresh connection);
2. one blocking JSON-RPC ``SendMessage`` (a turn), answered 200 without an error;
3. settled: ``VmRSS`` of ``/proc/PID/status`` sampled every 0.25 s until four samples in
   a row lie within 64 KiB (at most 15 s), then ``Rss`` and ``Pss`` of
   ``/proc/PID/smaps_rollup`` are read (PSS splits the shared libraries' pages among the
   processes that map them; with one server alive at a time it is close to RSS).

Servers alternate run after run (the order reversed every other run) so machine noise hits
all alike; the medians are printed with their ratio to ``bare`` of the same run. With
``--modules`` each server is first started once more under a small wrapper that prints its
``sys.modules`` on ``SIGUSR1``: after the turn, how many modules it has loaded and which of
the heavy optional packages (gRPC, SQLAlchemy, OpenTelemetry's SDK, MCP, rich...) are among
them::

    .venv/bin/python benchmarks/idle_footprint.py [--runs 5] [--only plain,grpc] [--modules]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

START_TIMEOUT = 60.0
SETTLE_TIMEOUT = 15.0
SETTLE_SAMPLES, SETTLE_KIB = 4, 64
DOCUMENTS = ("plain", "grpc", "tracing", "mcp", "sql")
# Top-level packages whose presence the --modules report shows.
HEAVY = (
    "grpc",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "opentelemetry.sdk",
    "mcp",
    "rich",
    "pygments",
    "curses",
    "kubernetes",
    "kopf",
)


# Runs a script or module (argv[1]) as __main__, printing its sys.modules on SIGUSR1.
MODULES_PROBE = """
import json, runpy, signal, sys
def dump(*_):
    loaded = sorted(name for name, module in sys.modules.items() if module is not None)
    print("MODULES " + json.dumps(loaded), file=sys.stderr, flush=True)
signal.signal(signal.SIGUSR1, dump)
target, sys.argv = sys.argv[1], sys.argv[1:]
if target.endswith(".py"):
    runpy.run_path(target, run_name="__main__")
else:
    runpy.run_module(target, run_name="__main__", alter_sys=True)
"""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the bare a2a-sdk server ---------------------------------------------------------


def serve_bare(port: int, lean: bool = False) -> None:
    """The bare server (module docstring); prints ``ready`` once it accepts connections."""
    import asyncio

    if lean:
        from library_ioa.plugins.a2a.sdk_extras import Extras, load_sdk

        load_sdk(Extras(grpc=False, sql=False))

    import uvicorn
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Message,
        Part,
        Role,
    )
    from starlette.applications import Starlette

    class Echo(AgentExecutor):  # type: ignore[misc]
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(
                Message(
                    role=Role.ROLE_AGENT,
                    message_id=str(uuid.uuid4()),
                    context_id=context.context_id or "",
                    task_id=context.task_id or "",
                    parts=[Part(text=context.get_user_input())],
                )
            )

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="bare",
        description="bare echo",
        version="1",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(Echo(), InMemoryTaskStore(), card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)

    async def run() -> None:
        serving = asyncio.create_task(server.serve())
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await serving

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(run())


# -- the documents ---------------------------------------------------------------------


@dataclass
class Command:
    """How to start one server: argv, extra env, and its HTTP port."""

    argv: list[str]
    env: dict[str, str]
    port: int


def document(kind: str, port: int, tmp: Path) -> dict[str, Any]:
    """The Application of one kind (module docstring): an echo agent and its endpoint(s)."""
    a2a: dict[str, Any] = {}
    endpoints: dict[str, Any] = {"echo": {"url": f"http://127.0.0.1:{port}", "usage": "deploy"}}
    if kind == "grpc":
        a2a["grpc_port"] = free_port()
    if kind == "sql":
        a2a["task_store"] = {"type": "sql", "url": f"sqlite+aiosqlite:///{tmp}/tasks-{port}.db"}
    if kind == "mcp":
        endpoints["echo-mcp"] = {
            "protocol": "mcp",
            "agent": "echo",
            "url": f"http://127.0.0.1:{free_port()}",
            "usage": "deploy",
        }
    if a2a:
        endpoints["echo"]["a2a"] = a2a
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "footprint"},
        "spec": {
            "agency": {"agents": {"echo": {"spec": {"model": {"type": "echo"}}}}},
            "endpoints": endpoints,
        },
    }


def serve_command(kind: str, tmp: Path, prefix: tuple[str, ...] = ()) -> Command:
    """``mas-ctl serve`` as the operator's Deployment runs it, on a fresh document."""
    port = free_port()
    path = tmp / f"{kind}-{port}.yaml"
    path.write_text(yaml.safe_dump(document(kind, port, tmp)), encoding="utf-8")
    path.chmod(0o444)  # the ConfigMap is mounted read-only
    argv = [
        *(prefix or (sys.executable, "-m")), "mas.ctl.cli", "serve", "-f", str(path),
        "--agent", "echo", "--listen", "127.0.0.1",
        "--metrics-port", str(free_port()), "--no-control",
    ]  # fmt: skip
    env = {"MAS_AGENT": "echo"}
    if kind == "tracing":  # what mas_operator.telemetry sets for spec.runtime.tracing
        env |= {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": "echo",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "1",
        }
    return Command(argv, env, port)


def bare_command(prefix: tuple[str, ...] = (), kind: str = "bare") -> Command:
    port = free_port()
    return Command([*(prefix or (sys.executable,)), __file__, kind, str(port)], {}, port)


# -- measuring -------------------------------------------------------------------------


@dataclass
class Sample:
    start: float  # seconds from exec to the first AgentCard 200
    rss: float  # MiB, VmRSS settled after one turn
    pss: float  # MiB, Pss of smaps_rollup at the same moment


def card_answers(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    try:
        with urllib.request.urlopen(url, timeout=1.0) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def one_turn(port: int) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": str(uuid.uuid4()),
                "parts": [{"text": "hello from the footprint benchmark"}],
            }
        },
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
    )
    with urllib.request.urlopen(request, timeout=30.0) as reply:
        answer = json.loads(reply.read())
    if "result" not in answer:
        raise SystemExit(f"the turn failed on port {port}: {answer}")


def status_kib(pid: int, field: str, name: str = "status") -> int:
    for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/{pid}/{name} has no {field}")


def settled_rss(pid: int) -> tuple[float, float]:
    """VmRSS and Pss (MiB) once four samples 0.25 s apart lie within 64 KiB."""
    samples: list[int] = []
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        samples.append(status_kib(pid, "VmRSS"))
        recent = samples[-SETTLE_SAMPLES:]
        if len(recent) == SETTLE_SAMPLES and max(recent) - min(recent) <= SETTLE_KIB:
            break
        time.sleep(0.25)
    rss = status_kib(pid, "Rss", "smaps_rollup")
    pss = status_kib(pid, "Pss", "smaps_rollup")
    return rss / 1024, pss / 1024


def measure(command: Command, modules: bool = False) -> Sample:
    """Start, time exec to the first card, one turn, settle, read the RSS; then SIGTERM.

    ``modules``: the command runs under ``MODULES_PROBE``; print what it has loaded.
    """
    env = {**os.environ, **command.env}
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(command.argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while not card_answers(command.port):
                if process.poll() is not None:
                    stderr.seek(0)
                    raise SystemExit(f"{command.argv} exited: {stderr.read()[-2000:]!r}")
                if time.perf_counter() - started > START_TIMEOUT:
                    raise SystemExit(f"no AgentCard within {START_TIMEOUT:.0f}s: {command.argv}")
                time.sleep(0.005)
            took = time.perf_counter() - started
            one_turn(command.port)
            rss, pss = settled_rss(process.pid)
            if modules:
                report_modules(process, command.port, stderr)
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        return Sample(took, rss, pss)


def report_modules(process: subprocess.Popen[bytes], port: int, stderr: Any) -> None:
    """How many modules the process has loaded, and which of HEAVY (``MODULES_PROBE``)."""
    process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        card_answers(port)  # wakes the event loop, which then runs the signal's handler
        stderr.seek(0)
        for line in stderr.read().decode(errors="replace").splitlines():
            if line.startswith("MODULES "):
                names = json.loads(line[len("MODULES ") :])
                heavy = [h for h in HEAVY if any(n == h or n.startswith(h + ".") for n in names)]
                print(f"    {len(names)} modules loaded; heavy: {', '.join(heavy) or 'none'}")
                return
        time.sleep(0.1)
    raise SystemExit(f"no module list from pid {process.pid} within {START_TIMEOUT:.0f}s")


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] in ("bare", "lean"):
        serve_bare(int(sys.argv[2]), lean=sys.argv[1] == "lean")
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="alternating runs (default 5)")
    parser.add_argument(
        "--only", default=",".join(DOCUMENTS), help=f"documents (default {','.join(DOCUMENTS)})"
    )
    parser.add_argument("--modules", action="store_true", help="report the loaded modules once")
    args = parser.parse_args()
    kinds = [k for k in args.only.split(",") if k]
    unknown = sorted(set(kinds) - set(DOCUMENTS))
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)}; accepted: {', '.join(DOCUMENTS)}")
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        builders: dict[str, Callable[[tuple[str, ...]], Command]] = {
            "bare": bare_command,
            "lean": lambda prefix: bare_command(prefix, "lean"),
        }
        for kind in kinds:
            builders[kind] = lambda prefix, kind=kind: serve_command(kind, tmp, prefix)
        if args.modules:
            for name, build in builders.items():
                print(f"{name}:")
                measure(build((sys.executable, "-c", MODULES_PROBE)), modules=True)
        measure(builders["bare"](()))  # warm the page cache once
        samples: dict[str, list[Sample]] = {name: [] for name in builders}
        for index in range(args.runs):
            order = list(builders) if index % 2 == 0 else list(reversed(builders))
            for name in order:
                samples[name].append(measure(builders[name](())))
            print(
                f"run {index + 1}: "
                + ", ".join(
                    f"{n} {samples[n][-1].rss:.1f} MiB {samples[n][-1].start:.2f}s"
                    for n in builders
                ),
                flush=True,
            )
    print(f"\nmedians of {args.runs} runs (load average {os.getloadavg()[0]:.1f})")
    header = ("RSS MiB", "/bare", "PSS MiB", "/bare", "start s", "/bare")
    print(f"{'':>8} " + " ".join(f"{h:>{len(h) + 2}}" for h in header))
    bare = {
        kind: statistics.median(getattr(s, kind) for s in samples["bare"])
        for kind in ("rss", "pss", "start")
    }
    for name, runs in samples.items():
        rss, pss, start = (
            statistics.median(getattr(s, kind) for s in runs) for kind in ("rss", "pss", "start")
        )
        print(
            f"{name:>8} {rss:8.1f} {rss / bare['rss']:5.2f}x {pss:8.1f} {pss / bare['pss']:5.2f}x "
            f"{start:8.2f} {start / bare['start']:5.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

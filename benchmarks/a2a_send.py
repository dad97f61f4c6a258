"""message/send throughput and latency: ``mas-ctl serve`` (echo model) vs a bare a2a-sdk server.

Both servers run as subprocesses on 127.0.0.1 in the same run; the load generator (this
process) alternates between them, round after round, so machine noise hits both alike.
Each request is one JSON-RPC ``SendMessage`` (protocol 1.0, blocking) with the same text.
The bare server is the smallest a2a-sdk echo agent: an executor that answers with one
``Message``, on ``DefaultRequestHandler`` and ``create_jsonrpc_routes``, on uvicorn.

Usage::

    python benchmarks/a2a_send.py [--requests 2000] [--concurrency 16] [--rounds 3]
                                  [--time-limit 30]

Prints per round and per server: requests/s, p50 and p99 latency (ms), errors; then the
medians over the rounds and the ratio serve/bare. Bounded in count and in time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from hot_path import free_port, start, stop

TEXT = "hello from the benchmark"


def bare_server(port: int) -> None:
    """The baseline: a bare a2a-sdk echo agent (runs in a subprocess)."""
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

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(
                Message(
                    role=Role.ROLE_AGENT,
                    message_id=str(uuid.uuid4()),
                    context_id=context.context_id,
                    task_id=context.task_id,
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
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(Echo(), InMemoryTaskStore(), card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    print("ready", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@dataclass
class Result:
    name: str
    done: int
    errors: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def quantile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def load(name: str, url: str, requests: int, concurrency: int, limit: float) -> Result:
    """``requests`` sends with ``concurrency`` workers, stopping early after ``limit`` s."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline = time.perf_counter() + limit
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal issued, errors
        while issued < requests and time.perf_counter() < deadline:
            issued += 1
            body = {
                "jsonrpc": "2.0",
                "id": issued,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "role": "ROLE_USER",
                        "messageId": str(uuid.uuid4()),
                        "contextId": f"bench-{issued % concurrency}",
                        "parts": [{"text": TEXT}],
                    }
                },
            }
            started = time.perf_counter()
            try:
                reply = await http.post(url, json=body)
                ok = reply.status_code == 200 and "result" in reply.json()
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1

    async with httpx.AsyncClient(
        timeout=30.0, limits=limits, headers={"A2A-Version": "1.0"}
    ) as http:
        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return Result(name, len(latencies), errors, seconds, latencies)


def application(port: int) -> dict[str, object]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "bench"},
        "spec": {
            "agency": {"agents": {"echo": {"spec": {"model": {"type": "echo"}}}}},
            "endpoints": {"echo": {"url": f"http://127.0.0.1:{port}", "usage": "deploy"}},
        },
    }


async def main(args: argparse.Namespace) -> int:
    serve_port, bare_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "bench.yaml"
        app.write_text(yaml.safe_dump(application(serve_port)))
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control"), "PYTHONUNBUFFERED": "1"}
        serve = await start(
            "serve",
            [
                sys.executable,
                "-m",
                "mas.ctl.cli",
                "serve",
                "-f",
                str(app),
                "--agent",
                "echo",
                "--no-control",
            ],
            env,
            "serving echo",
            http_port=serve_port,
        )
        bare_argv = [sys.executable, __file__, "--bare-server", str(bare_port)]
        bare = await start("bare", bare_argv, env, "ready", http_port=bare_port)
        targets = {"serve": serve.url, "bare": bare.url}
        try:
            for name, url in targets.items():  # warm up both
                await load(name, url, 100, args.concurrency, args.time_limit)
            results: dict[str, list[Result]] = {name: [] for name in targets}
            print(
                f"{'round':>5} {'server':>6} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}"
            )
            for round_index in range(args.rounds):
                order = list(targets) if round_index % 2 == 0 else list(reversed(targets))
                for name in order:
                    result = await load(
                        name, targets[name], args.requests, args.concurrency, args.time_limit
                    )
                    results[name].append(result)
                    print(
                        f"{round_index + 1:>5} {name:>6} {result.rate:>9.1f} "
                        f"{result.quantile(0.50):>8.2f} {result.quantile(0.99):>8.2f} "
                        f"{result.errors:>6}"
                    )
        finally:
            await stop(serve)
            await stop(bare)
    medians = {
        name: (
            statistics.median(r.rate for r in rs),
            statistics.median(r.quantile(0.5) for r in rs),
            statistics.median(r.quantile(0.99) for r in rs),
        )
        for name, rs in results.items()
    }
    for name, (rate, p50, p99) in medians.items():
        print(f"median {name:>6}: {rate:.1f} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    serve_rate, serve_p50, serve_p99 = medians["serve"]
    bare_rate, bare_p50, bare_p99 = medians["bare"]
    print(
        f"ratio serve/bare: throughput {serve_rate / bare_rate:.2f}x, "
        f"p50 latency {serve_p50 / bare_p50:.2f}x, p99 latency {serve_p99 / bare_p99:.2f}x"
    )
    errors = sum(r.errors for rs in results.values() for r in rs)
    return 1 if errors else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sends per round and server")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent senders")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per run, at most")
    parser.add_argument("--bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.bare_server:
        bare_server(arguments.bare_server)
    else:
        sys.exit(asyncio.run(main(arguments)))

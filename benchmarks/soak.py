"""A bounded soak: mixed traffic against ``mas-ctl serve`` for a fixed time, RSS sampled.

One ``mas-ctl serve`` (echo model, push notifications on, the in-memory task store with
the bounds given here) runs as a subprocess on 127.0.0.1; this process drives it with
``--concurrency`` workers, each picking one kind of request at a time, by weight:

- ``message``: a blocking ``SendMessage`` answered with a Message (no task kept);
- ``task``: a ``returnImmediately`` send (a task is stored), then ``GetTask`` on it;
- ``stream``: ``SendStreamingMessage`` read to its end (a task is stored);
- ``big``: a ``returnImmediately`` send with a ``--big-bytes`` part (default 100 KB; a big
  task is stored);
- ``push``: a send with a push config to a local receiver; one in ten to a receiver that
  accepts and never answers;
- ``bad``: malformed JSON, a 40 KB header (431), an oversize body (413);
- ``probe``: ``/healthz``, ``/readyz``, the card, ``/metrics``;

and, all along, a slowloris: 30 connections each holding a half-sent request head until
the server closes it (408), then opening again.

Every message names one of ``--contexts`` conversations (default 8; 0: a new one per
request). The agent keeps each conversation's history, bounded by messages and bytes per
conversation and by conversations and bytes in all (``--history-max-bytes``, default here
16 MiB, as ``--max-bytes``, so that the bound is reached within the warm-up; the endpoint's
default is 64 MiB); ``--contexts 0`` shows that bound at work, beside the task store's.

The server's RSS (``/proc/<pid>/status``) is sampled every ``--sample`` seconds. The
baseline is the RSS at the end of the warm-up (the first third); the verdict compares the
last third's least-squares slope, projected over the whole run, with 5% of the baseline
(at least 8 MiB): **flat** when the projected growth is below it, else **linear**. It
prints the samples, the ratio of the final RSS to the baseline, request counts and errors,
and the task store's evictions from ``/metrics``.

Usage::

    nice -n 10 python benchmarks/soak.py [--duration 600] [--concurrency 8]
                                         [--max-tasks 1000] [--max-bytes 16777216]
                                         [--contexts 8] [--big-bytes 100000]
                                         [--history-max-bytes 16777216]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

START_TIMEOUT = 60.0
V1 = {"A2A-Version": "1.0"}
WEIGHTS = {
    "message": 30,
    "task": 20,
    "stream": 15,
    "big": 3,
    "push": 8,
    "bad": 8,
    "probe": 12,
}
SLOWLORIS = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def application(
    port: int, max_tasks: int, max_bytes: int, history_max_bytes: int | None
) -> dict[str, Any]:
    store: dict[str, Any] = {"type": "memory", "max_tasks": max_tasks, "max_bytes": max_bytes}
    if history_max_bytes is not None:
        store["history_max_bytes"] = history_max_bytes
    a2a = {
        "capabilities": {"pushNotifications": True},
        "push": {"allowed_hosts": ["127.0.0.1"]},
        "task_store": store,
    }
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "soak"},
        "spec": {
            "agency": {"agents": {"echo": {"spec": {"model": {"type": "echo"}}}}},
            "endpoints": {
                "echo": {"url": f"http://127.0.0.1:{port}", "usage": "deploy", "a2a": a2a}
            },
        },
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


CONTEXTS: list[str] = []  # the conversations requests pick from; empty: a new one each
BIG_BYTES = [100_000]  # the size of a ``big`` request's part (``--big-bytes``)


def send_body(text: str, **configuration: Any) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    if CONTEXTS:
        message["contextId"] = random.choice(CONTEXTS)
    params: dict[str, Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


class Receivers:
    """A push receiver that answers 204, and one that accepts and never answers."""

    def __init__(self) -> None:
        self.pushes = 0
        self.held: list[asyncio.StreamWriter] = []
        self.servers: list[asyncio.Server] = []
        self.good = self.hole = ""

    async def start(self) -> None:
        async def good(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = re.search(rb"(?i)content-length: *(\d+)", head)
                    await reader.readexactly(int(length.group(1)) if length else 0)
                    self.pushes += 1
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                    await writer.drain()
            writer.close()

        async def hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.held.append(writer)
            with contextlib.suppress(ConnectionError):
                while await reader.read(65536):
                    pass

        for handler in (good, hole):
            self.servers.append(await asyncio.start_server(handler, "127.0.0.1", 0))
        ports = [s.sockets[0].getsockname()[1] for s in self.servers]
        self.good, self.hole = (f"http://127.0.0.1:{p}/hook" for p in ports)

    async def aclose(self) -> None:
        for server in self.servers:
            server.close()
        for writer in self.held:
            writer.close()


class Soak:
    def __init__(self, url: str, port: int, receivers: Receivers) -> None:
        self.url = url
        self.port = port
        self.receivers = receivers
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    async def one(self, http: httpx.AsyncClient, kind: str) -> bool:
        if kind == "message":
            reply = (await http.post("/", json=send_body("hello soak"))).json()
            return "result" in reply  # a Message, or a task when the answer took longer
        if kind in ("task", "big"):
            text = "x" * BIG_BYTES[0] if kind == "big" else "a task"
            reply = (await http.post("/", json=send_body(text, returnImmediately=True))).json()
            task_id = reply["result"]["task"]["id"]
            got = await http.post(
                "/",
                json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
            )
            return "result" in got.json() or got.json()["error"]["code"] == -32001
        if kind == "stream":
            body = send_body("stream these words please")
            body["method"] = "SendStreamingMessage"
            async with http.stream("POST", "/", json=body) as response:
                data = b"".join([chunk async for chunk in response.aiter_bytes()])
            return response.status_code == 200 and b"TASK_STATE_COMPLETED" in data
        if kind == "push":
            target = self.receivers.hole if random.random() < 0.1 else self.receivers.good
            config = {"taskPushNotificationConfig": {"url": target, "token": "soak"}}
            reply = (await http.post("/", json=send_body("push me", **config))).json()
            return "result" in reply
        if kind == "bad":
            return await self.bad(http)
        paths = ("/healthz", "/readyz", "/.well-known/agent-card.json", "/metrics")
        return all([(await http.get(p)).status_code == 200 for p in paths])

    async def bad(self, http: httpx.AsyncClient) -> bool:
        choice = random.randrange(3)
        if choice == 0:
            reply = await http.post(
                "/", content=b"{not json", headers={"content-type": "application/json"}
            )
            return bool(reply.json()["error"]["code"] == -32700)
        if choice == 1:
            reply = await http.get("/healthz", headers={"x-big": "b" * 40_000})
            return reply.status_code == 431
        big = b"[" + b" " * (2 * 1024 * 1024) + b"]"
        try:
            reply = await http.post("/", content=big, headers={"content-type": "application/json"})
        except httpx.TransportError:  # refused (413) and closed before the upload ended
            return True
        return reply.status_code == 413

    async def slowloris(self, deadline: float) -> None:
        """One connection after another, each a half-sent head held until the server hangs up."""
        while time.monotonic() < deadline:
            self.counts["slow"] += 1
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: soak\r\nX-Slow: ")
                await writer.drain()
                async with asyncio.timeout(60):
                    answer = await reader.read(-1)
                writer.close()
                ok = answer.startswith(b"HTTP/1.1 408")
            except (OSError, TimeoutError):
                ok = False
            if not ok:
                self.errors["slow"] += 1

    async def worker(self, deadline: float) -> None:
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
        while time.monotonic() < deadline:
            async with httpx.AsyncClient(
                base_url=self.url, headers=V1, timeout=30.0, limits=limits
            ) as http:
                for _ in range(200):  # a fresh client now and then: new connections too
                    if time.monotonic() >= deadline:
                        return
                    kind = random.choices(kinds, weights)[0]
                    self.counts[kind] += 1
                    try:
                        ok = await self.one(http, kind)
                    except (httpx.HTTPError, OSError, ValueError, KeyError, TimeoutError) as exc:
                        ok = False
                        self.errors[f"{kind}:{type(exc).__name__}"] += 1
                    if not ok:
                        self.errors[kind] += 1


def verdict(samples: list[tuple[float, int]], duration: float) -> tuple[str, float, float, float]:
    """(flat|linear, baseline bytes, projected growth bytes, final/baseline)."""
    third = len(samples) // 3
    baseline = samples[third][1]
    tail = samples[2 * third :]
    xs = [t for t, _ in tail]
    ys = [float(r) for _, r in tail]
    slope = statistics.linear_regression(xs, ys).slope if len(tail) > 1 else 0.0
    projected = slope * duration
    allowed = max(0.05 * baseline, 8 * 1024 * 1024)
    return (
        "flat" if projected < allowed else "linear",
        baseline,
        projected,
        samples[-1][1] / baseline,
    )


async def main(args: argparse.Namespace) -> int:
    CONTEXTS[:] = [f"soak-{uuid.uuid4().hex[:8]}" for _ in range(args.contexts)]
    BIG_BYTES[0] = args.big_bytes
    port = free_port()
    receivers = Receivers()
    await receivers.start()
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "soak.yaml"
        app.write_text(
            yaml.safe_dump(
                application(port, args.max_tasks, args.max_bytes, args.history_max_bytes)
            )
        )
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control"), "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app), "--agent", "echo"]
        process = await asyncio.create_subprocess_exec(
            *argv,
            "--no-control",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        assert process.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            while not (await process.stdout.readline()).startswith(b"serving echo"):
                if process.returncode is not None:
                    raise SystemExit("mas-ctl serve exited before it was ready")
        drain = asyncio.create_task(process.stdout.read())
        soak = Soak(f"http://127.0.0.1:{port}", port, receivers)
        started = time.monotonic()
        deadline = started + args.duration
        samples: list[tuple[float, int]] = []
        workers = [asyncio.create_task(soak.worker(deadline)) for _ in range(args.concurrency)]
        workers += [asyncio.create_task(soak.slowloris(deadline)) for _ in range(SLOWLORIS)]
        try:
            while time.monotonic() < deadline:
                samples.append((time.monotonic() - started, rss_bytes(process.pid)))
                print(
                    f"{samples[-1][0]:7.1f} s  RSS {samples[-1][1] / 2**20:7.1f} MiB  "
                    f"requests {sum(soak.counts.values()):7d}  errors {sum(soak.errors.values())}",
                    flush=True,
                )
                await asyncio.sleep(args.sample)
            await asyncio.gather(*workers)
            samples.append((time.monotonic() - started, rss_bytes(process.pid)))
            async with httpx.AsyncClient(timeout=30.0) as http:
                metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        finally:
            for worker in workers:
                worker.cancel()
            process.terminate()
            await process.wait()
            drain.cancel()
            await receivers.aclose()
    kind, baseline, projected, ratio = verdict(samples, args.duration)
    total = sum(soak.counts.values())
    print(f"requests: {total} ({total / args.duration:.1f}/s): {dict(soak.counts)}")
    print(f"errors: {sum(soak.errors.values())}: {dict(soak.errors)}")
    print(f"pushes received: {receivers.pushes}")
    for line in metrics.splitlines():
        if line.startswith(
            (
                "maslab_a2a_task_store_evictions_total",
                "maslab_conversation_evictions_total",
                "maslab_a2a_push_",
            )
        ):
            print(line)
    print(
        f"RSS start {samples[0][1] / 2**20:.1f} MiB, baseline (end of warm-up) "
        f"{baseline / 2**20:.1f} MiB, final "
        f"{samples[-1][1] / 2**20:.1f} MiB, final/baseline {ratio:.3f}, projected growth "
        f"of the last third over the run {projected / 2**20:+.1f} MiB"
    )
    print(f"verdict: {kind}")
    return 0 if kind == "flat" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sample", type=float, default=5.0)
    parser.add_argument("--max-tasks", type=int, default=1000)
    parser.add_argument("--max-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--contexts", type=int, default=8)
    parser.add_argument("--big-bytes", type=int, default=100_000)
    parser.add_argument("--history-max-bytes", type=int, default=16 * 1024 * 1024)
    raise SystemExit(asyncio.run(main(parser.parse_args())))

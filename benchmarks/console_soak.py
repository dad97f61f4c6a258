"""A soak of the web console's chat: concurrent chat streams through ``mas-ctl console -f``
for a fixed time, against a direct-to-agent baseline measured in the same run.

One ``mas-ctl serve`` agent (the echo model, streaming ``--words`` words ``--delay-ms``
apart, so each turn is an open stream for a while) and one ``mas-ctl console -f`` over it
run as subprocesses on 127.0.0.1. This process then drives:

1. the baseline, for ``--baseline-minutes`` (default 1): ``--streams`` workers sending chat
   turns straight to the agent with the console's own client code
   (:class:`mas.console.agents.AgentCalls`), one after the other;
2. the soak, for ``--minutes`` (default 10): ``--streams`` workers sending the same turns
   through the console (``POST .../agents/echo/turn``, the JSON lines read to their end),
   and beside them one direct worker (the agent's latency under that load, no console hop),
   and ``--pages`` open pages' live-update streams (default 20): half the Applications
   list's (``/updates``), half the Application page's (``/apps/local/APP/updates``, which
   also re-reads the agent's badge every 5 s), each held open to the end, its messages
   counted.

Each worker talks in a conversation of its own, a new one every :data:`TURNS_PER_CONTEXT`
turns.

Time to first token: from sending the turn to its first ``text`` event. Printed: the console
process's RSS and open fds at start (once its first turns are done) and end, and sampled
every ``--sample`` seconds; turns and errors of each path; p50/p95 of time to first token
of each path and the ratios of the console's to the baseline's (the same number of streams
straight to the agent) and to the direct worker's beside it. Nothing is asserted::

    nice -n 10 .venv/bin/python benchmarks/console_soak.py [--minutes 10] [--streams 20]
                                                          [--pages 20] [--words 12]
                                                          [--delay-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ports import free_port  # noqa: E402
from tests.process_lines import wait_for_line  # noqa: E402

START = 90.0  # the longest a process may take to print its ready line
TURNS_PER_CONTEXT = 20
APP, AGENT = "console-soak", "echo"


def document(port: int, delay_ms: int) -> dict[str, Any]:
    model = {"type": "echo", "params": {"chunk_delay_ms": delay_ms}}
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": APP},
        "spec": {
            "agency": {"entry": AGENT, "agents": {AGENT: {"spec": {"model": model}}}},
            "endpoints": {
                AGENT: {"protocol": "a2a", "url": f"http://127.0.0.1:{port}", "usage": "deploy"}
            },
        },
    }


def started(
    argv: list[str], ready: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    """``argv`` started; its first stdout line that begins with ``ready`` (with a deadline)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        line = wait_for_line(process, ready, START, argv[3])
    except AssertionError as exc:
        process.kill()
        raise SystemExit(str(exc)) from None
    # keep reading what it prints, so a full pipe never stalls it
    threading.Thread(target=_drain, args=(process,), daemon=True).start()
    return process, line


def _drain(process: subprocess.Popen[bytes]) -> None:
    assert process.stdout is not None
    for _ in process.stdout:
        pass


def rss_and_fds(pid: int) -> tuple[int, int]:
    """``VmRSS`` in bytes and the number of open fds of ``pid``."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Turns:
    """The turns of one path (console or direct): times to first token, errors."""

    ttft: list[float] = field(default_factory=list)
    turns: int = 0
    errors: list[str] = field(default_factory=list)

    def record(self, first: float | None, ended: str | None, error: str | None) -> None:
        if error is not None or ended != "completed":
            self.errors.append(error or f"ended {ended}")
            return
        self.turns += 1
        if first is not None:
            self.ttft.append(first)


async def console_turn(http: httpx.AsyncClient, url: str, text: str, context: str) -> Any:
    """One turn through the console: (time to first token, how it ended, error)."""
    began = time.perf_counter()
    first: float | None = None
    ended: str | None = None
    body = {"text": text, "context_id": context}
    try:
        async with http.stream("POST", url, json=body, headers={"X-Console": "1"}) as response:
            if response.status_code != 200:
                return None, None, f"HTTP {response.status_code}"
            async for line in response.aiter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event["kind"] == "text" and first is None:
                    first = time.perf_counter() - began
                elif event["kind"] == "ended":
                    ended = event["status"]
                elif event["kind"] == "error":
                    return first, None, event["message"]
    except httpx.HTTPError as exc:
        return first, None, f"{type(exc).__name__}: {exc}"
    return first, ended, None


async def direct_turn(calls: Any, url: str, text: str, context: str) -> Any:
    """The same turn straight to the agent, with the console's client code."""
    began = time.perf_counter()
    first: float | None = None
    ended: str | None = None
    async for event in calls.turn(url, text, context):
        if event["kind"] == "text" and first is None:
            first = time.perf_counter() - began
        elif event["kind"] == "ended":
            ended = event["status"]
        elif event["kind"] == "error":
            return first, None, event["message"]
    return first, ended, None


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def soak(args: argparse.Namespace, console_url: str, agent_url: str, pid: int) -> None:
    from mas.console.agents import AgentCalls

    text = " ".join(f"word{i}" for i in range(args.words))
    turn_url = f"{console_url}apps/local/{APP}/agents/{AGENT}/turn"
    baseline, through, direct = Turns(), Turns(), Turns()
    samples: list[tuple[float, int, int]] = []
    total = args.streams + args.pages
    limits = httpx.Limits(max_connections=total, max_keepalive_connections=total)
    calls = AgentCalls()
    pages = Pages()
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:

        async def worker(record: Turns, turn: Any, deadline: float) -> None:
            n, context = 0, str(uuid.uuid4())
            while time.monotonic() < deadline:
                if n % TURNS_PER_CONTEXT == 0:
                    context = str(uuid.uuid4())
                n += 1
                record.record(*await turn(context))

        # the baseline: the same streams straight to the agent
        end = time.monotonic() + args.baseline_minutes * 60
        await asyncio.gather(
            *(
                worker(baseline, lambda c: direct_turn(calls, agent_url, text, c), end)
                for _ in range(args.streams)
            )
        )
        # warm-up: one turn through the console, then the start figures
        through.record(*await console_turn(http, turn_url, text, str(uuid.uuid4())))
        began = time.monotonic()
        deadline = began + args.minutes * 60
        samples.append((0.0, *rss_and_fds(pid)))

        async def sampler() -> None:
            while time.monotonic() < deadline:
                await asyncio.sleep(min(args.sample, max(0.0, deadline - time.monotonic())))
                samples.append((time.monotonic() - began, *rss_and_fds(pid)))

        jobs = [
            worker(through, lambda c: console_turn(http, turn_url, text, c), deadline)
            for _ in range(args.streams)
        ]
        jobs.append(worker(direct, lambda c: direct_turn(calls, agent_url, text, c), deadline))
        feeds = [f"{console_url}updates", f"{console_url}apps/local/{APP}/updates"]
        jobs += [pages.hold(http, feeds[i % 2], deadline) for i in range(args.pages)]
        await asyncio.gather(*jobs, sampler())
    await calls.aclose()
    # the streams have ended: what the console holds once they are gone
    samples.append((time.monotonic() - began, *rss_and_fds(pid)))
    report(args, baseline, through, direct, samples)
    print(
        f"{args.pages} open pages' update streams: {pages.messages} messages, "
        f"{len(pages.errors)} errors" + (f" (first: {pages.errors[0]})" if pages.errors else "")
    )


@dataclass
class Pages:
    """Open pages' live-update streams: the messages they got, how any ended early."""

    messages: int = 0
    errors: list[str] = field(default_factory=list)

    async def hold(self, http: httpx.AsyncClient, url: str, deadline: float) -> None:
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                async with http.stream("GET", url, timeout=None) as response:
                    if response.status_code != 200:
                        self.errors.append(f"{url}: HTTP {response.status_code}")
                        return
                    async for line in response.aiter_lines():
                        if line.startswith("data: "):
                            self.messages += 1
            self.errors.append(f"{url}: the stream ended early")
        except TimeoutError:
            pass  # held to the end
        except httpx.HTTPError as exc:
            self.errors.append(f"{url}: {type(exc).__name__}: {exc}")


def report(
    args: argparse.Namespace,
    baseline: Turns,
    through: Turns,
    direct: Turns,
    samples: list[tuple[float, int, int]],
) -> None:
    mib = 1024 * 1024
    print(
        f"console soak: {args.streams} streams, {args.baseline_minutes:g} min direct, then "
        f"{args.minutes:g} min through the console; {args.words} words {args.delay_ms} ms "
        "apart per turn"
    )
    for at, rss, fds in samples:
        print(f"  t={at:7.1f}s  console RSS {rss / mib:7.1f} MiB  fds {fds}")
    (_, rss0, fds0), (_, rss1, fds1) = samples[0], samples[-1]
    print(
        f"console RSS: start {rss0 / mib:.1f} MiB, end {rss1 / mib:.1f} MiB "
        f"(x{rss1 / rss0:.3f}); fds: start {fds0}, end {fds1}"
    )
    paths = (
        (f"baseline, {args.streams} streams direct", baseline),
        (f"{args.streams} streams through the console", through),
        ("1 stream direct beside them", direct),
    )
    for name, path in paths:
        print(
            f"{name}: {path.turns} turns, {len(path.errors)} errors"
            + (f" (first: {path.errors[0]})" if path.errors else "")
        )
    for name, path in paths:
        p50, p95 = percentile(path.ttft, 0.5), percentile(path.ttft, 0.95)
        print(f"time to first token, {name}: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
    c50, c95 = percentile(through.ttft, 0.5), percentile(through.ttft, 0.95)
    for name, path in (("baseline", baseline), ("the direct stream beside", direct)):
        d50, d95 = percentile(path.ttft, 0.5), percentile(path.ttft, 0.95)
        print(f"ratio console / {name}: p50 x{c50 / d50:.2f}, p95 x{c95 / d95:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long (default 10)")
    parser.add_argument("--streams", type=int, default=20, help="chat streams (default 20)")
    parser.add_argument("--words", type=int, default=12, help="words per reply (default 12)")
    parser.add_argument("--delay-ms", type=int, default=100, help="between words (default 100)")
    parser.add_argument(
        "--baseline-minutes", type=float, default=1.0, help="direct baseline (default 1)"
    )
    parser.add_argument("--pages", type=int, default=20, help="open pages (default 20)")
    parser.add_argument("--sample", type=float, default=30.0, help="RSS every S seconds")
    args = parser.parse_args()
    if (
        args.minutes <= 0
        or args.baseline_minutes <= 0
        or args.streams < 1
        or args.words < 1
        or args.delay_ms < 0
    ):
        parser.error(
            "give --minutes and --baseline-minutes above 0, --streams and --words of 1 or "
            "more, --pages and --delay-ms of 0 or more"
        )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory(prefix="console-soak-") as tmp:
        port, console_port = free_port(), free_port()
        path = Path(tmp) / "app.yaml"
        path.write_text(yaml.safe_dump(document(port, args.delay_ms)))
        cli = [sys.executable, "-m", "mas.ctl.cli"]
        agent, _ = started([*cli, "serve", "-f", str(path), "--agent", AGENT], "serving ", env)
        try:
            console, line = started(
                [*cli, "console", "-f", str(path), "--port", str(console_port)], "console: ", env
            )
            try:
                url = line.split(" ", 1)[1]
                asyncio.run(soak(args, url, f"http://127.0.0.1:{port}", console.pid))
            finally:
                console.kill()
                console.wait()
        finally:
            agent.kill()
            agent.wait()


if __name__ == "__main__":
    main()

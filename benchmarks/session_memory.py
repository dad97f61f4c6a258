"""Memory per session and per stored task: ``mas-ctl serve`` (echo) against the bare a2a-sdk server.

Both servers run as subprocesses on 127.0.0.1 in the same run (the bare one from
``baselines.py``, in-memory task store). For each, in the same process:

1. idle: RSS after a warm-up of 50 sends (so lazily loaded code is counted once);
2. sessions: ``--count`` blocking ``SendMessage`` on a new ``contextId`` each, answered
   with a ``Message`` (no task is stored; ``serve``'s agent keeps each session's history),
   twice; the RSS growth of the second batch is the figure (the first also fills the
   allocator's free lists);
3. tasks: ``--count`` ``SendStreamingMessage`` on a new ``contextId`` each, so each stores
   a completed ``Task`` (its status message, history and the ``response`` artifact of the
   streamed words; and opens a session), twice likewise; the growth per task minus the
   growth per session is the cost of the stored task.

RSS is ``VmRSS`` of ``/proc``, read after the server answered the last request of a batch
and 0.5 s later (the larger kept: turns end in the background)::

    .venv/bin/python benchmarks/session_memory.py [--count 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml
from hot_path import HERE, Server, application, free_port, start, stop

CONCURRENCY = 16


def send(context_id: str, *, task: bool) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "role": "ROLE_USER",
            "messageId": str(uuid.uuid4()),
            "contextId": context_id,
            "parts": [{"text": "remember me for a while"}],
        }
    }
    method = "SendStreamingMessage" if task else "SendMessage"
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def batch(http: httpx.AsyncClient, url: str, count: int, *, task: bool) -> int:
    """``count`` sends on new sessions; the number that failed."""
    failed = 0
    pending = list(range(count))

    async def worker() -> None:
        nonlocal failed
        while pending:
            pending.pop()
            reply = await http.post(url, json=send(str(uuid.uuid4()), task=task))
            if reply.status_code != 200:
                failed += 1
            elif task:  # the stream's last frame is the completed status
                failed += "TASK_STATE_COMPLETED" not in reply.text.rstrip().rsplit("data:", 1)[-1]
            elif "message" not in reply.json().get("result", {}):
                failed += 1

    async with asyncio.timeout(600):
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return failed


async def settled_rss(server: Server) -> float:
    first = server.rss_mib()
    await asyncio.sleep(0.5)
    return max(first, server.rss_mib())


async def measure(server: Server, count: int) -> tuple[dict[str, float], int]:
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    figures: dict[str, float] = {}
    async with httpx.AsyncClient(
        timeout=30.0, limits=limits, headers={"A2A-Version": "1.0"}
    ) as http:
        failed = await batch(http, server.url, 50, task=False)
        failed += await batch(http, server.url, 50, task=True)
        figures["idle"] = await settled_rss(server)
        for kind in ("sessions", "tasks"):
            before = figures["idle"] if kind == "sessions" else figures["tasks-start"]
            failed += await batch(http, server.url, count, task=kind == "tasks")
            middle = await settled_rss(server)
            failed += await batch(http, server.url, count, task=kind == "tasks")
            after = await settled_rss(server)
            figures[f"{kind}-first"] = middle - before
            figures[kind] = after - middle
            if kind == "sessions":
                figures["tasks-start"] = after
        figures["end"] = await settled_rss(server)
    return figures, failed


async def main(args: argparse.Namespace) -> int:
    failed = 0
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control"), "PYTHONUNBUFFERED": "1"}
        for name in ("serve", "bare"):
            http_port, grpc_port = free_port(), free_port()
            if name == "serve":
                app = Path(tmp) / "memory.yaml"
                app.write_text(yaml.safe_dump(application(http_port, grpc_port)))
                argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app)]
                argv += ["--agent", "echo", "--no-control"]
                ready = "serving echo"
            else:
                argv = [sys.executable, str(HERE / "baselines.py"), "bare", str(http_port)]
                ready = "ready"
            server = await start(name, argv, env, ready, http_port=http_port)
            try:
                results[name], bad = await measure(server, args.count)
                failed += bad
            finally:
                await stop(server)
            r = results[name]
            print(
                f"{name:>5}: idle {r['idle']:.1f} MiB; per {args.count} sessions "
                f"+{r['sessions']:.2f} MiB (first batch +{r['sessions-first']:.2f}); per "
                f"{args.count} sessions with a stored task +{r['tasks']:.2f} MiB (first "
                f"+{r['tasks-first']:.2f}), so per {args.count} stored tasks "
                f"+{r['tasks'] - r['sessions']:.2f} MiB; RSS at the end {r['end']:.1f} MiB",
                flush=True,
            )
    serve, bare = results["serve"], results["bare"]
    print(
        f"\nper {args.count} sessions: serve {serve['sessions']:.2f} MiB, bare "
        f"{bare['sessions']:.2f} MiB; per {args.count} stored tasks: serve "
        f"{serve['tasks'] - serve['sessions']:.2f} MiB, bare "
        f"{bare['tasks'] - bare['sessions']:.2f} MiB; idle serve/bare "
        f"{serve['idle'] / bare['idle']:.2f}x ({failed} failed; load average "
        f"{os.getloadavg()[0]:.1f})"
    )
    return 1 if failed else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="sends per batch (default 1000)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

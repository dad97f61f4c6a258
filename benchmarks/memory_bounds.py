"""RSS of ``mas-ctl serve`` (echo) under the memory cases of the hardening round (issue 23).

Each case runs on a fresh server process (a subprocess on 127.0.0.1); its RSS (``VmRSS``)
is read before the case and after it (the larger of two reads 0.5 s apart), and the growth
printed. Clients that "never read" are raw sockets with a 4 KiB receive buffer that send
their request and read nothing until the case is measured.

- ``list``: 30 tasks of a 900 KB message; the size of one plain ``ListTasks`` answer, then
  10 never-reading clients each sending ``ListTasks``;
- ``subscribe``: one working task holding a 900 KB message (the echo streams one huge word,
  then small ones a second apart); 400 never-reading ``SubscribeToTask`` streams of it,
  RSS 3 s after they subscribed and again past the listener's send timeout (30 s);
- ``store``: ``max_bytes`` 64 MiB and ``history_max_bytes`` 16 MiB; 200 tasks of a 900 KB
  message one after another; the growth against the two bounds; ``store-history`` the
  same with the default ``history_max_bytes`` (64 MiB), as the round measured it.

``--before DIR`` runs every case also on the code in ``DIR`` (a tree with ``runtime/`` and
``operator/``, e.g. ``git archive main runtime operator | tar -x -C DIR``), first, in the
same run::

    .venv/bin/python benchmarks/memory_bounds.py [--before DIR] [--cases list,subscribe,store]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from hot_path import Server, free_port, start, stop

BIG = 900_000
SEND_TIMEOUT = 30.0  # a2a.connections.send_timeout_seconds, the default
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
MIB = 1024 * 1024


def application(port: int, a2a: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "bench"},
        "spec": {
            "agency": {"agents": {"echo": {"spec": {"model": {"type": "echo", **model}}}}},
            "endpoints": {
                "echo": {"url": f"http://127.0.0.1:{port}", "usage": "deploy", "a2a": a2a}
            },
        },
    }


def rpc(method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def start_task(text: str) -> bytes:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    return rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}})


async def task_of(http: httpx.AsyncClient, url: str, text: str, *, done: bool) -> str:
    """A new task's id (once it completed, when ``done``)."""
    reply = await http.post(url, content=start_task(text), headers=V1)
    task_id: str = reply.json()["result"]["task"]["id"]
    async with asyncio.timeout(60):
        while done:
            got = await http.post(url, content=rpc("GetTask", {"id": task_id}), headers=V1)
            if got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.05)
    return task_id


async def silent_clients(server: Server, body: bytes, count: int) -> list[socket.socket]:
    """``count`` sockets that send ``body`` as a JSON-RPC POST and never read."""
    loop = asyncio.get_running_loop()
    head = (
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    made = []
    for _ in range(count):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", server.http_port))
        await loop.sock_sendall(sock, head + body)
        made.append(sock)
    return made


async def settled_rss(server: Server) -> float:
    first = server.rss_mib()
    await asyncio.sleep(0.5)
    return max(first, server.rss_mib())


async def case_list(server: Server, http: httpx.AsyncClient) -> dict[str, float]:
    for number in range(30):
        await task_of(http, server.url, f"{number} " + "x" * BIG, done=True)
    answer = await http.post(server.url, content=rpc("ListTasks", {}), headers=V1)
    before = await settled_rss(server)
    held = await silent_clients(server, rpc("ListTasks", {}), 10)
    await asyncio.sleep(2.0)  # the ten answers are written (or stuck) by now
    after = await settled_rss(server)
    for sock in held:
        sock.close()
    return {"answer MB": len(answer.content) / 1e6, "before": before, "after": after}


async def case_subscribe(server: Server, http: httpx.AsyncClient) -> dict[str, float]:
    task_id = await task_of(http, server.url, "x" * BIG + " w" * 120, done=False)
    async with asyncio.timeout(30):  # until the huge first word is in the task
        while True:
            got = await http.post(server.url, content=rpc("GetTask", {"id": task_id}), headers=V1)
            if len(got.content) > BIG:
                break
            await asyncio.sleep(0.05)
    before = await settled_rss(server)
    held = await silent_clients(server, rpc("SubscribeToTask", {"id": task_id}), 400)
    await asyncio.sleep(3.0)
    after = await settled_rss(server)
    await asyncio.sleep(SEND_TIMEOUT + 5.0)  # the listener aborts connections that stay unread
    later = await settled_rss(server)
    for sock in held:
        sock.close()
    return {"before": before, "after": after, "later": later}


async def case_store(server: Server, http: httpx.AsyncClient) -> dict[str, float]:
    for number in range(5):  # the code a task runs is loaded once, before the figure
        await task_of(http, server.url, f"warm-up {number}", done=True)
    before = await settled_rss(server)
    for number in range(200):
        await task_of(http, server.url, f"{number} " + "x" * BIG, done=True)
    after = await settled_rss(server)
    return {"before": before, "after": after}


CASES: dict[str, tuple[dict[str, Any], dict[str, Any], Callable[..., Awaitable[dict[str, float]]]]]
CASES = {
    "list": ({}, {}, case_list),
    "subscribe": ({}, {"params": {"chunk_delay_ms": 1000}}, case_subscribe),
    "store": (
        {"task_store": {"max_bytes": 64 * MIB, "history_max_bytes": 16 * MIB}},
        {},
        case_store,
    ),
    "store-history": ({"task_store": {"max_bytes": 64 * MIB}}, {}, case_store),
}


async def run_case(name: str, source: Path | None, tmp: Path) -> dict[str, float]:
    a2a, model, measure = CASES[name]
    port = free_port()
    app = tmp / f"{name}.yaml"
    app.write_text(yaml.safe_dump(application(port, {"max_body_bytes": 2 * MIB, **a2a}, model)))
    env = {**os.environ, "MAS_CONTROL_DIR": str(tmp / "control"), "PYTHONUNBUFFERED": "1"}
    if source is not None:
        env["PYTHONPATH"] = f"{source / 'runtime'}:{source / 'operator'}"
    argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app), "--agent", "echo"]
    server = await start(name, [*argv, "--no-control"], env, "serving echo", http_port=port)
    try:
        async with httpx.AsyncClient(timeout=60.0) as http:
            return await measure(server, http)
    finally:
        await stop(server)


async def main(args: argparse.Namespace) -> int:
    trees: list[tuple[str, Path | None]] = [("after", None)]
    if args.before is not None:
        trees.insert(0, ("before", Path(args.before).resolve()))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            for label, source in trees:
                r = await run_case(name, source, Path(tmp))
                extra = f"; one ListTasks {r['answer MB']:.1f} MB" if "answer MB" in r else ""
                if "later" in r:
                    extra += f"; {SEND_TIMEOUT + 5:.0f} s later {r['later']:.0f} MiB"
                print(
                    f"{name:>9} {label:>6}: RSS {r['before']:.0f} -> {r['after']:.0f} MiB "
                    f"(+{r['after'] - r['before']:.0f} MiB){extra}",
                    flush=True,
                )
    print(f"(load average {os.getloadavg()[0]:.1f})")
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", help="a tree of older code to measure first")
    parser.add_argument("--cases", default="list,subscribe,store", help="comma-separated cases")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

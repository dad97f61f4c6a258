"""The added latency of one A2A delegation hop, against a direct call to the remote agent.

Two ``mas-ctl serve`` processes on 127.0.0.1, in the same run:

- ``remote``: the echo model, with a gRPC port (``--http-only``: without one);
- ``entry``: a scripted model that delegates every input to ``remote`` over A2A (its
  ``agent_comm`` is ``a2a``: ``A2AAgentComm``, which sends over gRPC when the remote's card
  advertises it, else JSON-RPC) and answers with the delegation's result.

``wrk`` posts the same JSON-RPC ``SendMessage`` (protocol 1.0, a new ``messageId`` and so a
new session per request) either to ``remote`` directly or to ``entry``, which sends it on
to ``remote`` and back; alternating, round after round, at 1 and at 32 concurrent
connections (sessions). Printed: p50/p99 of both and the difference (the hop: the entry's
turn, its outbound client call, the remote's answer back), the ratio of throughputs, and
per run the CPU milliseconds each process spent per request and the shares of the run's
wall time the entry was on a CPU and waiting in the run queue for one
(``/proc/PID/schedstat``): when they add up to about 100% the entry is CPU-bound (its
requests queue for the CPU, not for a lock or a peer); well below, they wait on something
else::

    .venv/bin/python benchmarks/delegation_hop.py [--duration 8] [--rounds 3] [--http-only]
                                                  [--compare CHECKOUT]

``--compare`` adds a third target, ``before``: a second entry, ``mas-ctl serve`` run from
another checkout's ``runtime/`` (first on ``PYTHONPATH``), delegating to the same remote,
so a change of the entry is measured against the old one in the same run (the rounds
alternate the three targets); it prints the added latency and the CPU per hop of both
entries, and their ratios.

``--identity`` runs both processes as in a cluster, checking their callers
(``MAS_A2A_IDENTITY=kubernetes`` against the small HTTPS issuer of ``caller_check.py``): the
entry sends its token (the volume's, ``hop-entry``'s) on the hop and the remote admits it as
its delegator; wrk sends the same token, which the remote (its delegator's) and the entry
(its own ServiceAccount's) both admit. Run it once with and once without to read the cost
the check adds to a hop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

import yaml
from caller_check import identity_mode
from hot_path import LUA, Run, Server, ensure_wrk, free_port, run_wrk, start, stop

VERSION_HEADER = 'wrk.headers["A2A-Version"] = "1.0"'


def header(token: str) -> str:
    return f'  wrk.headers["maslab-identity"] = "{token}"'


HERE = Path(__file__).resolve().parent


def application(entry_port: int, remote_port: int, grpc_port: int | None) -> dict[str, object]:
    delegate = {"delegate": {"to": "remote", "message": "{input}"}, "reply": "{result}"}
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "hop"},
        "spec": {
            "agency": {
                "entry": "entry",
                "agents": {
                    "entry": {
                        "spec": {
                            "delegates_to": ["remote"],
                            "model": {"type": "scripted", "params": {"default": delegate}},
                        }
                    },
                    "remote": {"spec": {"model": {"type": "echo"}}},
                },
            },
            "endpoints": {
                "entry": {"url": f"http://127.0.0.1:{entry_port}", "usage": "deploy"},
                "remote": {
                    "url": f"http://127.0.0.1:{remote_port}",
                    "usage": "use-and-deploy",
                    "a2a": {"grpc_port": grpc_port} if grpc_port else {},
                },
            },
        },
    }


def med(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def scheduled_ns(pid: int) -> tuple[int, int]:
    """Nanoseconds ``pid`` ran on a CPU and waited in the run queue (Linux schedstat)."""
    try:
        ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0, 0  # not Linux, or schedstat off: the figures print as 0
    return int(ran), int(waited)


@dataclass
class Usage:
    """What a run cost the processes: CPU ms per request, and the entry's busy share."""

    cpu_ms: dict[str, float]
    entry_on_cpu: float  # share of the wall time the entry ran on a CPU
    entry_waiting: float  # ... and waited in the run queue for one


async def measured(
    servers: dict[str, Server], work: Awaitable[Run], duration: float, entry: str = "entry"
) -> tuple[Run, Usage]:
    before = {name: scheduled_ns(s.process.pid) for name, s in servers.items()}
    started = time.perf_counter()
    run = await work
    wall = time.perf_counter() - started
    after = {name: scheduled_ns(s.process.pid) for name, s in servers.items()}
    requests = max(run.rate * duration, 1.0)
    cpu = {name: (after[name][0] - before[name][0]) / 1e6 / requests for name in servers}
    ran, waited = (a - b for a, b in zip(after[entry], before[entry], strict=True))
    return run, Usage(cpu, ran / 1e9 / wall, waited / 1e9 / wall)


async def main(args: argparse.Namespace) -> int:
    wrk = ensure_wrk()
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "send.lua"
        env = {**os.environ, "MAS_CONTROL_DIR": str(Path(tmp) / "control"), "PYTHONUNBUFFERED": "1"}
        issuer = None
        if args.identity:  # both processes check their callers (module docstring)
            token, identity_env, issuer = identity_mode(Path(tmp), "default:hop-entry")
            env.update(identity_env)
            script.write_text(LUA.replace(VERSION_HEADER, f"{VERSION_HEADER}\n{header(token)}"))
        else:
            script.write_text(LUA)
        ports = {"remote": free_port(), "entry": free_port()}  # the remote starts first
        grpc_port = None if args.http_only else free_port()
        apps = {"entry": Path(tmp) / "hop.yaml"}
        apps["entry"].write_text(
            yaml.safe_dump(application(ports["entry"], ports["remote"], grpc_port))
        )
        envs = {"remote": env, "entry": env}
        if args.compare is not None:  # the same entry from another checkout's runtime/
            ports["before"] = free_port()
            apps["before"] = Path(tmp) / "before.yaml"
            apps["before"].write_text(
                yaml.safe_dump(application(ports["before"], ports["remote"], grpc_port))
            )
            envs["before"] = {**env, "PYTHONPATH": str(args.compare.resolve() / "runtime")}
        servers: dict[str, Server] = {}
        try:
            for name, port in ports.items():
                app = apps.get(name, apps["entry"])
                agent = "remote" if name == "remote" else "entry"
                argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(app)]
                argv += ["--agent", agent, "--no-control"]
                servers[name] = await start(
                    name, argv, envs[name], f"serving {agent}", http_port=port
                )
            targets = {"direct": servers["remote"].url, "hop": servers["entry"].url}
            entries = {"direct": "entry", "hop": "entry"}  # whose busy share is printed
            if "before" in servers:
                targets["before"] = servers["before"].url
                entries["before"] = "before"
            for url in targets.values():  # warm up, and open the entries' clients to remote
                await run_wrk(wrk, script, url, 2)
            for connections in args.connections:
                series: dict[str, list[Run]] = {name: [] for name in targets}
                cpu_ms: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
                for index in range(args.rounds):
                    names = list(targets)
                    order = names[index % len(names) :] + names[: index % len(names)]
                    if index % 2:
                        order.reverse()
                    for name in order:
                        work = run_wrk(wrk, script, targets[name], args.duration, connections)
                        run, usage = await measured(servers, work, args.duration, entries[name])
                        series[name].append(run)
                        cpu_ms[name].append(usage.cpu_ms)
                        errors += run.errors
                        cpu = " ".join(f"{k} {v:.2f}" for k, v in usage.cpu_ms.items())
                        print(
                            f"c={connections} round {index + 1} {name:>6}: {run.rate:8.1f} req/s "
                            f"p50 {run.p50:7.2f} ms p99 {run.p99:7.2f} ms errors {run.errors}; "
                            f"cpu ms/request {cpu}; {entries[name]} on a CPU "
                            f"{usage.entry_on_cpu:.0%}, waiting for one {usage.entry_waiting:.0%}",
                            flush=True,
                        )
                report(connections, args.rounds, series, cpu_ms)
        finally:
            for server in servers.values():
                await stop(server)
            if issuer is not None:
                issuer.should_exit = True
    return 1 if errors else 0


def report(
    connections: int,
    rounds: int,
    series: dict[str, list[Run]],
    cpu_ms: dict[str, list[dict[str, float]]],
) -> None:
    """The medians of one concurrency: the hop against the direct call (and ``before``)."""
    direct = series["direct"]

    def cpu(target: str, server: str) -> float:
        return statistics.median(c[server] for c in cpu_ms[target])

    lines = [
        f"{connections} concurrent sessions (medians of {rounds} rounds, load average "
        f"{os.getloadavg()[0]:.1f}): direct p50 {med(direct, 'p50'):.2f} ms "
        f"p99 {med(direct, 'p99'):.2f} ms; remote cpu ms/request {cpu('direct', 'remote'):.2f}"
    ]
    added: dict[str, tuple[float, float]] = {}
    for target, entry in (("hop", "entry"), ("before", "before")):
        if target not in series:
            continue
        runs = series[target]
        added[target] = (med(runs, "p50") - med(direct, "p50"), cpu(target, entry))
        lines.append(
            f"  {target:>6}: via entry p50 {med(runs, 'p50'):.2f} ms p99 {med(runs, 'p99'):.2f} ms;"
            f" added p50 {added[target][0]:+.2f} ms, p99 "
            f"{med(runs, 'p99') - med(direct, 'p99'):+.2f} ms; throughput hop/direct "
            f"{med(runs, 'rate') / med(direct, 'rate'):.2f}x; cpu ms/request of a hop: entry "
            f"{added[target][1]:.2f} + remote {cpu(target, 'remote'):.2f}"
        )
    if "before" in added:
        (hop_p50, hop_cpu), (old_p50, old_cpu) = added["hop"], added["before"]
        lines.append(
            f"  hop/before: entry cpu per hop {hop_cpu / old_cpu:.2f}x, added p50 "
            f"{hop_p50 / old_p50:.2f}x, throughput "
            f"{med(series['hop'], 'rate') / med(series['before'], 'rate'):.2f}x"
        )
    print("\n" + "\n".join(lines) + "\n", flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per run (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument(
        "--http-only",
        action="store_true",
        help="the remote advertises no gRPC port, so the entry delegates over JSON-RPC",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="also serve 'before': the entry with CHECKOUT/runtime first on PYTHONPATH",
    )
    parser.add_argument(
        "--identity",
        action="store_true",
        help="both processes check their callers; the entry sends its token on the hop",
    )
    parser.add_argument(
        "--connections",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 32],
        help="comma-separated concurrent sessions (default 1,32)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))

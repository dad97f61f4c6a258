"""The web console: how fast an Application page paints, and what the console holds.

``paint``: ``mas-ctl console -f`` over an Application of N agents (default 50: an entry,
seven leads, six workers under each, every lead deployed at a loopback port nobody listens
on, so its edges are Unreachable; the rest in-process), against the same page of a
one-agent Application (the baseline, a second console in the same run). Debian's chromium
(headless, under Playwright) opens each page in a fresh context, alternating, ``--runs``
times; printed: the medians of first contentful paint and of the load event (the page,
its CSS and script: the graph is server-rendered SVG, so it is painted by then) and their
ratio to the baseline's.

``rss``: ``mas-ctl console --cluster -n NS`` on the real envtest API server
(``scripts/build-envtest``), over a namespace of N Applications (default 100, five agents
each, written with a status of five Ready routes as the operator writes it), against the
same console over an empty namespace (the baseline). Printed: ``VmRSS`` once every
Application is listed on ``/`` and then settled, ``VmHWM``, the ratio to the baseline and
the cost per Application. Nothing is asserted::

    .venv/bin/python benchmarks/console.py [--scenarios paint,rss] [--agents 50] [--apps 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.ports import free_port  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
START = 90.0  # the longest a console may take to print its line, or to list everything
GROUP, VERSION = "infra.maslab.io", "v1"
# The first contentful paint (ms from the navigation's start), once the browser reports it.
FCP = """new Promise((resolve) => new PerformanceObserver((list, observer) => {
  const entry = list.getEntriesByName("first-contentful-paint")[0];
  if (entry) { observer.disconnect(); resolve(entry.startTime); }
}).observe({ type: "paint", buffered: true }))"""
LOAD = "performance.getEntriesByType('navigation')[0].loadEventEnd"


def tree_application(name: str, agents: int) -> dict[str, Any]:
    """An entry, leads under it, workers under each lead (``agents`` in all); the entry and
    every lead deployed, each at a loopback port nobody listens on."""
    ids = [f"agent-{i:03d}" for i in range(agents)]
    entry, rest = ids[0], ids[1:]
    leads = rest[: max(1, min(7, len(rest)))] if rest else []
    workers = rest[len(leads) :]
    delegates: dict[str, list[str]] = {entry: list(leads)}
    for i, worker in enumerate(workers):
        delegates.setdefault(leads[i % len(leads)], []).append(worker)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "agency": {
                "entry": entry,
                "agents": {a: {"spec": {"delegates_to": delegates.get(a, [])}} for a in ids},
            },
            "endpoints": {
                a: {"protocol": "a2a", "url": f"http://127.0.0.1:{free_port()}", "usage": "deploy"}
                for a in [entry, *leads]
            },
        },
    }


def start_console(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``mas-ctl console ARGS`` on a free port; its url once it printed it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mas.ctl.cli", "console", *args, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + START
    while time.monotonic() < deadline:
        line = process.stdout.readline().decode()
        if line.startswith("console: "):
            return process, line.split(" ", 1)[1].strip().rstrip("/")
        if not line:
            break
        seen.append(line)
    process.kill()
    raise SystemExit("the console did not start:\n" + "".join(seen))


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def paint(agents: int, runs: int) -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as work:
        consoles = {}
        for label, size in (("baseline", 1), ("measured", agents)):
            path = Path(work) / f"{label}.yaml"
            path.write_text(yaml.safe_dump(tree_application(f"app-{size}", size)))
            process, url = start_console("-f", str(path), "--check-interval", "3600")
            consoles[label] = (process, f"{url}/apps/local/app-{size}", size)
        try:
            times: dict[str, dict[str, list[float]]] = {
                label: {"fcp": [], "load": []} for label in consoles
            }
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS
                )
                for run in range(runs + 1):  # the first round warms both up, not counted
                    order = list(consoles) if run % 2 else list(reversed(consoles))
                    for label in order:
                        _, url, size = consoles[label]
                        context = await browser.new_context()
                        page = await context.new_page()
                        await page.goto(url, wait_until="load")
                        nodes = await page.locator("g.node").count()
                        assert nodes == size, (label, nodes)
                        fcp = await asyncio.wait_for(page.evaluate(FCP), 30)
                        load = await page.evaluate(LOAD)
                        await context.close()
                        if run:
                            times[label]["fcp"].append(fcp)
                            times[label]["load"].append(load)
                await browser.close()
        finally:
            for process, _, _ in consoles.values():
                stop(process)
    base = {k: statistics.median(v) for k, v in times["baseline"].items()}
    got = {k: statistics.median(v) for k, v in times["measured"].items()}
    print(f"paint: Application page, {agents} agents vs 1 agent, median of {runs} runs")
    for key, what in (("fcp", "first contentful paint"), ("load", "load event")):
        print(
            f"  {what:24} {got[key]:7.1f} ms  baseline {base[key]:7.1f} ms  "
            f"ratio {got[key] / base[key]:.2f}"
        )


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def settled_rss(pid: int) -> float:
    """VmRSS (MiB) once four samples 0.5 s apart lie within 256 KiB (at most 30 s)."""
    samples: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        samples.append(status_kib(pid, "VmRSS"))
        last = samples[-4:]
        if len(last) == 4 and max(last) - min(last) <= 256:
            break
        time.sleep(0.5)
    return samples[-1] / 1024


def status_of(app: dict[str, Any]) -> dict[str, Any]:
    """The status the operator would write: Ready, every route Ready."""
    from mas.infra.wiring import wire

    routes = wire(app, None, require_urls=False).routes.routes
    now = "2026-01-01T00:00:00Z"
    return {
        "phase": "Ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllReady",
                "message": "every agent has a ready replica",
                "lastTransitionTime": now,
            }
        ],
        "routes": [
            {
                "from": r.source,
                "to": r.target,
                "via": "in-process" if r.kind == "local" else r.protocol,
                "state": "Ready",
                "reason": "HostReady" if r.kind == "local" else "TargetReady",
                "message": "ready",
                "lastTransitionTime": now,
            }
            for r in routes
        ],
    }


def rss(apps: int) -> None:
    from kubernetes import client as k8s
    from tests.envtest.controlplane import ControlPlane, binaries_available

    ok, why = binaries_available()
    if not ok:
        raise SystemExit(f"rss: {why}")
    with ControlPlane(controller_manager=False) as cp:
        cp.apply_yaml(REPO / "crds" / "application.yaml")
        core = k8s.CoreV1Api(cp.api_client())
        custom = k8s.CustomObjectsApi(cp.api_client())
        empty, full = f"empty-{uuid.uuid4().hex[:6]}", f"full-{uuid.uuid4().hex[:6]}"
        for ns in (empty, full):
            core.create_namespace({"metadata": {"name": ns}})
        for i in range(apps):
            app = tree_application(f"app-{i:03d}", 5)
            for endpoint in app["spec"]["endpoints"].values():
                endpoint["usage"] = "use-and-deploy"
                del endpoint["url"]
            custom.create_namespaced_custom_object(GROUP, VERSION, full, "applications", app)
            custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, full, "applications", app["metadata"]["name"],
                {"status": status_of(app)},
            )  # fmt: skip
        kubeconfig = str(cp.kubeconfig_path)
        results = {}
        for label, ns, count in (("baseline", empty, 0), ("measured", full, apps)):
            process, url = start_console("--cluster", "-n", ns, "--kubeconfig", kubeconfig)
            try:
                deadline = time.monotonic() + START
                listed = -1
                while time.monotonic() < deadline:
                    listed = httpx.get(url + "/", timeout=10).text.count('<tr data-key="')
                    if listed == count:
                        break
                    time.sleep(0.5)
                assert listed == count, (label, listed)
                ready = httpx.get(url + "/").text.count('class="status-true"')
                results[label] = (
                    settled_rss(process.pid),
                    status_kib(process.pid, "VmHWM") / 1024,
                    ready,
                )
            finally:
                stop(process)
    (base, base_peak, _), (got, peak, ready) = results["baseline"], results["measured"]
    print(f"rss: mas-ctl console --cluster, {apps} watched Applications vs none (envtest)")
    print(f"  VmRSS settled  {got:6.1f} MiB  baseline {base:6.1f} MiB  ratio {got / base:.2f}")
    print(f"  VmHWM          {peak:6.1f} MiB  baseline {base_peak:6.1f} MiB")
    print(f"  per Application {(got - base) * 1024 / apps:6.1f} KiB; {ready} listed Ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="paint,rss", help="paint, rss (default both)")
    parser.add_argument("--agents", type=int, default=50, help="agents of the painted page")
    parser.add_argument("--apps", type=int, default=100, help="Applications the console watches")
    parser.add_argument("--runs", type=int, default=15, help="paint: pages opened per console")
    args = parser.parse_args()
    wanted = set(args.scenarios.split(","))
    if "paint" in wanted:
        if not CHROMIUM.exists():
            raise SystemExit(f"paint: {CHROMIUM} is missing (apt-get install chromium)")
        asyncio.run(paint(args.agents, args.runs))
    if "rss" in wanted:
        if not os.environ.get("MAS_ENVTEST_DIR"):
            print("rss: MAS_ENVTEST_DIR unset: the default cache is used", file=sys.stderr)
        rss(args.apps)
    return 0


if __name__ == "__main__":
    sys.exit(main())

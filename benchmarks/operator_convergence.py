"""Convergence of the operator against a plain client, on the real envtest control plane.

Scenarios (each in a fresh namespace):

- ``apps``: N Applications of 5 agents each, every agent deployed (5 runtimes each);
- ``agents``: one Application of N agents, every agent deployed.

For each, the operator (``mas-operator run`` as a subprocess, as in a pod) is timed from the
first create until every Application reports status for its generation and every child
exists; the baseline, in the same run, is a plain client server-side applying the same child
manifests (from the same builders) one by one. The plain client's children are deleted
before the operator starts (and their ClusterIPs released), so that both start from the same
cluster: kube-apiserver's ClusterIP allocator counts every allocated address on each Service
it creates, so Services left by the plain client made each of the operator's dearer.
Printed: both times, their ratio, the operator's peak RSS (``VmHWM``), and the API server's
own mean time per APPLY by resource and per ClusterIP allocation in each phase (from its
``/metrics``).

``--variants`` runs the operator once per set of environment variables (``;`` between
sets, ``,`` between variables, ``default`` for none), each in a fresh namespace against the
same baseline: e.g. ``--variants 'default;MALLOC_ARENA_MAX=2'`` compares glibc's arenas in
one run. ``--tracemalloc DIR`` starts the operator under :mod:`tracemalloc` (slower: for
finding where the memory is, not for the ratio) and writes the largest allocation sites to
``DIR`` when it has converged and at the end of the idle window.

``--idle S`` then leaves the converged operator alone for S seconds (nothing is changed, and
the benchmark makes no request) and counts, from the API server's audit log, every request
made in that window by client (user agent) and verb: the steady state at that size,
including the operator's resync passes (``--resync``, the operator's default 30 s unless
given) and its cold passes (``--cold-every``: ``--resync 10 --cold-every 1`` puts a cold pass
every 10 s into the window, to measure one); and, as a cross-check, the growth of the API
server's own ``apiserver_request_total`` by verb over the same window (read from its ``/metrics``
just before and just after). Needs the envtest binaries (``scripts/build-envtest``)::

    .venv/bin/python benchmarks/operator_convergence.py --sizes 10,50,200
    .venv/bin/python benchmarks/operator_convergence.py --sizes 1000 --scenarios apps \
        --idle 300 --no-controller-manager
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import urllib3  # noqa: E402
from kubernetes import client as k8s  # noqa: E402
from kubernetes import watch as k8s_watch  # noqa: E402
from tests.envtest.controlplane import ControlPlane, binaries_available  # noqa: E402
from tests.ports import free_port  # noqa: E402

from mas_operator.children import build_children  # noqa: E402
from mas_operator.kube import Cluster  # noqa: E402
from mas_operator.plan import plan_application  # noqa: E402

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"


def application(name: str, agents: int) -> dict[str, Any]:
    """An Application whose agents form a chain of delegations, every agent deployed."""
    ids = [f"a{i}" for i in range(agents)]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "agency": {
                "entry": ids[0],
                "agents": {
                    agent: {"spec": {"delegates_to": ids[i + 1 : i + 2]}}
                    for i, agent in enumerate(ids)
                },
            },
            "endpoints": {agent: {"usage": "use-and-deploy"} for agent in ids},
        },
    }


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""
WRITES = {"create", "update", "patch", "delete", "deletecollection"}

# The operator under tracemalloc: SIGUSR1 writes the largest allocation sites, by the line
# that allocated and by the innermost line of the operator or kopf that led to it.
TRACED_OPERATOR = """
import os, signal, sys, tracemalloc
from mas_operator.cli import main  # imported before tracing starts: what it holds is not traced
tracemalloc.start(int(os.environ["BENCH_TRACE_FRAMES"]))
taken = []
def ours(trace):
    for frame in reversed(trace.traceback):  # innermost first
        if "mas_operator" in frame.filename or "/kopf/" in frame.filename:
            return f"{frame.filename.rsplit('site-packages/', 1)[-1]}:{frame.lineno}"
    return "elsewhere"
def dump(*_):
    rss = [l for l in open("/proc/self/status") if l.startswith(("VmRSS", "VmHWM"))]
    snapshot = tracemalloc.take_snapshot()
    total = sum(s.size for s in snapshot.statistics("filename"))
    by_site = {}
    for stat in snapshot.statistics("traceback"):
        key = ours(stat)
        size, count = by_site.get(key, (0, 0))
        by_site[key] = (size + stat.size, count + stat.count)
    taken.append(1)
    path = os.path.join(os.environ["BENCH_TRACE_DIR"], f"snapshot-{len(taken)}.txt")
    with open(path, "w") as out:
        out.write(f"traced {total / 2**20:.1f} MiB; {' '.join(' '.join(rss).split())}\\n")
        out.write("\\nby the allocating line:\\n")
        for stat in snapshot.statistics("lineno")[:30]:
            out.write(f"{stat.size / 2**20:8.2f} MiB {stat.count:>8} {stat.traceback[0]}\\n")
        out.write("\\nby the innermost line of the operator or kopf:\\n")
        for key, (size, count) in sorted(by_site.items(), key=lambda kv: -kv[1][0])[:40]:
            out.write(f"{size / 2**20:8.2f} MiB {count:>8} {key}\\n")
signal.signal(signal.SIGUSR1, dump)
sys.exit(main(sys.argv[1:]))
"""


def parse_variants(text: str) -> list[dict[str, str]]:
    """``default;A=1,B=2`` as a list of environments (``default``: none added)."""
    out = []
    for part in (p.strip() for p in text.split(";")):
        pairs = [] if part in ("", "default") else part.split(",")
        out.append(dict(pair.split("=", 1) for pair in pairs))
    return out


def describe_env(env: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in env.items()) or "default"


@dataclass
class Result:
    variant: str
    scenario: str
    size: int
    objects: int
    operator_s: float
    baseline_s: float
    peak_rss_mib: float
    idle_s: float = 0.0
    idle_requests: dict[str, int] = field(default_factory=dict)
    idle_rss_mib: float = 0.0
    idle_by_verb: dict[str, int] = field(default_factory=dict)  # apiserver_request_total
    operator_cpu_s: float = 0.0  # CPU time of the operator until it converged
    idle_cpu_s: float = 0.0  # and in the idle window
    reconciles: int = 0  # reconciles the operator finished until it converged
    idle_reconciles: int = 0  # and in the idle window
    idle_cold_passes: int = 0  # cold passes that began in the idle window
    rss_by_progress: dict[str, float] = field(default_factory=dict)  # "25%": MiB
    # the API server's mean time (ms) per APPLY by resource and per ClusterIP allocation
    baseline_server_ms: dict[str, float] = field(default_factory=dict)
    operator_server_ms: dict[str, float] = field(default_factory=dict)


def client_of(user_agent: str) -> str:
    """A short name for the client behind a user agent."""
    head = user_agent.split("/", 1)[0]
    return {"OpenAPI-Generator": "python-client"}.get(head, head)


def count_requests(audit_log: Path, since: str, until: str) -> dict[str, int]:
    """Requests in [since, until) (RFC 3339 micro timestamps), by ``client verb resource``."""
    counts: Counter[str] = Counter()
    with audit_log.open() as lines:
        for line in lines:
            event = json.loads(line)
            if event.get("stage") not in ("ResponseComplete", "ResponseStarted", "Panic"):
                continue
            if event.get("stage") == "ResponseStarted" and event.get("verb") != "watch":
                continue
            received = event.get("requestReceivedTimestamp", "")
            if not since <= received < until:
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "-") + (
                "/" + ref["subresource"] if ref.get("subresource") else ""
            )
            counts[f"{client_of(event.get('userAgent', '?'))} {event['verb']} {resource}"] += 1
    return dict(counts)


_REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def request_totals(cp: ControlPlane) -> Counter[str]:
    """The API server's ``apiserver_request_total``, summed by verb."""
    api = cp.api_client()
    response = api.call_api(*api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"]))
    response.read()
    totals: Counter[str] = Counter()
    for line in response.data.decode().splitlines():
        match = _REQUEST_TOTAL.match(line)
        if match is None:
            continue
        verb = re.search(r'verb="([^"]*)"', match["labels"])
        totals[verb.group(1) if verb else "?"] += int(float(match["value"]))
    api.close()
    return totals


_SERVER_SECONDS = re.compile(
    r"^(?P<name>apiserver_request_duration_seconds|"
    r"kube_apiserver_clusterip_allocator_allocation_duration_seconds)_(?P<part>sum|count)"
    r"\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)
ALLOCATION = "ClusterIP allocation"


def server_seconds(cp: ControlPlane) -> dict[str, tuple[float, float]]:
    """The API server's own time so far, ``{what: (seconds, count)}``: its APPLY requests by
    resource (``apiserver_request_duration_seconds``) and its dynamic ClusterIP allocations
    (``kube_apiserver_clusterip_allocator_allocation_duration_seconds``)."""
    api = cp.api_client()
    response = api.call_api(*api.param_serialize("GET", "/metrics", auth_settings=["BearerToken"]))
    response.read()
    api.close()
    out: dict[str, tuple[float, float]] = {}
    for line in response.data.decode().splitlines():
        match = _SERVER_SECONDS.match(line)
        if match is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if match["name"].startswith("kube_apiserver_clusterip"):
            what = ALLOCATION  # observed for dynamic allocations only
        elif labels.get("verb") == "APPLY" and not labels.get("subresource"):
            what = labels.get("resource", "?")
        else:
            continue
        seconds, count = out.get(what, (0.0, 0.0))
        value = float(match["value"])
        out[what] = (seconds + value, count) if match["part"] == "sum" else (seconds, count + value)
    return out


def mean_ms(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """The mean of each of :func:`server_seconds` between two readings, in milliseconds."""
    out = {}
    for what, (seconds, count) in after.items():
        was_seconds, was_count = before.get(what, (0.0, 0.0))
        if count > was_count:
            out[what] = round(1000 * (seconds - was_seconds) / (count - was_count), 1)
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def metric_total(port: int, name: str) -> int:
    """The sum of a counter's samples on the operator's ``/metrics``."""
    text = urllib3.request("GET", f"http://127.0.0.1:{port}/metrics", timeout=10).data.decode()
    return round(
        sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))
    )


def progress_marks(samples: list[tuple[int, float]], total: int) -> dict[str, float]:
    """The operator's RSS when a quarter, half, three quarters and all of the Applications
    had converged (the first poll at or past each mark)."""
    marks: dict[str, float] = {}
    for share in (25, 50, 75, 100):
        done = next((rss for count, rss in samples if count * 100 >= share * total), None)
        if done is not None:
            marks[f"{share}%"] = round(done, 1)
    return marks


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def wait_until(check: Callable[[], bool], timeout: float, what: str, every: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def namespace(cp: ControlPlane) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    k8s.CoreV1Api(cp.api_client()).create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name))
    )
    return name


class ConvergenceWatch:
    """Which Applications of a namespace report status for their generation with every
    agent, from a watch (the observer's own load on the API server: one event per change,
    where a LIST of every Application every 2 s cost about half a second of the API
    server's time each at 1,000, beside the operator's work)."""

    def __init__(self, custom: k8s.CustomObjectsApi, ns: str, agents: dict[str, int]) -> None:
        self.custom, self.ns, self.agents = custom, ns, agents
        self.done: set[str] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._version = ""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._relist()  # the watch starts from here, before the first create
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _see(self, item: dict[str, Any]) -> None:
        name, status = item["metadata"]["name"], item.get("status") or {}
        observed = status.get("observedGeneration") == item["metadata"].get("generation")
        if observed and len(status.get("agents") or {}) == self.agents.get(name, -1):
            self.done.add(name)
        else:
            self.done.discard(name)

    def _relist(self) -> None:
        listing = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)
        for item in listing["items"]:
            self._see(item)
        self._version = listing["metadata"]["resourceVersion"]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                stream = k8s_watch.Watch().stream(
                    self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL,
                    resource_version=self._version, timeout_seconds=5,
                )  # fmt: skip
                try:
                    for event in stream:
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._see(event["object"])
                        self._version = event["object"]["metadata"]["resourceVersion"]
                except k8s.ApiException as exc:
                    if exc.status != 410:
                        raise
                    self._relist()  # too old to resume: read every Application again
        except BaseException as exc:  # reported by the waiting thread
            self.error = exc


def run_operator_scenario(
    cp: ControlPlane,
    docs: list[dict[str, Any]],
    log: Path,
    *,
    resync: float,
    cold_every: int | None = None,
    idle: float = 0.0,
    audit_log: Path | None = None,
    env: dict[str, str] | None = None,
    trace_dir: Path | None = None,
) -> tuple[
    float,
    float,
    dict[str, int],
    float,
    dict[str, int],
    tuple[float, float],
    tuple[int, int, int],
    dict[str, float],
]:
    ns = namespace(cp)
    metrics_port = free_port()
    custom = k8s.CustomObjectsApi(cp.api_client())
    apps = k8s.AppsV1Api(cp.api_client())
    expected = sum(len(d["spec"]["endpoints"]) for d in docs)
    log_file = log.open("w")
    extra = dict(env or {})
    entry = ["-m", "mas_operator.cli"]
    if trace_dir is not None:
        trace_dir.mkdir(parents=True, exist_ok=True)
        entry = ["-c", TRACED_OPERATOR]
        extra |= {"BENCH_TRACE_DIR": str(trace_dir), "BENCH_TRACE_FRAMES": "6"}
    proc = subprocess.Popen(
        [
            sys.executable,
            *entry,
            "run",
            "-n",
            ns,
            "--kubeconfig",
            str(cp.kubeconfig_path),
            "--lease-namespace",
            ns,
            "--resync",
            f"{resync:g}",
            *(["--cold-every", str(cold_every)] if cold_every is not None else []),
            "--metrics-port",
            str(metrics_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log_file,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "runtime")]),
            **extra,
        },
    )
    try:
        coordination = k8s.CoordinationV1Api(cp.api_client())

        def leading() -> bool:
            try:
                return bool(coordination.read_namespaced_lease("mas-operator", ns).spec)
            except k8s.ApiException:
                return False

        wait_until(leading, 60, "the operator to take its Lease")
        time.sleep(1.0)  # let kopf start its watches
        watcher = ConvergenceWatch(
            custom, ns, {d["metadata"]["name"]: len(d["spec"]["endpoints"]) for d in docs}
        )
        watcher.start()
        started = time.perf_counter()
        for doc in docs:
            custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, doc)

        samples: list[tuple[int, float]] = []  # (Applications converged, operator RSS)

        def converged() -> bool:
            if watcher.error is not None:
                raise SystemExit(f"watching the Applications failed: {watcher.error!r}")
            samples.append((len(watcher.done), rss_mib(proc.pid)))
            if len(watcher.done) < len(docs):
                return False
            return len(apps.list_namespaced_deployment(ns).items) == expected

        try:
            wait_until(converged, 3600, f"convergence (operator log: {log})", 0.25)
        finally:
            watcher.stop()
        took = time.perf_counter() - started
        rss, converged_cpu = peak_rss_mib(proc.pid), cpu_s(proc.pid)
        reconciled = metric_total(metrics_port, "mas_operator_reconciles_total")
        if trace_dir is not None:
            dump_snapshot(proc.pid, trace_dir, 1)
        requests: dict[str, int] = {}
        by_verb: dict[str, int] = {}
        idle_rss, idle_cpu, idle_reconciles, idle_cold = float("nan"), 0.0, 0, 0
        if idle > 0 and audit_log is not None:
            time.sleep(min(10.0, idle))  # the last status writes of the convergence land
            before, cpu_before = request_totals(cp), cpu_s(proc.pid)
            reconciles_before = metric_total(metrics_port, "mas_operator_reconciles_total")
            cold_before = metric_total(metrics_port, "mas_operator_cold_passes_total")
            since = utc_now()
            time.sleep(idle)  # the benchmark makes no request in this window
            until = utc_now()
            after, idle_cpu = request_totals(cp), cpu_s(proc.pid) - cpu_before
            idle_reconciles = (
                metric_total(metrics_port, "mas_operator_reconciles_total") - reconciles_before
            )
            idle_cold = metric_total(metrics_port, "mas_operator_cold_passes_total") - cold_before
            by_verb = {verb: n for verb, n in (after - before).items() if n}
            idle_rss = rss_mib(proc.pid)
            if trace_dir is not None:
                dump_snapshot(proc.pid, trace_dir, 2)
            time.sleep(2.0)  # the audit backend flushes
            requests = count_requests(audit_log, since, until)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log_file.close()
    marks = progress_marks(samples, len(docs))
    counts = (reconciled, idle_reconciles, idle_cold)
    return took, rss, requests, idle_rss, by_verb, (converged_cpu, idle_cpu), counts, marks


def dump_snapshot(pid: int, trace_dir: Path, number: int) -> None:
    """Ask the traced operator for its ``number``-th snapshot and wait until it is written."""
    os.kill(pid, signal.SIGUSR1)
    path = trace_dir / f"snapshot-{number}.txt"
    wait_until(lambda: path.exists() and "innermost" in path.read_text(), 600, str(path), 1.0)
    print(f"  tracemalloc snapshot {number}: {path}", flush=True)


def run_baseline(cp: ControlPlane, docs: list[dict[str, Any]]) -> tuple[float, int]:
    """The plain client's time to apply every child of ``docs``; its children are deleted
    again afterwards (:func:`clear_baseline`)."""
    ns = namespace(cp)
    addresses = ip_addresses(cp)
    cluster = Cluster(cp.api_client(), field_manager="plain-client", timeout=120.0)
    manifests = [m for d in docs for m in build_children(plan_application(d, ns), {})]
    started = time.perf_counter()
    for manifest in manifests:
        # An overloaded API server answers 429/5xx or not in time: try again (an apply is
        # idempotent), as the operator does.
        for attempt in range(8):
            try:
                cluster.apply(manifest)
                break
            except k8s.ApiException as exc:
                if exc.status not in (429, 500, 503, 504) or attempt == 7:
                    raise
            except urllib3.exceptions.HTTPError:
                if attempt == 7:
                    raise
            time.sleep(1.0 + attempt)
    took = time.perf_counter() - started
    clear_baseline(cp, ns, addresses)
    return took, len(manifests)


def ip_addresses(cp: ControlPlane) -> int:
    """How many ClusterIPs the API server has allocated (its IPAddress objects)."""
    networking = k8s.NetworkingV1Api(cp.api_client())
    listing = networking.list_ip_address(_preload_content=False)
    return len(json.loads(listing.read())["items"])


def clear_baseline(cp: ControlPlane, ns: str, addresses: int, timeout: float = 600.0) -> None:
    """Delete the plain client's children from ``ns`` and wait until the API server has
    released their ClusterIPs (back to ``addresses`` IPAddress objects): the operator's
    phase then starts from the cluster the plain client's started from. Each dynamic
    ClusterIP allocation of kube-apiserver 1.34 counts every IPAddress in the cluster
    (twice, for its metrics) while it holds the allocator's lock, so 5,000 Services left
    by the plain client would make each of the operator's Service applies dearer."""
    api = cp.api_client()
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    networking = k8s.NetworkingV1Api(api)
    core.delete_collection_namespaced_service(ns)
    core.delete_collection_namespaced_config_map(ns)
    core.delete_collection_namespaced_service_account(ns)
    apps.delete_collection_namespaced_deployment(ns)
    networking.delete_collection_namespaced_network_policy(ns)
    rbac = k8s.RbacAuthorizationV1Api(api)
    rbac.delete_collection_namespaced_role_binding(ns)
    rbac.delete_collection_namespaced_role(ns)
    wait_until(lambda: ip_addresses(cp) <= addresses, timeout, "the ClusterIPs' release", 1.0)


def print_idle(r: Result) -> None:
    total = sum(r.idle_requests.values())
    writes = sum(n for key, n in r.idle_requests.items() if key.split()[1] in WRITES)
    print(
        f"  idle {r.idle_s:.0f}s: {r.idle_reconciles} reconciles, {r.idle_cold_passes} cold "
        f"passes, {total} API requests ({writes} writes), operator RSS "
        f"{r.idle_rss_mib:.1f} MiB at the end, operator CPU {r.idle_cpu_s:.2f}s; "
        "by client, verb, resource:"
    )
    for key, n in sorted(r.idle_requests.items(), key=lambda kv: -kv[1]):
        print(f"    {n:>7}  {key}")
    verbs = ", ".join(f"{verb} {n}" for verb, n in sorted(r.idle_by_verb.items()))
    print(f"  apiserver_request_total growth by verb: {verbs or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50", help="comma-separated N (default 10,50)")
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")
    parser.add_argument(
        "--scenarios", default="apps,agents", help="comma-separated: apps, agents (default both)"
    )
    parser.add_argument(
        "--resync", type=float, default=30.0, help="the operator's --resync (default 30, its own)"
    )
    parser.add_argument(
        "--cold-every",
        type=int,
        help="the operator's --cold-every (default: not given, its own default)",
    )
    parser.add_argument(
        "--idle", type=float, default=0.0, help="seconds of idle steady state to audit (default 0)"
    )
    parser.add_argument(
        "--no-controller-manager",
        action="store_true",
        help="no kube-controller-manager (no ReplicaSets or Pods: less load on a small machine)",
    )
    parser.add_argument(
        "--variants",
        default="default",
        help="';'-separated operator environments, e.g. 'default;MALLOC_ARENA_MAX=2'",
    )
    parser.add_argument(
        "--tracemalloc", type=Path, help="run the operator under tracemalloc; snapshots here"
    )
    args = parser.parse_args()
    variants = parse_variants(args.variants)
    ok, why = binaries_available()
    if not ok:
        print(why, file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results: list[Result] = []
    # Room for thousands of Services (the default /24 holds 254).
    cidr = "--service-cluster-ip-range=10.0.0.0/16"
    logs = REPO / "benchmarks" / "out"  # git-ignored
    logs.mkdir(parents=True, exist_ok=True)
    policy, audit_log = logs / "audit-policy.yaml", logs / "audit.log"
    policy.write_text(AUDIT_POLICY)
    audit_log.unlink(missing_ok=True)
    audit = [f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}"]
    audit += ["--audit-log-mode=batch", "--audit-log-maxsize=0"]
    plane = ControlPlane(
        extra_apiserver_args=[cidr, *audit],
        extra_controller_manager_args=[cidr],
        controller_manager=not args.no_controller_manager,
    )
    wanted = {s for s in args.scenarios.split(",") if s}
    with plane as cp:
        cp.apply_yaml(REPO / "crds" / "application.yaml")
        for size in sizes:
            scenarios = {
                "apps": [application(f"app-{i}", 5) for i in range(size)],
                "agents": [application("big", size)],
            }
            for scenario, docs in scenarios.items():
                if scenario not in wanted:
                    continue
                before = server_seconds(cp)
                baseline, objects = run_baseline(cp, docs)
                baseline_ms = mean_ms(before, server_seconds(cp))
                for env in variants:
                    label = describe_env(env)
                    suffix = "" if not env else "-" + re.sub(r"[^A-Za-z0-9]+", "_", label)
                    log = logs / f"operator-{scenario}-{size}{suffix}.log"
                    trace_dir = None
                    if args.tracemalloc is not None:
                        trace_dir = args.tracemalloc / f"{scenario}-{size}{suffix}"
                    before = server_seconds(cp)
                    run = run_operator_scenario(
                        cp, docs, log, resync=args.resync, cold_every=args.cold_every,
                        idle=args.idle, audit_log=audit_log,
                        env=env, trace_dir=trace_dir,
                    )  # fmt: skip
                    operator, rss, requests, idle_rss, by_verb, cpu, counts, marks = run
                    operator_ms = mean_ms(before, server_seconds(cp))
                    reconciled = counts[0]
                    results.append(
                        Result(
                            label, scenario, size, objects, operator, baseline, rss,
                            args.idle, requests, idle_rss, by_verb, *cpu, *counts,
                            rss_by_progress=marks, baseline_server_ms=baseline_ms,
                            operator_server_ms=operator_ms,
                        )
                    )  # fmt: skip
                    r = results[-1]
                    line = (
                        f"{scenario:>6} N={size:<4} [{label}] objects={objects:<5} "
                        f"operator={operator:7.2f}s plain-client={baseline:7.2f}s "
                        f"ratio={operator / baseline:5.2f} operator-peak-rss={rss:6.1f}MiB "
                        f"({rss * 1.048576:.1f} MB) "
                        f"operator-cpu={cpu[0]:.1f}s reconciles={reconciled} "
                        f"load={os.getloadavg()[0]:.1f}"
                    )
                    print(json.dumps(r.__dict__) if args.json else line, flush=True)
                    if not args.json:
                        marks_text = ", ".join(f"{k} {v} MiB" for k, v in marks.items())
                        print(f"  operator RSS when converged: {marks_text}", flush=True)
                        server = ", ".join(
                            f"{what} {baseline_ms.get(what, float('nan'))} / {ms}"
                            for what, ms in sorted(operator_ms.items())
                        )
                        print(
                            "  API server's mean ms per APPLY by resource and per ClusterIP "
                            f"allocation, plain client / operator: {server}",
                            flush=True,
                        )
                    if args.idle > 0 and not args.json:
                        print_idle(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Pod start on the real node: Application apply to Ready, and `mas-ctl serve` start in a pod.

Starts the node tier (tests/node: control plane, containerd, kubelet, scheduler, kube-proxy,
CoreDNS), `helm install`s the operator with the built image, then per round:

- **apply to Ready**: an Application of N echo agents (each deployed behind its Service) from
  create to ``Ready=True``, for N = 1 and N = 10; the baseline is N plain Deployments of the same
  image (`python -m http.server` with the same readiness probe settings) from create to every
  pod ready, measured in the same round, so the ratio shows what the operator and the runtime
  add over bare pods on this node;
- **serve start in the pod**: a pod that runs a small timer in the image: it starts
  `mas-ctl serve` (one echo agent) and polls its `/readyz` on loopback, printing the seconds to
  the first 200; the baseline is the same timer around `python -m http.server` polling `/`.

Usage (root, the node tier built; see tests/node/README.md)::

    .venv/bin/python benchmarks/node_start.py [--rounds 3] [--sizes 1,10]

Prints each round and the medians, with the ratios against the baselines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client as k8s  # noqa: E402
from tests.node.cluster import NodeCluster, node_available  # noqa: E402
from tests.node.support import CHART, eventually, helm, service_url  # noqa: E402

IMAGE = "ghcr.io/maslab/maslab:0.1.0"
PROBE = {"periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3}

TIMER = """
import os, subprocess, sys, time, urllib.request
if "DOC" in os.environ:
    open("/tmp/app.yaml", "w").write(os.environ["DOC"])
t0 = time.monotonic()
proc = subprocess.Popen(sys.argv[2:])
while proc.poll() is None:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=1) as r:
            if r.status == 200:
                break
    except OSError:
        time.sleep(0.02)
else:
    sys.exit(f"{sys.argv[2]} exited {proc.returncode} before {sys.argv[1]} answered")
print(f"ready-after {time.monotonic() - t0:.3f}", flush=True)
proc.terminate()
proc.wait()
"""


def application(name: str, namespace: str, size: int) -> dict[str, Any]:
    agents = {f"a{i}": {"spec": {"model": {"type": "echo"}}} for i in range(size)}
    endpoints = {
        f"a{i}": {
            "protocol": "a2a",
            "usage": "deploy",
            "url": service_url(name, f"a{i}", namespace, 8400 + i),
        }
        for i in range(size)
    }
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"agency": {"entry": "a0", "agents": agents}, "endpoints": endpoints},
    }


def plain_deployment(name: str) -> dict[str, Any]:
    container = {
        "name": "web",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "http.server", "8080", "--bind", "0.0.0.0"],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, **PROBE},
    }
    labels = {"bench": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def app_ready(custom: Any, namespace: str, name: str) -> bool:
    obj = custom.get_namespaced_custom_object(
        "infra.maslab.io", "v1", namespace, "applications", name
    )
    conds = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def deployments_ready(apps: Any, namespace: str, count: int) -> bool:
    items = apps.list_namespaced_deployment(namespace).items
    return len(items) == count and all((d.status.ready_replicas or 0) >= 1 for d in items)


def fresh_namespace(core: Any) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    return name


def time_apply(node: NodeCluster, size: int) -> tuple[float, float]:
    """(Application apply to Ready, plain Deployments create to ready) for ``size`` agents."""
    api = node.api_client()
    core, apps, custom = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.CustomObjectsApi(api)
    ns = fresh_namespace(core)
    t0 = time.monotonic()
    node.control_plane.apply_yaml(application("bench", ns, size))
    eventually(lambda: app_ready(custom, ns, "bench"), f"{size} agents Ready", timeout=900)
    measured = time.monotonic() - t0
    base_ns = fresh_namespace(core)
    t0 = time.monotonic()
    node.control_plane.apply_yaml(
        [plain_deployment(f"web{i}") for i in range(size)], namespace=base_ns
    )
    eventually(lambda: deployments_ready(apps, base_ns, size), f"{size} plain pods", timeout=900)
    baseline = time.monotonic() - t0
    for name in (ns, base_ns):
        core.delete_namespace(name)
    return measured, baseline


def timer_pod(name: str, url: str, command: list[str], doc: str = "") -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "timer",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", TIMER, url, *command],
    }
    if doc:
        container["env"] = [{"name": "DOC", "value": doc}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def pod_seconds(core: Any, ns: str, pod: dict[str, Any]) -> float:
    """Create the timer ``pod`` in ``ns``, wait for it to end, and read its ``ready-after``."""
    name = pod["metadata"]["name"]
    # A fresh namespace has no `default` ServiceAccount until the controller-manager makes it,
    # and the API refuses pods that name a missing one.
    eventually(lambda: core.read_namespaced_service_account("default", ns), f"{ns}'s account")
    core.create_namespaced_pod(ns, pod)

    def finished() -> bool:
        phase = core.read_namespaced_pod(name, ns).status.phase
        return phase in ("Succeeded", "Failed")

    eventually(finished, f"pod {name} done", timeout=300)
    log: str = core.read_namespaced_pod_log(name, ns)
    line = next((x for x in log.splitlines() if x.startswith("ready-after ")), None)
    if line is None:
        raise RuntimeError(f"pod {name} printed no ready-after line; its log:\n{log}")
    return float(line.split()[1])


SERVE_DOC = """apiVersion: infra.maslab.io/v1
kind: Application
metadata: {name: t}
spec:
  agency: {entry: a, agents: {a: {spec: {model: {type: echo}}}}}
  endpoints: {a: {protocol: a2a, usage: deploy, url: "http://127.0.0.1:8400"}}
"""


def time_serve(node: NodeCluster) -> tuple[float, float]:
    """(`mas-ctl serve` start to /readyz in a pod, `python -m http.server` start to / in a pod)."""
    core = k8s.CoreV1Api(node.api_client())
    ns = fresh_namespace(core)
    serve = ["mas-ctl", "serve", "-f", "/tmp/app.yaml", "--agent", "a", "--no-control"]
    pod = timer_pod("serve", "http://127.0.0.1:8400/readyz", serve, SERVE_DOC)
    measured = pod_seconds(core, ns, pod)
    base = ["python", "-m", "http.server", "8080", "--bind", "127.0.0.1"]
    baseline = pod_seconds(core, ns, timer_pod("plain", "http://127.0.0.1:8080/", base))
    core.delete_namespace(ns)
    return measured, baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1,10")
    args = parser.parse_args()
    ok, why = node_available()
    if not ok:
        print(f"node_start: cannot run here: {why}", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, list[tuple[float, float]]] = {}
    with NodeCluster() as node:
        done = helm(
            node.kubeconfig,
            "install",
            "mas",
            str(CHART),
            "-n",
            "mas-system",
            "--create-namespace",
            "--set",
            "replicaCount=1",
            "--wait",
            "--timeout",
            "10m",
        )
        if done.returncode != 0:
            print(f"node_start: helm install failed: {done.stderr}", file=sys.stderr)
            return 1
        for r in range(args.rounds):
            for size in sizes:
                pair = time_apply(node, size)
                results.setdefault(f"apply->Ready, {size} agent(s)", []).append(pair)
                print(
                    f"round {r + 1}: {size:>2} agent(s): Application {pair[0]:.2f}s, "
                    f"plain pods {pair[1]:.2f}s",
                    flush=True,
                )
            pair = time_serve(node)
            results.setdefault("serve start in the pod", []).append(pair)
            print(
                f"round {r + 1}: mas-ctl serve {pair[0]:.2f}s, http.server {pair[1]:.2f}s",
                flush=True,
            )
    print("\nmedians (ours / baseline = ratio):")
    for what, pairs in results.items():
        ours = statistics.median(p[0] for p in pairs)
        base = statistics.median(p[1] for p in pairs)
        print(f"  {what:<28} {ours:7.2f}s / {base:6.2f}s = {ours / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two nodes: pods on both, a drain that drops no request, a lost node that loses no task.

One two-node cluster (``two_nodes``) is shared by the module, in file order; each test leaves
both nodes Ready and schedulable. The module sorts before the one-node tests, so its cluster
is stopped before theirs starts (one node tier per machine).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from . import host
from .agency import pod_ready
from .cluster import NodeCluster
from .configs import FIRST, SECOND
from .support import eventually

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

NS = "twonode"
IMAGE = "ghcr.io/maslab/maslab:0.1.0"


def _web_pod(name: str, node: str) -> dict[str, Any]:
    """A pod of the project image serving HTTP on 8080, bound to ``node``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "web",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-m", "http.server", "8080", "--bind", "0.0.0.0"],
                    "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def core(two_nodes: NodeCluster) -> Any:
    api = k8s.CoreV1Api(two_nodes.api_client())
    api.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NS)))
    return api


def test_two_nodes_are_ready_labelled_and_route_pod_to_pod(
    two_nodes: NodeCluster, core: Any
) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert sorted(nodes) == ["masnode", "masnode-b"]
    for net in (FIRST, SECOND):
        labels = nodes[net.name].metadata.labels
        assert labels["kubernetes.io/hostname"] == net.name
        assert host.node_ready(two_nodes.api_client(), net.name)
    zones = {
        name: n.metadata.labels.get("topology.kubernetes.io/zone") for name, n in nodes.items()
    }
    assert zones == {"masnode": "zone-a", "masnode-b": "zone-b"}

    for net in (FIRST, SECOND):
        k8s.CoreV1Api(two_nodes.api_client()).create_namespaced_pod(
            NS, _web_pod(f"web-{net.name}", net.name)
        )

    def both_ready() -> dict[str, str]:
        pods = core.list_namespaced_pod(NS, label_selector="app=web").items
        ready = {p.spec.node_name: p.status.pod_ip for p in pods if pod_ready(p)}
        return ready if len(ready) == 2 else {}

    ips = eventually(both_ready, "a web pod Ready on each node")
    assert ips["masnode"].startswith("10.244.0.") and ips["masnode-b"].startswith("10.244.1.")
    # From the host to each node's pod, and from the first node's pod to the second's.
    for ip in ips.values():
        assert httpx.get(f"http://{ip}:8080/", timeout=10).status_code == 200
    code = (
        "import sys, urllib.request;print(urllib.request.urlopen(sys.argv[1], timeout=10).status)"
    )
    assert _exec(two_nodes, "web-masnode", code, f"http://{ips['masnode-b']}:8080/") == "200"
    core.delete_collection_namespaced_pod(NS, label_selector="app=web", grace_period_seconds=0)


def _exec(cluster: NodeCluster, pod: str, code: str, *args: str) -> str:
    from kubernetes.stream import stream

    api = k8s.CoreV1Api(cluster.api_client())  # stream() rewires the client it is given
    out: str = stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        NS,
        command=["python", "-c", code, *args],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    import gc
    import warnings

    with warnings.catch_warnings():  # the websocket leaves its socket to the collector
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    return out.strip()

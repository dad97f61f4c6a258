"""An agent pod's metrics port, scraped as Prometheus does: at the pod IP, from the host and a pod.

The port is the container port named ``metrics`` in the pod spec (what a PodMonitor selects),
read from the running pod, not assumed. It runs before the enforcer starts (file order): the
policies admit the metrics port only from ``spec.runtime.network_policy.metrics_namespace``.
"""

from __future__ import annotations

import httpx
import pytest

from .agency import Desk, exec_python

pytestmark = [pytest.mark.node, pytest.mark.timeout(300)]

# Run inside an agent's container: GET the url, print the status and the body.
SCRAPE = """
import sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        print(r.status)
        print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code)
"""
HELP_LINE = "# HELP maslab_turns_total "


def metrics_address(desk: Desk, agent: str) -> tuple[str, int]:
    [pod] = desk.pods(agent)
    [container] = pod.spec.containers
    [port] = [p.container_port for p in container.ports if p.name == "metrics"]
    return pod.status.pod_ip, port


@pytest.mark.parametrize("agent", ["concierge", "researcher"])
def test_the_metrics_port_answers_at_the_pod_ip(desk: Desk, agent: str) -> None:
    ip, port = metrics_address(desk, agent)
    response = httpx.get(f"http://{ip}:{port}/metrics", timeout=10)
    assert response.status_code == 200
    assert HELP_LINE in response.text
    assert response.headers["content-type"].startswith("text/plain")


def test_another_pod_scrapes_the_metrics_port(desk: Desk) -> None:
    ip, port = metrics_address(desk, "concierge")
    status, _, body = exec_python(
        desk, "researcher", SCRAPE, f"http://{ip}:{port}/metrics"
    ).partition("\n")
    assert status == "200"
    assert HELP_LINE in body


def test_metrics_stay_off_the_public_a2a_port(desk: Desk) -> None:
    [pod] = desk.pods("concierge")
    [container] = pod.spec.containers
    [a2a] = [p.container_port for p in container.ports if p.name == "a2a-http"]
    assert httpx.get(f"http://{pod.status.pod_ip}:{a2a}/metrics", timeout=10).status_code == 404

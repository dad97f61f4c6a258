"""The delegation graph's NetworkPolicies enforced on the node by kube-router.

The researcher does not delegate to the concierge, so its egress policy has no rule for the
concierge's pods; the concierge delegates to the researcher. The bridge CNI enforces nothing,
so the same connection is first shown to work without the enforcer (the test can fail), then
kube-router (firewall only) starts and the refusal is waited for.

kube-router refuses with ``REJECT --reject-with icmp-port-unreachable`` in the pod's
firewall chain (``KUBE-POD-FW-*``, reached from ``FORWARD`` after kube-proxy's DNAT of the
ClusterIP), so the connect fails at once with ``ConnectionRefusedError``, not a timeout.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from .agency import NS, Desk, a2a_client, ask, exec_python
from .fixtures import require_enforcer
from .support import eventually

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

# Run inside an agent's container (the image's Python): one TCP connect, its outcome printed.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as e:
    print("refused", type(e).__name__)
"""
REFUSED = "refused ConnectionRefusedError"  # kube-router's REJECT (module docstring)


def connect_from(desk: Desk, agent: str, target: str, port: int, *, pod_ip: bool = False) -> str:
    """What a TCP connect from ``agent``'s pod to ``target``'s ClusterIP (or pod IP) prints.

    The address comes from the API, not from DNS, so a refusal is the policy's and never a
    failed lookup (delegation over A2A below covers DNS). The ClusterIP is routed through
    the host after kube-proxy's DNAT; the pod IP is switched on the bridge.
    """
    if pod_ip:
        [pod] = desk.pods(target)
        host = pod.status.pod_ip
    else:
        host = desk.core.read_namespaced_service(f"{desk.name}-{target}", NS).spec.cluster_ip
    return exec_python(desk, agent, CONNECT, host, str(port))


def policies(desk: Desk) -> dict[str, Any]:
    api = k8s.NetworkingV1Api(desk.node.api_client())
    return {p.metadata.name: p for p in api.list_namespaced_network_policy(NS).items}


def becomes(desk: Desk, agent: str, target: str, port: int, outcome: str) -> None:
    """Wait until a connect from ``agent`` to ``target`` prints ``outcome`` (the last shown)."""

    def holds() -> bool:
        got = connect_from(desk, agent, target, port)
        assert got == outcome, f"{agent} -> {target}:{port} printed {got!r}"
        return True

    eventually(holds, f"{agent} -> {target}:{port} to print {outcome!r}")


async def test_an_agent_not_in_delegates_to_is_refused_and_a_delegate_admitted(
    desk: Desk,
) -> None:
    require_enforcer()
    desk.scripted()
    assert {"research-desk-concierge", "research-desk-researcher"} <= set(policies(desk))
    # Without an enforcer the bridge lets the researcher reach the concierge.
    assert connect_from(desk, "researcher", "concierge", 8401) == "connected"
    assert connect_from(desk, "researcher", "concierge", 8401, pod_ip=True) == "connected"

    desk.node.start_network_policy()
    becomes(desk, "researcher", "concierge", 8401, REFUSED)
    assert connect_from(desk, "researcher", "concierge", 8401, pod_ip=True) == REFUSED
    assert connect_from(desk, "concierge", "researcher", 8402) == "connected"
    assert connect_from(desk, "concierge", "researcher", 8402, pod_ip=True) == "connected"
    async with a2a_client(desk.card_url("concierge")) as client:
        assert await ask(client, "research policies") == "found: sources on policies"

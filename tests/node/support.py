"""What the node tier's tests share: helm, the example as deployed, cluster DNS from the host.

The host is not a pod, so it does not use the cluster's resolver; :class:`ClusterDNSTransport`
asks the node's CoreDNS (on the bridge address) for ``*.svc.cluster.local`` names and connects
to the ClusterIP it answers, which kube-proxy's iptables rules route to a pod. So an A2A client
on the host follows the URLs the cards advertise, exactly as a client in a pod does.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from .configs import CLUSTER_DOMAIN, GATEWAY

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mas-operator"
EXAMPLE = REPO / "examples" / "agency.yaml"
APP_GROUP, APP_VERSION, APP_PLURAL = "infra.maslab.io", "v1", "applications"
T = TypeVar("T")


def eventually(check: Callable[[], T | None], what: str, timeout: float = 240.0) -> T:
    """Poll ``check`` until it returns a truthy value (bounded; the node is slow under load)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as e:  # the last reason goes into the failure
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
        time.sleep(0.5)


# -- helm -----------------------------------------------------------------------------------


def helm_binary() -> Path | None:
    default = Path.home() / ".cache" / "maslab" / "helm" / "v3.19.0"
    path = Path(os.environ.get("MAS_HELM_DIR") or default) / "helm"
    return path if path.exists() else None


def helm(kubeconfig: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    binary = helm_binary()
    assert binary is not None, "helm is missing: scripts/build-helm (or set MAS_HELM_DIR)"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(kubeconfig.parent / "helm"),
    }
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


# -- the example, deployed -------------------------------------------------------------------


def service_url(app: str, agent: str, namespace: str, port: int) -> str:
    """The fully qualified in-cluster URL of a deployed agent's Service (benchmarks use it)."""
    return f"http://{app}-{agent}.{namespace}.svc.{CLUSTER_DOMAIN}:{port}"


def example_in_cluster(namespace: str) -> dict[str, Any]:
    """``examples/agency.yaml`` as shipped, with conformance Jobs switched on.

    Its deployed endpoints keep their laptop (loopback) urls: the operator advertises and
    routes them at the agents' Services (docs/operator.md, "In-cluster URLs"), so the same
    document runs with ``run-mas`` and in the cluster.
    """
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["conformance"] = {"enabled": True}
    doc["metadata"]["namespace"] = namespace
    return doc


def scripted_concierge(doc: dict[str, Any]) -> dict[str, Any]:
    """The concierge answering ``research <topic>`` by delegating to the researcher."""
    spec = doc["spec"]["agency"]["agents"]["concierge"]["spec"]
    spec["model"] = {
        "type": "scripted",
        "params": {
            "rules": [
                {
                    "match": "^research (?P<topic>.+)",
                    "delegate": {"to": "researcher", "message": "sources on {topic}"},
                    "reply": "found: {result}",
                }
            ],
            "default": {"reply": "I heard: {input}"},
        },
    }
    return doc


# -- cluster DNS from the host ---------------------------------------------------------------


def resolve(name: str, server: str = GATEWAY, timeout: float = 3.0) -> str:
    """The first A record of ``name`` from the DNS server at ``server``:53 (RFC 1035).

    A ``<service>.<namespace>.svc`` name (what the operator advertises) is completed with the
    cluster domain, as a pod's DNS search path completes it.
    """
    if name.endswith(".svc"):
        name = f"{name}.{CLUSTER_DOMAIN}"
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(query, (server, 53))
        data = s.recv(4096)
    rid, flags, _qd, answers = struct.unpack(">HHHH", data[:8])
    if rid != ident or flags & 0x000F or not answers:
        raise LookupError(f"{name}: no A record from {server} (rcode {flags & 0x000F})")
    pos = 12 + len(question) + 4
    for _ in range(answers):
        pos += 2 if data[pos] & 0xC0 == 0xC0 else len(data[pos:].split(b"\0", 1)[0]) + 1
        rtype, _cls, _ttl, length = struct.unpack(">HHIH", data[pos : pos + 10])
        pos += 10
        if rtype == 1 and length == 4:
            return socket.inet_ntoa(data[pos : pos + 4])
        pos += length
    raise LookupError(f"{name}: no A record in the answer from {server}")


class ClusterDNSTransport(httpx.AsyncBaseTransport):
    """httpx transport that resolves cluster names with the node's DNS; the rest as usual."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host.endswith((".svc", f".svc.{CLUSTER_DOMAIN}")):
            request.url = request.url.copy_with(host=resolve(host))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

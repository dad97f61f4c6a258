"""Host-side steps of the node tier: commands, sysctls, probes, and the cleanup of containers."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.envtest.controlplane import _Process as Child

__all__ = [
    "Child",
    "http_ok",
    "https_ok",
    "kill_containers",
    "kill_shims",
    "node_ready",
    "publish_apiserver",
    "remove_kube_chains",
    "run",
    "sysctl",
    "unmount_under",
]


def run(*argv: str, check: bool = True) -> str:
    """Run a command; on failure (when ``check``) raise with its output."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def sysctl(key: str, value: str) -> str:
    """Set ``/proc/sys/<key>``; return the value it had."""
    path = Path("/proc/sys") / key
    old = path.read_text().strip()
    if old != value:
        path.write_text(value)
    return old


def _get_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as e:  # e.g. 503 while starting: close its socket now
        e.close()
        return False


def http_ok(port: int, path: str) -> bool:
    return _get_ok(f"http://127.0.0.1:{port}{path}")


def https_ok(port: int, path: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return _get_ok(f"https://127.0.0.1:{port}{path}", ctx)


def node_ready(api_client: Any, name: str) -> bool:
    from kubernetes import client

    node = client.CoreV1Api(api_client).read_node(name)
    conds = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def publish_apiserver(api_client: Any, address: str, server_url: str) -> None:
    """Point the ``kubernetes`` Service at ``address`` (the API server's port), for pods.

    The envtest API server advertises 127.0.0.1 and runs no endpoint reconciler, since a
    loopback endpoint is invalid; pods reach it at the bridge address instead.
    """
    from kubernetes import client

    port = urlsplit(server_url).port
    assert port is not None
    meta = client.V1ObjectMeta(
        name="kubernetes", labels={"kubernetes.io/service-name": "kubernetes"}
    )
    slice_ = client.V1EndpointSlice(
        metadata=meta,
        address_type="IPv4",
        endpoints=[client.V1Endpoint(addresses=[address], conditions={"ready": True})],
        ports=[client.DiscoveryV1EndpointPort(name="https", port=port, protocol="TCP")],
    )
    client.DiscoveryV1Api(api_client).create_namespaced_endpoint_slice("default", slice_)


def _ctr(socket: Path, *args: str, check: bool = False) -> str:
    return run("ctr", "--address", str(socket), "-n", "k8s.io", *args, check=check)


def kill_containers(socket: Path) -> None:
    """SIGKILL and delete every task and container of the node's containerd."""
    for task in _ctr(socket, "tasks", "ls", "-q").split():
        _ctr(socket, "tasks", "kill", "-s", "SIGKILL", task)
    for task in _ctr(socket, "tasks", "ls", "-q").split():
        _ctr(socket, "tasks", "delete", "-f", task)
    for container in _ctr(socket, "containers", "ls", "-q").split():
        _ctr(socket, "containers", "delete", container)


def kill_shims(socket: Path) -> None:
    """SIGKILL the runc shims this node's containerd started (their argv names its socket)."""
    needle = str(socket).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in argv and needle in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def unmount_under(root: Path) -> None:
    """Lazily unmount every mount below ``root`` (rootfs, shm, netns), deepest first."""
    prefix = str(root.resolve()) + "/"
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def remove_kube_chains() -> None:
    """Delete the ``KUBE-*`` iptables chains the kubelet leaves (its firewall and canaries).

    Runs after ``kube-proxy --cleanup``; no other Kubernetes runs on this machine.
    """
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            rules = run(tool, "-t", table, "-S", check=False).splitlines()
            for rule in rules:
                parts = shlex.split(rule)
                if (
                    parts[:1] == ["-A"]
                    and "-j" in parts
                    and parts[parts.index("-j") + 1].startswith("KUBE-")
                    and not parts[1].startswith("KUBE-")
                ):
                    run(tool, "-t", table, "-D", *parts[1:], check=False)
            chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
            for chain in chains:
                run(tool, "-t", table, "-F", chain, check=False)
            for chain in chains:
                run(tool, "-t", table, "-X", chain, check=False)


def remove_kube_router_ipsets() -> None:
    """Destroy the ipsets kube-router's policies leave (``KUBE-SRC-*``, ``KUBE-DST-*``).

    ``kube-router --cleanup-config`` (v2.1.0) removes its chains but was seen to leave the
    sets. Runs after :func:`remove_kube_chains`, when no rule can still reference one; no
    other Kubernetes runs on this machine.
    """
    for name in run("ipset", "list", "-n", check=False).split():
        if name.startswith(("KUBE-SRC-", "KUBE-DST-")):
            run("ipset", "destroy", name, check=False)

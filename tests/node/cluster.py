"""Real nodes beside the envtest control plane: containerd, kubelet, scheduler, proxy, DNS.

``NodeCluster`` starts the envtest :class:`~envtest.controlplane.ControlPlane` (its API
server listening on every address, so pods reach it through the ``kubernetes`` Service),
then containerd (runc, cgroupfs, the bridge CNI), CoreDNS, kube-scheduler, kube-proxy
(iptables) and a kubelet registered as node ``masnode``, and imports the pause image and
the project image into containerd. Everything runs as child processes with a work
directory; :meth:`NodeCluster.stop` kills the containers, removes the bridge, the route and
kube-proxy's iptables chains, and restores the two sysctls it set::

    with NodeCluster() as node:
        api = kubernetes.client.CoreV1Api(node.api_client())

``NodeCluster(nodes=2)`` adds a second node, ``masnode-b`` (:data:`configs.SECOND`): its
own containerd (root, state, socket), kubelet, bridge ``masnode1`` and pod CIDR
10.244.1.0/24. The two nodes share the host's network namespace, so the host routes
between the two bridges (both are its own addresses) and one kube-proxy, CoreDNS and
scheduler serve both, as a cluster's add-ons would. Each node is in a zone of its own
(``topology.kubernetes.io/zone``: zone-a, zone-b). The nodes' Leases are short and the
node lifecycle controller's grace period too, so that :meth:`NodeCluster.stop_node` (a node
lost: its kubelet, containers and containerd killed) is seen within seconds;
:meth:`NodeCluster.start_node` brings it back.

Needs root. :func:`node_available` says what is missing and how to get it.
Environment: ``MAS_NODE_DIR`` (the binaries, default what ``scripts/build-node`` builds),
``MAS_NODE_IMAGE_ARCHIVE`` (the image, default what ``scripts/build-image`` built),
``MAS_ENVTEST_KEEP=1`` keeps the work directory and its logs.
"""

from __future__ import annotations

import fcntl
import gc
import logging
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.envtest.controlplane import ControlPlane, binaries_available, free_port

from . import configs, host
from .configs import CLUSTER_CIDR, FIRST, GATEWAY, NODE_NAME, SECOND, SERVICE_CIDR, Layout, NodeNet

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
NODE_BINARIES = ("kubelet", "kube-scheduler", "kube-proxy", "coredns")
ENFORCER = "kube-router"
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ipset", "ip")
LOCK = Path("/run/maslab-node.lock")
CACHE = Path.home() / ".cache" / "maslab" / "node"
# The node lifecycle controller on two nodes: check every second, and call a node whose
# Lease (10 s, renewed every 2.5 s) has not been renewed for 12 s unreachable.
LEASE_SECONDS = 10
NODE_MONITOR_ARGS = ("--node-monitor-period=1s", "--node-monitor-grace-period=12s")


class NodeError(RuntimeError):
    """The node could not be started (the message names the step and has log tails)."""


def node_binaries_dir() -> Path:
    env = os.environ.get("MAS_NODE_DIR")
    return Path(env) if env else CACHE / "bin-v1.34.4"


def image_archive() -> Path | None:
    env = os.environ.get("MAS_NODE_IMAGE_ARCHIVE")
    if env:
        return Path(env)
    found = sorted(CACHE.glob("image-*.docker.tar"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def node_available() -> tuple[bool, str]:
    """``(True, "")`` when this machine can run the node tier, else ``(False, why and how)``."""
    ok, why = binaries_available()
    if not ok:
        return False, why
    if os.geteuid() != 0:
        return False, "the node tier needs root (containerd, network namespaces, iptables)"
    missing = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if not (Path(configs.CNI_BIN_DIR) / "bridge").exists():
        missing.append(f"{configs.CNI_BIN_DIR}/bridge")
    if missing:
        return False, (
            f"missing host tools: {', '.join(missing)}; run scripts/install-system-deps "
            "(containerd, runc, containernetworking-plugins, iptables)"
        )
    if not Path("/sys/fs/cgroup").is_dir() or not Path("/proc/sys/net/bridge").is_dir():
        return False, "no cgroup file system or no br_netfilter: this machine cannot run pods"
    bins = node_binaries_dir()
    absent = [b for b in (*NODE_BINARIES, "pause.docker.tar") if not (bins / b).exists()]
    if absent:
        return False, (
            f"node binaries missing in {bins}: {', '.join(absent)}; build them with "
            "scripts/build-node (or set MAS_NODE_DIR)"
        )
    archive = image_archive()
    if archive is None or not archive.exists():
        return False, (
            "no project image archive: build it with scripts/build-image "
            "(or set MAS_NODE_IMAGE_ARCHIVE)"
        )
    return True, ""


class NodeCluster:
    """The control plane plus one real node (or two, ``nodes=2``); a context manager."""

    _running: NodeCluster | None = None  # one per process: they share bridge names and a lock

    def __init__(self, *, start_timeout: float = 240.0, nodes: int = 1) -> None:
        if nodes not in (1, 2):
            raise ValueError(f"nodes must be 1 or 2, not {nodes!r}")
        self.start_timeout = start_timeout
        self.nets: tuple[NodeNet, ...] = (
            (FIRST,) if nodes == 1 else (replace(FIRST, zone="zone-a"), SECOND)
        )
        self.control_plane = ControlPlane(
            # Pods reach the API server at the bridge address (the `kubernetes` EndpointSlice).
            extra_apiserver_args=[
                "--bind-address=0.0.0.0",
                "--kubelet-preferred-address-types=InternalIP",
            ],
            extra_controller_manager_args=NODE_MONITOR_ARGS if nodes == 2 else (),
        )
        self.bins = node_binaries_dir()
        self.layout: Layout | None = None  # the first node's
        self.layouts: dict[str, Layout] = {}  # every node's, by node name
        self._procs: list[host.Child] = []
        self._stopped: list[host.Child] = []  # processes of nodes stopped on purpose
        self._lock_fd: int | None = None
        self._sysctls: dict[str, str] = {}
        self._network_policy = False
        self._started = False

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients -----------------------------------------------------------------------

    def api_client(self) -> Any:
        return self.control_plane.api_client()

    def env(self) -> dict[str, str]:
        return self.control_plane.env()

    @property
    def kubeconfig(self) -> Path:
        assert self.control_plane.kubeconfig_path is not None
        return self.control_plane.kubeconfig_path

    @property
    def node_names(self) -> list[str]:
        return [net.name for net in self.nets]

    def logs(self) -> dict[str, Path]:
        procs = (*self._stopped, *self._procs)
        return {**self.control_plane.logs, **{p.name: p.log_path for p in procs}}

    def exited(self) -> list[str]:
        """The node's processes that have exited, with their exit codes and log tails."""
        return [
            f"{p.name} exited with {code}:\n{p.tail(20)}"
            for p in self._procs
            if (code := p.exited()) is not None
        ]

    def log_lines(self, name: str, needle: str, limit: int = 20) -> list[str]:
        """The last ``limit`` lines of process ``name``'s log that contain ``needle``."""
        path = self.logs().get(name)
        if path is None or not path.exists():
            return []
        with path.open(errors="replace") as f:
            found = [line.rstrip() for line in f if needle in line]
        return found[-limit:]

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> NodeCluster:
        ok, why = node_available()
        if not ok:
            raise NodeError(why)
        if NodeCluster._running is not None:  # the lock would wait for ourselves forever
            raise NodeError(
                f"a node cluster ({', '.join(NodeCluster._running.node_names)}) already runs "
                "in this process: stop it before starting another"
            )
        NodeCluster._running = self
        self._lock_fd = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)  # one node per machine: one bridge name
        self._started = True
        deadline = time.monotonic() + self.start_timeout
        try:
            self._network_up()
            self.control_plane.start()
            work = self.control_plane.work_dir
            assert work is not None
            two = len(self.nets) == 2
            for net in self.nets:
                self.layouts[net.name] = Layout(
                    work=work / f"node{net.suffix}",
                    kubeconfig=self.kubeconfig,
                    kubelet_port=free_port(),
                    kubelet_healthz_port=free_port(),
                    scheduler_port=free_port(),
                    proxy_healthz_port=free_port(),
                    proxy_metrics_port=free_port(),
                    dns_health_port=free_port(),
                    dns_ready_port=free_port(),
                    net=net,
                    cluster_cidr=CLUSTER_CIDR if two else net.pod_cidr,
                    lease_seconds=LEASE_SECONDS if two else None,
                )
            self.layout = self.layouts[NODE_NAME]
            for lay in self.layouts.values():
                self._write_configs(lay)
            host.publish_apiserver(self.api_client(), GATEWAY, self.control_plane.server_url)
            for lay in self.layouts.values():
                self._start_containerd(lay, deadline)
            self._start_dns(deadline)
            self._start_scheduler(deadline)
            for lay in self.layouts.values():
                self._start_kubelet(lay, deadline)
            self._start_proxy(deadline)  # its /healthz waits for the Node object
        except BaseException:
            self.stop()
            raise
        # Polls of servers still starting leave sockets to the garbage collector: collect
        # them now, quietly, so that no test is blamed for them (as ControlPlane does).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for p in self._procs:
            if p.name.startswith("kubelet"):
                p.stop()
        for lay in self.layouts.values():
            if lay.containerd_socket.exists():
                host.kill_containers(lay.containerd_socket)
        for p in reversed(self._procs):
            p.stop()
        for lay in self.layouts.values():
            host.kill_shims(lay.containerd_socket)
            host.unmount_under(lay.work)
        self._network_down()
        self.control_plane.stop()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        NodeCluster._running = None

    # -- a node lost and back ----------------------------------------------------------

    def _node_procs(self, name: str) -> list[host.Child]:
        suffix = self.layouts[name].net.suffix
        return [p for p in self._procs if p.name in (f"kubelet{suffix}", f"containerd{suffix}")]

    def stop_node(self, name: str) -> None:
        """Lose node ``name`` outright: SIGKILL its kubelet, its containers and containerd.

        Nothing tells the API server: the node lifecycle controller finds out when the
        node's Lease is not renewed. Its bridge stays (the host's other services are
        reached at the first node's address), with no pod behind it.
        """
        lay = self.layouts[name]
        procs = self._node_procs(name)
        for p in procs:
            if p.name.startswith("kubelet") and p.popen is not None:
                p.popen.kill()
        host.kill_containers(lay.containerd_socket)
        for p in procs:
            if p.popen is not None:
                p.popen.kill()
            p.stop()
            self._procs.remove(p)
            self._stopped.append(p)
        host.kill_shims(lay.containerd_socket)
        host.unmount_under(lay.work)  # the pods' network namespaces go, with their veths

    def start_node(self, name: str, timeout: float = 240.0) -> None:
        """Start a node :meth:`stop_node` stopped again (same containerd store, images kept)."""
        lay = self.layouts[name]
        deadline = time.monotonic() + timeout
        self._start_containerd(lay, deadline, import_images=False)
        self._start_kubelet(lay, deadline)

    # -- steps -------------------------------------------------------------------------

    def _network_up(self) -> None:
        for key in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
            self._sysctls[key] = host.sysctl(key, "1")
        for net in self.nets:
            host.run("ip", "link", "del", net.bridge, check=False)  # a crashed run's leftover
            # Its own MAC, never a port's (configs.NodeNet.bridge_mac).
            host.run("ip", "link", "add", net.bridge, "address", net.bridge_mac, "type", "bridge")
            host.run("ip", "addr", "add", f"{net.gateway}/24", "dev", net.bridge)
            host.run("ip", "link", "set", net.bridge, "up")
        # The host reaches ClusterIPs through the bridge (kube-proxy's OUTPUT rules DNAT them).
        host.run("ip", "route", "replace", SERVICE_CIDR, "dev", FIRST.bridge, "src", GATEWAY)

    def _network_down(self) -> None:
        host.run("ip", "route", "del", SERVICE_CIDR, check=False)
        for net in self.nets:
            host.run("ip", "link", "del", net.bridge, check=False)
        proxy = self.bins / "kube-proxy"
        if proxy.exists():
            host.run(str(proxy), "--cleanup", check=False)
        enforced, self._network_policy = self._network_policy, False
        if enforced:
            host.run(str(self.bins / ENFORCER), "--cleanup-config", check=False)
        host.remove_kube_chains()
        if enforced:
            host.remove_kube_router_ipsets()
        for key, value in self._sysctls.items():
            host.sysctl(key, value)
        self._sysctls.clear()

    def _write_configs(self, lay: Layout) -> None:
        for d in ("containerd", "cni", "cni-ipam", "kubelet", "logs"):
            (lay.work / d).mkdir(parents=True, exist_ok=True)
        (lay.work / "containerd.toml").write_text(configs.containerd_config(lay))
        (lay.cni_conf_dir / "10-masnode.conflist").write_text(configs.cni_config(lay))
        (lay.work / "kubelet.yaml").write_text(configs.kubelet_config(lay))
        (lay.work / "kube-proxy.yaml").write_text(configs.kube_proxy_config(lay))
        (lay.work / "Corefile").write_text(configs.corefile(lay))
        (lay.work / "resolv.conf").write_text(configs.resolv_conf())

    def _spawn(self, name: str, *argv: str, lay: Layout | None = None) -> host.Child:
        lay = lay or self.layout
        assert lay is not None
        child = host.Child(name, list(argv), lay.work / "logs" / f"{name}.log", lay.work)
        self._procs.append(child)
        child.start()
        return child

    def _wait(
        self, child: host.Child, deadline: float, what: str, check: Callable[[], bool]
    ) -> None:
        last: object = None
        while True:
            if child.exited() is not None:
                raise NodeError(f"{child.name} exited while waiting for {what}:\n{child.tail()}")
            try:
                if check():
                    return
            except Exception as e:  # the last reason goes into the error
                last = e
            if time.monotonic() > deadline:
                raise NodeError(
                    f"timed out waiting for {what} (last error: {last!r}):\n{child.tail()}"
                )
            time.sleep(0.2)

    def _start_containerd(
        self, lay: Layout, deadline: float, *, import_images: bool = True
    ) -> None:
        lay.containerd_socket.unlink(missing_ok=True)  # a killed containerd's, on a restart
        child = self._spawn(
            f"containerd{lay.net.suffix}",
            "containerd",
            "--config",
            str(lay.work / "containerd.toml"),
            lay=lay,
        )
        self._wait(child, deadline, "the containerd socket", lay.containerd_socket.exists)
        if not import_images:
            return
        archive = image_archive()
        assert archive is not None
        for tar in (self.bins / "pause.docker.tar", archive):
            host.run(
                "ctr",
                "--address",
                str(lay.containerd_socket),
                "-n",
                "k8s.io",
                "images",
                "import",
                str(tar),
            )

    def _start_dns(self, deadline: float) -> None:
        lay = self.layout
        assert lay is not None
        child = self._spawn(
            "coredns", str(self.bins / "coredns"), "-conf", str(lay.work / "Corefile")
        )
        self._wait(
            child, deadline, "CoreDNS /ready", lambda: host.http_ok(lay.dns_ready_port, "/ready")
        )

    def _start_scheduler(self, deadline: float) -> None:
        lay = self.layout
        assert lay is not None
        kc = str(lay.kubeconfig)
        child = self._spawn(
            "kube-scheduler",
            str(self.bins / "kube-scheduler"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={lay.scheduler_port}",
            "--leader-elect=false",
        )
        self._wait(
            child,
            deadline,
            "kube-scheduler /healthz",
            lambda: host.https_ok(lay.scheduler_port, "/healthz"),
        )

    def _start_proxy(self, deadline: float) -> None:
        lay = self.layout
        assert lay is not None
        child = self._spawn(
            "kube-proxy", str(self.bins / "kube-proxy"), f"--config={lay.work / 'kube-proxy.yaml'}"
        )
        self._wait(
            child,
            deadline,
            "kube-proxy /healthz",
            lambda: host.http_ok(lay.proxy_healthz_port, "/healthz"),
        )

    def start_network_policy(self, timeout: float = 120.0) -> None:
        """Run kube-router as the NetworkPolicy enforcer (firewall only: no routing, no proxy)."""
        lay = self.layout
        assert lay is not None
        port = free_port()
        self._network_policy = True
        child = self._spawn(
            "kube-router",
            str(self.bins / ENFORCER),
            f"--kubeconfig={lay.kubeconfig}",
            f"--hostname-override={NODE_NAME}",  # pods of the first node only
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--health-port={port}",
            "--metrics-port=0",
        )
        self._wait(
            child,
            time.monotonic() + timeout,
            "kube-router /healthz",
            lambda: host.http_ok(port, "/healthz"),
        )

    def _start_kubelet(self, lay: Layout, deadline: float) -> None:
        net = lay.net
        labels = [f"--node-labels=topology.kubernetes.io/zone={net.zone}"] if net.zone else []
        child = self._spawn(
            f"kubelet{net.suffix}",
            str(self.bins / "kubelet"),
            f"--config={lay.work / 'kubelet.yaml'}",
            f"--kubeconfig={lay.kubeconfig}",
            f"--root-dir={lay.work / 'kubelet'}",
            f"--hostname-override={net.name}",
            f"--node-ip={net.gateway}",
            *labels,
            "--v=2",  # the sync loop's ADD/DELETE and the pod workers' steps, for diagnosis
            lay=lay,
        )
        self._wait(
            child,
            deadline,
            f"node {net.name} Ready",
            lambda: host.node_ready(self.api_client(), net.name),
        )

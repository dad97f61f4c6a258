"""Configuration files of the node tier's processes, as pure functions of a :class:`Layout`.

Everything of a node lives under its work directory; the only host-wide state is each node's
bridge, the route to the Service CIDR and kube-proxy's iptables chains, which
:mod:`tests.node.cluster` removes on teardown. A node's network (name, bridge, pod CIDR,
address, zone) is a :class:`NodeNet`: :data:`FIRST` is the one-node tier's, :data:`SECOND`
the node the two-node layout adds beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.envtest.controlplane import SERVICE_CLUSTER_IP_RANGE as SERVICE_CIDR

POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"  # the bridge's address: node IP, cluster DNS, the API server for pods
BRIDGE = "masnode0"
NODE_NAME = "masnode"
CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "maslab.local/pause:1"
CNI_BIN_DIR = "/usr/lib/cni"
# Two nodes: both pod CIDRs, the range pods route through their bridge and kube-proxy calls
# the cluster's own traffic.
CLUSTER_CIDR = "10.244.0.0/16"


@dataclass(frozen=True)
class NodeNet:
    """One node's name and network: its bridge carries ``gateway``, its node IP."""

    name: str
    bridge: str
    pod_cidr: str
    gateway: str
    zone: str | None = None  # the node's topology.kubernetes.io/zone label
    suffix: str = ""  # added to its processes' names (logs) and its work directory

    @property
    def bridge_mac(self) -> str:
        """The bridge's own MAC address, set when it is made (locally administered, from the
        gateway's address). A Linux bridge whose address was never set takes the lowest MAC
        of its ports and changes it as pods come and go; the pods on it still hold the old
        one for their gateway and their packets to the host (PostgreSQL, the API server,
        replies to the tests' client) are dropped until they resolve it again, for tens of
        seconds: a drain cost a turn that way (tests/node/README.md)."""
        octets = (int(part) for part in self.gateway.split("."))
        return "02:00:" + ":".join(f"{octet:02x}" for octet in octets)


FIRST = NodeNet(NODE_NAME, BRIDGE, POD_CIDR, GATEWAY)
SECOND = NodeNet("masnode-b", "masnode1", "10.244.1.0/24", "10.244.1.1", "zone-b", "-b")


@dataclass(frozen=True)
class Layout:
    """Paths and ports of one node; ``work`` holds all of it."""

    work: Path
    kubeconfig: Path
    kubelet_port: int
    kubelet_healthz_port: int
    scheduler_port: int
    proxy_healthz_port: int
    proxy_metrics_port: int
    dns_health_port: int
    dns_ready_port: int
    net: NodeNet = FIRST
    # The pod CIDRs of every node: POD_CIDR alone on one node, CLUSTER_CIDR on two.
    cluster_cidr: str = POD_CIDR
    # Seconds of the node's Lease (None: the kubelet's default, 40 s); short on two nodes,
    # so that the node lifecycle controller sees a lost node soon.
    lease_seconds: int | None = None

    @property
    def containerd_socket(self) -> Path:
        return self.work / "containerd" / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.work / "cni"


def containerd_config(lay: Layout) -> str:
    """containerd 1.6 (config version 2): CRI with runc, cgroupfs and the bridge CNI."""
    root = lay.work / "containerd"
    return f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
[grpc]
  address = "{lay.containerd_socket}"
[ttrpc]
  address = "{root / "ttrpc.sock"}"
[debug]
  address = "{root / "debug.sock"}"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  # Network namespaces under the work directory, not the host's /var/run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{lay.cni_conf_dir}"
"""


def cni_config(lay: Layout) -> str:
    """A bridge network with host-local IPAM; hairpin so a pod reaches its own Service.

    A pod routes the Services and, with two nodes, the other node's pods through its bridge
    (the host forwards between the two bridges); nothing else.
    """
    net = lay.net
    routes = [{"dst": SERVICE_CIDR}]
    if lay.cluster_cidr != net.pod_cidr:
        routes.append({"dst": lay.cluster_cidr})
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": net.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": net.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": net.pod_cidr, "gateway": net.gateway}]],
                        # No default route: pod traffic stays on the nodes.
                        "routes": routes,
                        "dataDir": str(lay.work / "cni-ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


def kubelet_config(lay: Layout) -> str:
    """Settings that work in a VM with cgroup v1 and a shared disk (no eviction, no image GC)."""
    cfg: dict[str, object] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": lay.net.gateway,
        "port": lay.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": lay.kubelet_healthz_port,
        "containerRuntimeEndpoint": f"unix://{lay.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failCgroupV1": False,
        "failSwapOn": False,
        "podCIDR": lay.net.pod_cidr,
        "clusterDNS": [GATEWAY],  # CoreDNS runs once, on the first node's bridge
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(lay.work / "resolv.conf"),
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        # On, as on any real node: the node reports its ephemeral-storage, which the
        # operator's and the agents' pods request (off, every such pod stays Pending with
        # "Insufficient ephemeral-storage").
        "localStorageCapacityIsolation": True,
        "staticPodPath": "",
        "maxPods": 60,
        "shutdownGracePeriod": "0s",
        # With cgroupsPerQOS off there are no pod cgroups, and kubelet v1.34.4's in-place
        # resize (beta, on by default) dereferences the pod cgroup's memory config it then
        # does not get: a pod deleted with grace 0 just after its container started ("Missing
        # actuated resource record") made SyncPod resize it, and the kubelet died of a nil
        # pointer in doPodResizeAction. Nothing here resizes pods in place.
        "featureGates": {"InPlacePodVerticalScaling": False},
    }
    if lay.lease_seconds is not None:
        # The Lease is renewed every quarter of its duration; the status is posted as often.
        cfg["nodeLeaseDurationSeconds"] = lay.lease_seconds
        cfg["nodeStatusUpdateFrequency"] = "2s"
    return yaml.safe_dump(cfg, sort_keys=False)


def kube_proxy_config(lay: Layout) -> str:
    cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": lay.cluster_cidr,
        "hostnameOverride": lay.net.name,
        "bindAddress": lay.net.gateway,
        "healthzBindAddress": f"127.0.0.1:{lay.proxy_healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{lay.proxy_metrics_port}",
        "clientConnection": {"kubeconfig": str(lay.kubeconfig)},
        # Leave the host's conntrack sysctls alone (they are not ours to raise).
        "conntrack": {"maxPerCore": 0, "min": 0},
    }
    return yaml.safe_dump(cfg, sort_keys=False)


def corefile(lay: Layout) -> str:
    """Cluster DNS on the bridge address: Services and pods of cluster.local, nothing else."""
    return f""".:53 {{
    bind {GATEWAY}
    errors
    health 127.0.0.1:{lay.dns_health_port}
    ready 127.0.0.1:{lay.dns_ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {lay.kubeconfig} envtest
        pods insecure
    }}
    cache 5
}}
"""


def resolv_conf() -> str:
    return f"nameserver {GATEWAY}\n"

"""Configuration files of the node tier's processes, as pure functions of a :class:`Layout`.

Everything lives under one work directory; the only host-wide state is the bridge, its
route to the Service CIDR and kube-proxy's iptables chains, which :mod:`tests.node.cluster`
removes on teardown.
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
    """A bridge network with host-local IPAM; hairpin so a pod reaches its own Service."""
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": "masnode",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                        # Services only: no default route, so pod traffic stays on this node.
                        "routes": [{"dst": SERVICE_CIDR}],
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
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,
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
        "podCIDR": POD_CIDR,
        "clusterDNS": [GATEWAY],
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
    return yaml.safe_dump(cfg, sort_keys=False)


def kube_proxy_config(lay: Layout) -> str:
    cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": NODE_NAME,
        "bindAddress": GATEWAY,
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

"""The deployed example on the node: the helm release, the Application, an A2A client.

``operator_release`` and ``desk`` (session fixtures in conftest.py) follow the README: `helm
install` of charts/mas-operator with the built image, then the example Application applied
(server-side, as `kubectl apply --server-side` does) and waited for until Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import re
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse
from kubernetes import client as k8s

from . import host
from .cluster import NodeCluster
from .support import (
    APP_GROUP,
    APP_PLURAL,
    APP_VERSION,
    CHART,
    ClusterDNSTransport,
    eventually,
    example_in_cluster,
    helm,
    resolve,
    scripted_concierge,
)

RELEASE, OPERATOR_NS, NS = "mas", "mas-system", "research"


@dataclass
class Desk:
    node: NodeCluster
    name: str
    doc: dict[str, Any]

    def __post_init__(self) -> None:
        api = self.node.api_client()  # one client (one connection pool) for the session
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def app(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            APP_GROUP, APP_VERSION, NS, APP_PLURAL, self.name
        )
        return obj

    def condition(self, type_: str) -> dict[str, Any] | None:
        conds = (self.app().get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == type_), None)

    def wait_condition(self, type_: str, status: str = "True", timeout: float = 300) -> None:
        def holds() -> bool:
            c = self.condition(type_)
            return c is not None and c["status"] == status

        eventually(holds, f"{type_}={status} on {self.name}: {self.condition(type_)}", timeout)

    def ready_at(self, generation: int) -> bool:
        """Ready=True for ``generation`` (or later) with every agent pod ready."""
        ready = self.condition("Ready") or {}
        pods = [p for agent in ("concierge", "researcher") for p in self.pods(agent)]
        return bool(
            ready.get("status") == "True"
            and (ready.get("observedGeneration") or 0) >= generation
            and pods
            and all(pod_ready(p) for p in pods)
        )

    def apply(self, doc: dict[str, Any]) -> int:
        """Server-side apply of the Application (`kubectl apply --server-side`); its generation."""
        self.node.control_plane.apply_yaml(doc, field_manager="kubectl")
        self.doc = doc
        generation: int = self.app()["metadata"]["generation"]
        return generation

    def scripted(self) -> None:
        """The concierge delegating ``research <topic>`` to the researcher, rolled out and Ready.

        Ready is the new pods' readiness; the old ones drain in their preStop while kube-proxy
        moves the Services off them, and a request sent before it has would be answered by an
        old pod. So this also waits until each Service's iptables rules lead to the ready pods
        of the new generation only.
        """
        generation = self.apply(scripted_concierge(copy.deepcopy(self.doc)))
        eventually(lambda: self.ready_at(generation), f"generation {generation} Ready")
        for agent in ("concierge", "researcher"):
            eventually(
                lambda a=agent: self.routed_to_ready_pods(a),
                f"{agent}'s Service routed to its ready pods only",
            )

    def rolled_out(self, console: bool) -> None:
        """Each deployed agent rolled out for the operator's current flags, as `kubectl rollout
        status` sees it, and its Service routed to the new pods only.

        The operator's ``--console-principal`` (the chart's console) is in every agent pod's
        environment (``MAS_A2A_CONSOLE``), so turning the console on or off rolls the agents
        without a new generation of the Application: ``console`` says which template to wait for.
        """
        apps = k8s.AppsV1Api(self.node.api_client())
        for agent in ("concierge", "researcher"):

            def done(a: str = agent) -> bool:
                deployment = apps.read_namespaced_deployment(f"{self.name}-{a}", NS)
                [container] = deployment.spec.template.spec.containers
                names = {e.name for e in container.env or []}
                status, want = deployment.status, deployment.spec.replicas
                seen = (
                    ("MAS_A2A_CONSOLE" in names) == console,
                    status.observed_generation == deployment.metadata.generation,
                    status.updated_replicas == want,
                    status.ready_replicas == want,
                    status.replicas == want,
                    len(self.pods(a)) == want,
                )
                if all(seen):
                    return True
                raise AssertionError(f"{a}: template/generation/updated/ready/replicas/pods {seen}")

            eventually(done, f"{agent} rolled out (console {console})", timeout=600)
            eventually(
                lambda a=agent: self.routed_to_ready_pods(a),
                f"{agent}'s Service routed to its ready pods only",
            )

    def routed_to_ready_pods(self, agent: str) -> bool:
        """kube-proxy's rules for the agent's Service DNAT to its ready pods' IPs, no others."""
        ips = {p.status.pod_ip for p in self.pods(agent) if pod_ready(p)}
        service = f"{NS}/{self.name}-{agent}:"
        rules = [
            line
            for line in host.run("iptables-save", "-t", "nat").splitlines()
            if line.startswith("-A KUBE-SEP-") and service in line and "--to-destination" in line
        ]
        routed = {m.group(1) for line in rules if (m := DNAT_TO.search(line))}
        if ips and routed == ips:
            return True
        raise AssertionError(f"ready pod IPs {sorted(ips)}, {service} DNAT rules {rules}")

    def pods(self, agent: str) -> list[Any]:
        selector = f"maslab.io/agent={agent}"
        items: list[Any] = self.core.list_namespaced_pod(NS, label_selector=selector).items
        return [p for p in items if p.metadata.deletion_timestamp is None]

    def describe(self, pod: Any) -> str:
        """What `kubectl describe pod` would say about a pod that is not Ready, in one string."""
        name = pod.metadata.name
        status = pod.status
        conditions = [(c.type, c.status, c.reason) for c in status.conditions or []]
        containers = [
            (c.name, c.ready, c.state.waiting.reason if c.state and c.state.waiting else None)
            for c in status.container_statuses or []
        ]
        events = self.core.list_namespaced_event(
            NS, field_selector=f"involvedObject.name={name}"
        ).items
        said = [f"{e.reason}: {e.message}" for e in events][-8:]
        return (
            f"{name}: node={pod.spec.node_name} phase={status.phase} conditions={conditions} "
            f"containers={containers} events={said} "
            f"kubelet={self.node.log_lines('kubelet', name, 8)} exited={self.node.exited()}"
        )

    def card_url(self, agent: str) -> str:
        url: str = self.app()["status"]["agents"][agent]["card_url"]
        return url


DNAT_TO = re.compile(r"--to-destination \[?([0-9a-f.:]+?)\]?:\d+$")


@contextlib.contextmanager
def installed_operator(cluster: NodeCluster, *settings: str) -> Iterator[str]:
    """`helm install` of charts/mas-operator with the built image, uninstalled after.

    ``settings`` are `--set` values (``"conformance.test.enabled=true"``).
    """
    sets = [arg for value in settings for arg in ("--set", value)]
    done = helm(
        cluster.kubeconfig,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        OPERATOR_NS,
        "--create-namespace",
        *sets,
        "--wait",
        "--timeout",
        "10m",
    )
    assert done.returncode == 0, f"helm install failed:\n{done.stdout}\n{done.stderr}"
    try:
        yield RELEASE
    finally:
        helm(cluster.kubeconfig, "uninstall", RELEASE, "-n", OPERATOR_NS, "--wait")


@pytest.fixture(scope="session")
def operator_release(node_cluster: NodeCluster) -> Iterator[str]:
    """The chart installed (CRD, RBAC, the operator), with its conformance test enabled."""
    with installed_operator(node_cluster, "conformance.test.enabled=true") as release:
        yield release


@pytest.fixture(scope="session")
def desk(node_cluster: NodeCluster, operator_release: str) -> Desk:
    """The example Application applied in namespace `research` and Ready."""
    core = k8s.CoreV1Api(node_cluster.api_client())
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NS)))
    doc = example_in_cluster(NS)
    # The chart's helm test probes every agent as an outside caller: the researcher, which
    # admits only its delegator, admits the test's ServiceAccount too (docs/security.md,
    # Migration).
    researcher = doc["spec"]["endpoints"]["researcher"].setdefault("a2a", {})
    researcher["allow"] = [
        f"system:serviceaccount:{OPERATOR_NS}:{RELEASE}-mas-operator-conformance"
    ]
    node_cluster.control_plane.apply_yaml(doc, field_manager="kubectl")
    desk = Desk(node_cluster, doc["metadata"]["name"], doc)
    desk.wait_condition("Ready", timeout=600)
    # Ready is the pods' readiness; kube-proxy programs the Services a moment later.
    for agent in ("concierge", "researcher"):
        eventually(
            lambda a=agent: card_answers(desk.card_url(a)), f"{agent}'s card via its Service"
        )
    return desk


def card_answers(url: str) -> bool:
    """The card at ``url`` answers, its cluster name resolved by the node's DNS."""
    parsed = httpx.URL(url)
    direct = parsed.copy_with(host=resolve(parsed.host))
    return httpx.get(direct, headers={"Host": parsed.netloc.decode()}, timeout=5).status_code == 200


def reply_text(response: StreamResponse) -> str:
    if response.HasField("message"):
        return get_message_text(response.message)
    return get_message_text(response.task.status.message)


@contextlib.asynccontextmanager
async def a2a_client(card_url: str) -> AsyncIterator[Client]:
    """The a2a-sdk client on the host, following the card's advertised (Service) URL."""
    base = card_url.split("/.well-known/", 1)[0]
    async with httpx.AsyncClient(transport=ClusterDNSTransport(), timeout=60) as http:
        config = ClientConfig(
            streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"]
        )
        client = await ClientFactory(config).create_from_url(base)
        try:
            yield client
        finally:
            await client.close()


async def ask(client: Client, text: str) -> str:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    async with asyncio.timeout(60):
        responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    return reply_text(responses[-1])


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def exec_python(desk: Desk, agent: str, code: str, *args: str) -> str:
    """What ``python -c code args`` prints in ``agent``'s pod (kubectl exec, through the API)."""
    from kubernetes.stream import stream

    [pod] = desk.pods(agent)
    # stream() rewires the client it is given for websockets: a client of its own, each time.
    core = k8s.CoreV1Api(desk.node.api_client())
    out: str = stream(
        core.connect_get_namespaced_pod_exec,
        pod.metadata.name,
        NS,
        command=["python", "-c", code, *args],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    # The kubernetes client's websocket leaves its socket to the garbage collector.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    return out.strip()

"""Two nodes: pods on both, a drain that drops no request, a lost node that loses no task.

One two-node cluster (``two_nodes``) is shared by the module, in file order; each test leaves
both nodes Ready and schedulable. The module sorts before the one-node tests, so its cluster
is stopped before theirs starts (one node tier per machine).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.helpers import get_message_text
from a2a.types import GetTaskRequest, Task, TaskState
from kubernetes import client as k8s

from mas.runtime.history import DEFAULT_MAX_HISTORY
from mas_operator.deployments import CONTAINER
from tests.durable.pg_server import Postgres, binaries, running_postgres

from . import host
from .agency import OPERATOR_NS, installed_operator, pod_ready
from .cluster import NodeCluster
from .configs import FIRST, GATEWAY, SECOND, NodeNet
from .support import eventually
from .twonode import (
    HELD,
    Agent,
    PodLog,
    agent_application,
    answer,
    context_tasks,
    conversation,
    drain,
    polling_client,
    start_turn,
    turn,
    uncordon,
)

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

NS = "twonode"
IMAGE = "ghcr.io/maslab/maslab:0.1.0"
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
WORKING = TaskState.TASK_STATE_WORKING
NODE_LOSS_TOLERATION = 10  # seconds (the operator's default is 30): a lean test
TURN_EVERY = 0.4  # seconds: the talker's pace, so a drain's conversation stays whole


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


@pytest.fixture(scope="module")
def postgres(two_nodes: NodeCluster) -> Iterator[Postgres]:
    """PostgreSQL on the host, listening on the first node's bridge too (pods reach it)."""
    bin_dir = binaries()
    if bin_dir is None:
        why = "PostgreSQL is not installed (scripts/install-system-deps installs it)"
        if os.environ.get("MAS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"MAS_REQUIRE_POSTGRES=1 but {why}", pytrace=False)
        pytest.skip(why)
    with running_postgres(bin_dir, also_on=GATEWAY) as server:
        yield server


@pytest.fixture(scope="module")
def release(two_nodes: NodeCluster, core: Any) -> Iterator[str]:
    """The chart as shipped (two operator replicas, one Lease)."""
    with installed_operator(two_nodes) as name:
        yield name


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


def _bridge_mac(net: NodeNet) -> str:
    return Path(f"/sys/class/net/{net.bridge}/address").read_text().strip()


def test_each_bridge_keeps_its_own_mac_when_a_pods_port_comes_or_goes(
    two_nodes: NodeCluster,
) -> None:
    # A bridge whose address was never set takes its lowest port's MAC: a pod's veth coming
    # or going changed it, and the other pods on it lost the host for tens of seconds (their
    # gateway's old MAC); a drain cost a turn that way. A port with a lower MAC than the
    # bridge's, as a pod's veth may have, must leave it alone.
    lower = "02:00:00:00:00:01"
    for net in (FIRST, SECOND):
        assert _bridge_mac(net) == net.bridge_mac
        port = f"mastest{net.suffix or '-a'}"
        host.run("ip", "link", "add", port, "address", lower, "type", "veth", "peer", f"{port}p")
        try:
            host.run("ip", "link", "set", port, "master", net.bridge, "up")
            assert _bridge_mac(net) == net.bridge_mac, "a port's arrival changed the MAC"
        finally:
            host.run("ip", "link", "del", port, check=False)
        assert _bridge_mac(net) == net.bridge_mac, "a port's leaving changed the MAC"


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


def _database(postgres: Postgres, name: str) -> tuple[str, str]:
    """A fresh database: its URL for the pods (the bridge) and for the host (loopback)."""
    postgres.create_database(name)
    return f"postgresql+asyncpg://{postgres.user}@{GATEWAY}:{postgres.port}/{name}", postgres.url(
        name
    )


def _deploy(
    cluster: NodeCluster, name: str, url: str, replicas: int, toleration: int | None = None
) -> Agent:
    cluster.control_plane.apply_yaml(
        agent_application(name, NS, url, replicas, toleration), field_manager="kubectl"
    )
    agent = Agent(cluster, name, NS)

    def serving() -> bool:
        ready = len(agent.ready_pods()) == replicas
        return ready and agent.condition().get("status") == "True" and agent.routed_to_ready_pods()

    eventually(serving, f"{name}: {replicas} pods Ready and routed", timeout=600)
    return agent


def _both_nodes_back(cluster: NodeCluster, core: Any) -> None:
    """Each node Ready, schedulable and without taints (as every test leaves them)."""

    def back() -> bool:
        for name in cluster.node_names:
            node = core.read_node(name)
            if (
                node.spec.unschedulable
                or node.spec.taints
                or not host.node_ready(cluster.api_client(), name)
            ):
                raise AssertionError(f"{name}: {node.spec.taints} {node.spec.unschedulable}")
        return True

    eventually(back, "both nodes Ready, schedulable and untainted", timeout=300)


class ReadyWatch:
    """Reads the Application's Ready condition in a thread until stopped: what it saw."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.seen: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(0.2):
            ready = self.agent.condition()
            self.seen.append(
                (time.monotonic() - start, ready.get("status", "?"), ready.get("message", ""))
            )

    def __enter__(self) -> ReadyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def not_ready(self) -> list[tuple[float, str, str]]:
        return [s for s in self.seen if s[1] != "True"]


def _dialogue(texts: list[str]) -> list[tuple[str, str]]:
    """The conversation an agent that says back each text keeps: user, assistant, ..."""
    return [(role, text) for text in texts for role in ("user", "assistant")]


async def test_a_drain_of_a_replicas_node_drops_no_request(
    two_nodes: NodeCluster, core: Any, postgres: Postgres, release: str
) -> None:
    pod_url, host_url = _database(postgres, "steady")
    agent = await asyncio.to_thread(_deploy, two_nodes, "steady", pod_url, 2)
    placed = {p.spec.node_name: p.metadata.name for p in agent.ready_pods()}
    assert sorted(placed) == ["masnode", "masnode-b"], "the two replicas share a node"
    budgets = k8s.PolicyV1Api(two_nodes.api_client()).list_namespaced_pod_disruption_budget(NS)
    assert [b.spec.max_unavailable for b in budgets.items if b.spec] == [1]

    context = str(uuid.uuid4())  # the store keeps ids of at most 36 characters
    sent: list[str] = []
    task_ids: list[str] = []
    failures: list[str] = []
    stop = asyncio.Event()

    async def converse() -> None:
        async with polling_client(agent.card_url()) as client:
            while not stop.is_set():
                began = time.monotonic()
                text = f"turn {len(sent)}"
                sent.append(text)
                try:
                    task = await turn(client, context, text)
                    task_ids.append(task.id)
                    if (task.status.state, answer(task)) != (COMPLETED, text):
                        failures.append(f"{text!r}: {task.status.state} {answer(task)!r}")
                except Exception as e:  # every failure counts; none is retried
                    failures.append(f"{text!r}: {e!r}")
                # A steady pace (not a wait for anything): the load of a person typing fast.
                await asyncio.sleep(max(0.0, began + TURN_EVERY - time.monotonic()))

    drained = "masnode-b"
    # The drained replica's own account of its stop (SIGTERM, its drain, its turns).
    log = PodLog(core, NS, placed[drained], CONTAINER)
    with ReadyWatch(agent) as watch:
        talker = asyncio.create_task(converse())
        try:
            # A failed turn ends a wait at once (and the test, below) with what failed.
            await asyncio.to_thread(eventually, lambda: failures or len(task_ids) >= 5, "turns")
            assert failures == [], "turns failed before the drain"
            started = time.monotonic()
            evicted = await asyncio.to_thread(drain, core, drained)
            drain_seconds = time.monotonic() - started

            def replaced() -> bool:
                nodes = [p.spec.node_name for p in agent.ready_pods()]
                return nodes == ["masnode", "masnode"] and agent.routed_to_ready_pods()

            await asyncio.to_thread(eventually, replaced, "both replicas Ready on masnode")
            recovered = time.monotonic() - started
            after = len(task_ids)
            await asyncio.to_thread(
                eventually, lambda: failures or len(task_ids) >= after + 5, "turns after"
            )
        finally:
            stop.set()
            await talker
    await asyncio.to_thread(uncordon, core, drained)
    stops = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in evicted.items())
    print(
        f"drain: {len(evicted)} pods evicted in {drain_seconds:.1f} s (eviction to gone: "
        f"{stops}), both replicas serving again {recovered:.1f} s after the drain began; "
        f"{len(sent)} turns, {len(failures)} failed, {len(watch.seen)} Ready readings, "
        f"{len(watch.not_ready())} not True"
    )
    if failures:
        print(f"failed: {failures}\nlog of the drained replica {placed[drained]}:\n{log.text()}")
    assert f"{NS}/{placed[drained]}" in evicted
    assert failures == []
    assert watch.seen and watch.not_ready() == []
    async with polling_client(agent.card_url()) as client:
        tasks = await context_tasks(client, context)
    assert sorted(t.id for t in tasks) == sorted(task_ids) and len(task_ids) == len(sent)
    assert {t.status.state for t in tasks} == {COMPLETED}
    # Every turn in the stored conversation, in the order sent (up to the history bound).
    kept = await conversation(host_url, context)
    expected = _dialogue(sent)
    assert len(kept) == min(len(expected), DEFAULT_MAX_HISTORY)
    assert kept == expected[-len(kept) :]
    await asyncio.to_thread(_both_nodes_back, two_nodes, core)


def _node_of(agent: Agent) -> str:
    [pod] = agent.ready_pods()
    node: str = pod.spec.node_name
    return node


async def _task(client: Any, task_id: str) -> Task:
    task: Task = await client.get_task(GetTaskRequest(id=task_id))
    return task


async def test_a_lost_node_loses_no_task_and_its_pod_moves(
    two_nodes: NodeCluster, core: Any, postgres: Postgres, release: str
) -> None:
    pod_url, host_url = _database(postgres, "lossy")
    agent = await asyncio.to_thread(_deploy, two_nodes, "lossy", pod_url, 1, NODE_LOSS_TOLERATION)
    [pod] = agent.ready_pods()
    lost = pod.spec.node_name
    survivor = next(n for n in two_nodes.node_names if n != lost)
    tolerations = {
        t.key: t.toleration_seconds for t in pod.spec.tolerations or [] if t.effect == "NoExecute"
    }
    assert tolerations == {
        "node.kubernetes.io/unreachable": NODE_LOSS_TOLERATION,
        "node.kubernetes.io/not-ready": NODE_LOSS_TOLERATION,
    }
    context = str(uuid.uuid4())
    before: list[str] = []
    async with polling_client(agent.card_url()) as client:
        for i in range(5):
            task = await turn(client, context, f"before {i}")
            assert (task.status.state, answer(task)) == (COMPLETED, f"before {i}")
            before.append(task.id)
        # A turn certainly running when the node goes: it said its first word and waits.
        held = await start_turn(client, context, "hold on")

        async def working() -> Task | None:
            task = await _task(client, held.id)
            return task if task.status.state == WORKING and answer(task).strip() == HELD else None

        async with asyncio.timeout(60):
            while await working() is None:
                await asyncio.sleep(0.1)

    started = time.monotonic()
    await asyncio.to_thread(two_nodes.stop_node, lost)

    def node_unknown() -> bool:
        node = core.read_node(lost)
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        return bool(ready.status != "True")

    await asyncio.to_thread(eventually, node_unknown, f"{lost} not Ready")
    unknown_after = time.monotonic() - started

    def loss_reported() -> dict[str, Any]:
        ready = agent.condition()
        return ready if ready.get("status") == "False" else {}

    reported = await asyncio.to_thread(eventually, loss_reported, "Ready=False after the loss")
    reported_after = time.monotonic() - started

    def moved() -> bool:
        pods = agent.ready_pods()
        return (
            [p.spec.node_name for p in pods] == [survivor]
            and agent.condition().get("status") == "True"
            and agent.routed_to_ready_pods()
        )

    await asyncio.to_thread(eventually, moved, f"the agent's pod Ready on {survivor}", 600)
    moved_after = time.monotonic() - started

    async with polling_client(agent.card_url()) as client:

        async def ended() -> Task | None:
            task = await _task(client, held.id)
            return task if task.status.state != WORKING else None

        async with asyncio.timeout(120):  # the dead replica's lease (20 s) runs out first
            while (lost_turn := await ended()) is None:
                await asyncio.sleep(0.5)
        failed_after = time.monotonic() - started
        task = await turn(client, context, "after the loss")
        assert (task.status.state, answer(task)) == (COMPLETED, "after the loss")
        tasks = await context_tasks(client, context)
    print(
        f"node loss: {lost} not Ready after {unknown_after:.1f} s, the Application Ready=False "
        f"after {reported_after:.1f} s ({reported.get('message')!r}), its pod Ready on "
        f"{survivor} after {moved_after:.1f} s, the held turn FAILED after {failed_after:.1f} s "
        f"(NoExecute tolerations {tolerations})"
    )
    assert lost_turn.status.state == FAILED
    assert "the turn is lost: send the message again" in get_message_text(lost_turn.status.message)
    ids = [t.id for t in tasks]
    assert sorted(ids) == sorted([*before, held.id, task.id])  # none lost, none twice
    states = {t.id: t.status.state for t in tasks}
    assert [states[i] for i in before] == [COMPLETED] * len(before)
    assert (states[held.id], states[task.id]) == (FAILED, COMPLETED)  # none left WORKING
    # The conversation goes on: the turns that ended, in order; the lost one is not in it.
    kept = await conversation(host_url, context)
    assert kept == _dialogue([f"before {i}" for i in range(5)] + ["after the loss"])

    await asyncio.to_thread(two_nodes.start_node, lost)
    await asyncio.to_thread(_both_nodes_back, two_nodes, core)


def _lease_holder(cluster: NodeCluster) -> str:
    lease = k8s.CoordinationV1Api(cluster.api_client()).read_namespaced_lease(
        "mas-operator", OPERATOR_NS
    )
    holder: str = lease.spec.holder_identity or "" if lease.spec else ""
    return holder


def _operator_pods(core: Any, count: int) -> dict[str, str]:
    """The operator's ``count`` ready pods, not being deleted: name -> node (or nothing)."""
    pods = core.list_namespaced_pod(
        OPERATOR_NS, label_selector="app.kubernetes.io/name=mas-operator"
    )
    ready = {
        p.metadata.name: p.spec.node_name
        for p in pods.items
        if p.metadata.deletion_timestamp is None and pod_ready(p)
    }
    return ready if len(ready) == count else {}


def _operators_apart(cluster: NodeCluster, core: Any) -> dict[str, str]:
    """The two operators Ready on different nodes: name -> node.

    The tests before this one drained and lost a node, so both may now run on the other
    one (a scheduler never moves a running pod). As an admin would, delete the standby:
    the chart's spread puts its replacement on the node the leader is not on.
    """
    operators = eventually(lambda: _operator_pods(core, 2), "two operators Ready")
    if len(set(operators.values())) == 2:
        return operators
    holder = eventually(lambda: _lease_holder(cluster), "a leader")
    standby = next(name for name in operators if not holder.startswith(name))
    core.delete_namespaced_pod(standby, OPERATOR_NS)

    def apart() -> dict[str, str]:
        pods = _operator_pods(core, 2)
        return pods if standby not in pods and len(set(pods.values())) == 2 else {}

    return eventually(apart, "the two operators Ready on different nodes")


async def test_the_standby_takes_the_lease_when_the_leaders_node_is_lost(
    two_nodes: NodeCluster, core: Any, postgres: Postgres, release: str
) -> None:
    operators = await asyncio.to_thread(_operators_apart, two_nodes, core)
    holder = await asyncio.to_thread(eventually, lambda: _lease_holder(two_nodes), "a leader")
    leader = next(name for name in operators if holder.startswith(name))
    lost = operators[leader]
    [standby] = [name for name, node in operators.items() if node != lost]

    started = time.monotonic()
    await asyncio.to_thread(two_nodes.stop_node, lost)
    # A change made while the leader is gone: a new Application.
    pod_url, _ = _database(postgres, "late")
    late = await asyncio.to_thread(_deploy, two_nodes, "late", pod_url, 1)
    converged = time.monotonic() - started
    new_holder = _lease_holder(two_nodes)
    assert new_holder.startswith(standby), new_holder
    assert _node_of(late) != lost
    print(
        f"leader's node lost: {standby} leads and the new Application Ready after {converged:.1f} s"
    )

    await asyncio.to_thread(two_nodes.start_node, lost)
    await asyncio.to_thread(_both_nodes_back, two_nodes, core)

"""What the two-node tests share: an agent on PostgreSQL, its conversation, a drain.

``drain`` does what ``kubectl drain`` does: cordon the node, then evict each of its pods
through the Eviction API (``pods/eviction``), retrying an eviction a PodDisruptionBudget
refuses (429) until it is allowed, and wait until the pods are gone. ``Agent`` is one
Application with one deployed agent whose tasks and conversations live in PostgreSQL: it
says back what it is told, except ``hold ...``, whose turn says one word and then waits
(for a file that never appears) so that a test has a task certainly WORKING.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from sqlalchemy.ext.asyncio import create_async_engine

from library_ioa.plugins.a2a.server.stores.sql_history import SqlConversationStore

from . import host
from .agency import DNAT_TO, pod_ready
from .cluster import NodeCluster
from .support import APP_GROUP, APP_PLURAL, APP_VERSION, ClusterDNSTransport

AGENT = "echo"
HELD = "held"  # the one word a ``hold`` turn says before it waits
# What the agent's model does: ``hold ...`` waits after its first word (release_file is
# never created; the wait is far longer than any test), everything else is said back.
MODEL = {
    "type": "scripted",
    "params": {
        "rules": [
            {
                "match": "^hold",
                "chunks": [f"{HELD} ", "never said"],
                "release_file": "/tmp/never-created",
                "release_timeout_ms": 600_000,
            }
        ],
        "default": {"reply": "{input}"},
    },
}


def agent_application(
    name: str,
    namespace: str,
    database_url: str,
    replicas: int,
    node_loss_toleration_seconds: int | None = None,
) -> dict[str, Any]:
    """An Application of one deployed agent (:data:`MODEL`) storing in ``database_url``."""
    runtime: dict[str, Any] = {"replicas": replicas}
    if node_loss_toleration_seconds is not None:
        runtime["node_loss_toleration_seconds"] = node_loss_toleration_seconds
    return {
        "apiVersion": f"{APP_GROUP}/{APP_VERSION}",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "agency": {
                "entry": AGENT,
                "agents": {
                    AGENT: {
                        "spec": {
                            "description": "Says back what it is told.",
                            "model": MODEL,
                        }
                    }
                },
            },
            "endpoints": {
                AGENT: {
                    "protocol": "a2a",
                    "url": "http://127.0.0.1:8401",
                    "usage": "deploy",
                    # the test's client calls from outside the cluster, with no identity
                    "a2a": {
                        "anonymous": True,
                        "task_store": {"type": "sql", "url": database_url},
                    },
                }
            },
            "runtime": runtime,
        },
    }


@dataclass
class Agent:
    """One applied Application with one agent, seen through the API server."""

    cluster: NodeCluster
    name: str
    namespace: str
    custom: Any = field(init=False)
    core: Any = field(init=False)

    def __post_init__(self) -> None:
        api = self.cluster.api_client()
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def app(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            APP_GROUP, APP_VERSION, self.namespace, APP_PLURAL, self.name
        )
        return obj

    def condition(self, type_: str = "Ready") -> dict[str, Any]:
        conds = (self.app().get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == type_), {})

    def pods(self) -> list[Any]:
        """The agent's pods that are not being deleted."""
        selector = f"maslab.io/agent={AGENT},app.kubernetes.io/instance={self.name}"
        items = self.core.list_namespaced_pod(self.namespace, label_selector=selector).items
        return [p for p in items if p.metadata.deletion_timestamp is None]

    def ready_pods(self) -> list[Any]:
        return [p for p in self.pods() if pod_ready(p)]

    def routed_to_ready_pods(self) -> bool:
        """kube-proxy DNATs the agent's Service to its ready pods' IPs and no others."""
        ips = {p.status.pod_ip for p in self.ready_pods()}
        service = f"{self.namespace}/{self.name}-{AGENT}:"
        rules = [
            line
            for line in host.run("iptables-save", "-t", "nat").splitlines()
            if line.startswith("-A KUBE-SEP-") and service in line and "--to-destination" in line
        ]
        routed = {m.group(1) for line in rules if (m := DNAT_TO.search(line))}
        return bool(ips) and routed == ips

    def card_url(self) -> str:
        url: str = self.app()["status"]["agents"][AGENT]["card_url"]
        return url


@contextlib.asynccontextmanager
async def polling_client(card_url: str) -> AsyncIterator[Client]:
    """The a2a-sdk client on the host, at the agent's Service (its card's URL), polling."""
    base = card_url.split("/.well-known/", 1)[0]
    async with httpx.AsyncClient(transport=ClusterDNSTransport(), timeout=30) as http:
        # polling: every send gets a task at once (stored, so it can be counted), then
        # GetTask until it ends; a quick answer would otherwise be a Message and no task.
        config = ClientConfig(
            streaming=False,
            polling=True,
            httpx_client=http,
            supported_protocol_bindings=["JSONRPC"],
        )
        client = await ClientFactory(config).create_from_url(base)
        try:
            yield client
        finally:
            await client.close()


TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


async def start_turn(client: Client, context_id: str, text: str) -> Task:
    """Send ``text`` in conversation ``context_id``: its task as first stored (polling)."""
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        parts=[Part(text=text)],
    )
    [sent] = [r async for r in client.send_message(SendMessageRequest(message=message))]
    return sent.task


async def turn(client: Client, context_id: str, text: str, timeout: float = 60) -> Task:
    """One turn in conversation ``context_id``, sent and then read until it ends."""
    async with asyncio.timeout(timeout):
        task = await start_turn(client, context_id, text)
        while task.status.state not in TERMINAL:
            await asyncio.sleep(0.1)  # the polling interval of a polling client
            task = await client.get_task(GetTaskRequest(id=task.id))
    return task


def answer(task: Task) -> str:
    """The text a task ended with: its status message, else its artifacts' text."""
    text = get_message_text(task.status.message) if task.status.HasField("message") else ""
    if text:
        return text
    return "".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))


async def context_tasks(client: Client, context_id: str) -> list[Task]:
    """Every task of conversation ``context_id``, page by page."""
    tasks: list[Task] = []
    token = ""
    while True:
        page = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=100, page_token=token)
        )
        tasks.extend(page.tasks)
        token = page.next_page_token
        if not token:
            return tasks


async def conversation(database_url: str, context_id: str) -> list[tuple[str, str]]:
    """The stored conversation ``context_id`` of the agent, oldest first: (role, text).

    Read from the database the replicas share, through the runtime's own store.
    """
    engine = create_async_engine(database_url)
    try:
        kept = await SqlConversationStore(engine, AGENT).peek(context_id)
    finally:
        await engine.dispose()
    return [(m.role, m.content) for m in kept.messages]


def pods_on(core: Any, node: str) -> list[Any]:
    return list(core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)


def drain(core: Any, node: str, timeout: float = 300.0) -> dict[str, float]:
    """Cordon ``node`` and evict its pods as `kubectl drain` does; for each evicted pod
    (``namespace/name``), the seconds from its eviction until it was gone.

    An eviction a PodDisruptionBudget refuses (429) is retried every second until allowed,
    within ``timeout``; DaemonSet pods are left, as `kubectl drain --ignore-daemonsets` does.
    """
    deadline = time.monotonic() + timeout
    core.patch_node(node, {"spec": {"unschedulable": True}})
    evicted: dict[str, float] = {}  # namespace/name -> when it was evicted
    pending = [
        p
        for p in pods_on(core, node)
        if not any(ref.kind == "DaemonSet" for ref in p.metadata.owner_references or [])
    ]
    while pending:
        pod = pending.pop(0)
        eviction = k8s.V1Eviction(
            metadata=k8s.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
        )
        try:
            core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, eviction)
            evicted[f"{pod.metadata.namespace}/{pod.metadata.name}"] = time.monotonic()
        except ApiException as e:
            if e.status == 404:
                continue
            if e.status != 429 or time.monotonic() > deadline:
                raise
            pending.append(pod)  # the budget says not now: the others first, then again
            time.sleep(1.0)  # kubectl drain's retry interval (waits on the budget's state)
    gone: dict[str, float] = {}
    while True:
        left = _undrained(core, node)
        now = time.monotonic()
        gone.update({name: now - at for name, at in evicted.items() if name not in left})
        if not left:
            return {name: gone[name] for name in evicted}
        if now > deadline:
            raise AssertionError(f"pods still on {node} after the evictions: {left}")
        time.sleep(0.2)


class PodLog:
    """The log of one pod's container, followed in a thread from now until the container
    ends: each line with the API server's timestamp (evidence for a test that stops the pod)."""

    def __init__(self, core: Any, namespace: str, name: str, container: str) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(
            target=self._follow, args=(core, namespace, name, container), daemon=True
        )
        self._thread.start()

    def _follow(self, core: Any, namespace: str, name: str, container: str) -> None:
        try:
            stream = core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                follow=True,
                timestamps=True,
                since_seconds=60,
                _preload_content=False,
            )
            for raw in stream:  # urllib3 yields the body line by line
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
        except Exception as e:  # the evidence is best effort; the test asserts elsewhere
            self.lines.append(f"(log of {namespace}/{name} ended: {e!r})")

    def text(self, timeout: float = 10.0) -> str:
        """The lines read so far, once the container has ended (or ``timeout`` passed)."""
        self._thread.join(timeout)
        return "\n".join(self.lines)


def _undrained(core: Any, node: str) -> list[str]:
    return [
        f"{p.metadata.namespace}/{p.metadata.name}"
        for p in pods_on(core, node)
        if not any(ref.kind == "DaemonSet" for ref in p.metadata.owner_references or [])
        and p.status.phase not in ("Succeeded", "Failed")
    ]


def uncordon(core: Any, node: str) -> None:
    core.patch_node(node, {"spec": {"unschedulable": False}})

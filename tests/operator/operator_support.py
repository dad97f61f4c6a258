"""Helpers of the operator tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from a2a.server.routes import create_agent_card_routes
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from kubernetes import client as k8s
from kubernetes.client import ApiException
from starlette.applications import Starlette
from tests.deadlines import COLD_START
from tests.ports import free_port

from mas_operator.metrics import OperatorMetrics
from mas_operator.runner import OperatorHandle, OperatorOptions, run_operator

REPO = Path(__file__).resolve().parent.parent.parent
CRD_FILE = REPO / "crds" / "application.yaml"
GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
T = TypeVar("T")


def eventually(
    check: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "the condition",
) -> T:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        except ApiException as exc:  # not there yet
            if exc.status != 404:
                raise
            last = f"404 {exc.reason}"
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def crd_document() -> dict[str, Any]:
    """The committed CRD (``crds/application.yaml``, generated from the models)."""
    return dict(yaml.safe_load(CRD_FILE.read_text()))


class RunningOperator:
    """``run_operator`` in a thread of its own, as ``mas-operator run`` would run it."""

    def __init__(self, options: OperatorOptions) -> None:
        self.options = options
        self.handle = OperatorHandle()
        self.error: BaseException | None = None
        self.result: bool | None = None
        self._thread = threading.Thread(target=self._main, name="mas-operator", daemon=True)

    def _main(self) -> None:
        async def go() -> bool:
            self.handle.stop_event = asyncio.Event()
            return await run_operator(self.options, self.handle)

        try:
            self.result = asyncio.run(go())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self, wait_leading: bool = True) -> RunningOperator:
        self._thread.start()
        if wait_leading:
            eventually(lambda: self.handle.leading or self.error, 30, what="the operator to lead")
            if self.error:
                raise self.error
        return self

    def _stacks(self) -> str:
        """Where the operator's thread and its asyncio tasks are, for a failure message."""
        frame = sys._current_frames().get(self._thread.ident or 0)
        lines = ["thread:", *traceback.format_stack(frame)] if frame is not None else []
        loop = self.handle.loop
        if loop is not None:
            for task in asyncio.all_tasks(loop):
                lines.append(f"task {task.get_name()}: {task.get_coro()!r}")
                lines += (
                    traceback.format_stack(task.get_stack(limit=1)[-1])
                    if task.get_stack(limit=1)
                    else []
                )
        return "".join(lines)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self.handle.stop()
        self._thread.join(timeout)
        if self._thread.is_alive():
            pytest.fail(f"the operator did not stop within {timeout:.0f}s:\n{self._stacks()}")
        if self.error is not None:
            raise self.error


class Api:
    """The clients one test uses."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.ns = namespace
        self.client = client
        self.custom = k8s.CustomObjectsApi(client)
        self.core = k8s.CoreV1Api(client)
        self.apps = k8s.AppsV1Api(client)
        self.net = k8s.NetworkingV1Api(client)

    def create(self, doc: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.ns, PLURAL, doc, field_validation="Strict"
            )
        )

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name))

    def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        """Replace the spec with a JSON patch: no resourceVersion to race the operator's writes."""
        patch = [{"op": "replace", "path": "/spec", "value": spec}]
        self.custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            self.ns,
            PLURAL,
            name,
            patch,
            _content_type="application/json-patch+json",
        )

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        status = self.get(name).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)

    def deployments(self) -> list[Any]:
        return list(self.apps.list_namespaced_deployment(self.ns).items)

    def mark_pods_ready(self) -> int:
        """Stand in for the kubelet: report every pod of the namespace Running and Ready."""
        marked = 0
        for pod in self.core.list_namespaced_pod(self.ns).items:
            stamp = "2026-01-01T00:00:00Z"
            status = {
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": stamp},
                    ],
                }
            }
            self.core.patch_namespaced_pod_status(pod.metadata.name, self.ns, status)
            marked += 1
        return marked


def cluster_app(name: str = "desk") -> dict[str, Any]:
    """A small Application for a cluster: urls left to the Service names, one Secret."""
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "agency": {
                "entry": "front",
                "agents": {
                    "front": {"spec": {"delegates_to": ["back", "helper"]}},
                    "helper": {},
                    "back": {},
                },
            },
            "endpoints": {
                "front": {"usage": "deploy"},
                "back": {
                    "usage": "use-and-deploy",
                    "headers": {
                        "Authorization": {"secret_key_ref": {"name": "back-token", "key": "token"}}
                    },
                },
            },
        },
    }


def total(counter: Any) -> int:
    """The value of a prometheus Counter, summed over its labels."""
    value = 0.0
    for family in counter.collect():
        value += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return int(value)


def reconciles(metrics: OperatorMetrics) -> int:
    """How many reconciles the operator has finished (by any path, with any outcome)."""
    return total(metrics.reconciles)


def full_passes(op: RunningOperator, count: int = 2) -> None:
    """Wait until ``count`` full resync passes have begun since this call.

    The loop counts a pass when it begins and begins the next only when every reconcile
    of the last one has finished: with ``count`` 2, a whole pass that began after this call
    (and so saw everything written before it) is over. A test asserts that something did
    not happen after this, not after a guessed sleep.
    """
    metrics = op.handle.metrics
    start = total(metrics.resync_passes)
    eventually(
        lambda: total(metrics.resync_passes) >= start + count,
        what=f"{count} more full resync passes",
    )


def self_contained_app() -> dict[str, Any]:
    """:func:`cluster_app` without its Secret: a reconcile reads only it and its children."""
    doc = cluster_app()
    del doc["spec"]["endpoints"]["back"]["headers"]
    return doc


# the kinds of children an Application of these tests owns (no volume claim, no disruption
# budget), in the order :func:`owned_children` lists them
OWNED_KINDS = (
    "ConfigMap",
    "Service",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Deployment",
    "NetworkPolicy",
)


def owned_children(api: Api, uid: str) -> dict[str, list[str]]:
    """Names of the objects of each child kind owned by ``uid``."""
    listings = {
        "ConfigMap": api.core.list_namespaced_config_map(api.ns).items,
        "Service": api.core.list_namespaced_service(api.ns).items,
        "ServiceAccount": api.core.list_namespaced_service_account(api.ns).items,
        "Role": k8s.RbacAuthorizationV1Api(api.client).list_namespaced_role(api.ns).items,
        "RoleBinding": k8s.RbacAuthorizationV1Api(api.client)
        .list_namespaced_role_binding(api.ns)
        .items,
        "Deployment": api.apps.list_namespaced_deployment(api.ns).items,
        "NetworkPolicy": api.net.list_namespaced_network_policy(api.ns).items,
    }
    return {
        kind: sorted(
            o.metadata.name
            for o in items
            if any(r.uid == uid for r in o.metadata.owner_references or [])
        )
        for kind, items in listings.items()
    }


def wait_condition(
    api: Api,
    name: str,
    type_: str,
    status: str,
    *,
    timeout: float = 30.0,
    generation: int | None = None,
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        cond = api.condition(name, type_)
        if cond is None or cond["status"] != status:
            return None
        if generation is not None and cond.get("observedGeneration") != generation:
            return None
        return cond

    return eventually(check, timeout, what=f"{type_}={status} on {name}")


def printer_columns(api: Api, name: str) -> dict[str, Any]:
    """What ``kubectl get applications`` shows: the server-side Table of the object."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{api.ns}/{PLURAL}/{name}"
    response = api.client.call_api(
        *api.client.param_serialize(
            method="GET",
            resource_path=path,
            auth_settings=["BearerToken"],
            header_params={"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"},
        )
    )
    response.read()
    table = yaml.safe_load(response.data)
    names = [c["name"] for c in table["columnDefinitions"]]
    return dict(zip(names, table["rows"][0]["cells"], strict=True))


HELM_VERSION = "v3.19.0"


def helm_binary() -> Path | None:
    """The helm built by ``scripts/build-helm`` (or ``$MAS_HELM_DIR/helm``), if present."""
    default = Path.home() / ".cache" / "maslab" / "helm" / HELM_VERSION
    path = Path(os.environ.get("MAS_HELM_DIR") or default) / "helm"
    return path if os.access(path, os.X_OK) else None


def require_helm() -> Path:
    """The helm binary; skip (fail with ``MAS_REQUIRE_ENVTEST=1``) when it is missing."""
    helm = helm_binary()
    if helm is not None:
        return helm
    why = "helm is missing: build it once with `scripts/build-helm` (Go module proxy)"
    if os.environ.get("MAS_REQUIRE_ENVTEST") == "1":
        pytest.fail(f"MAS_REQUIRE_ENVTEST=1 but {why}", pytrace=False)
    pytest.skip(why)


def helm_template(*args: str, namespace: str = "mas-system") -> list[dict[str, Any]]:
    """``helm template`` of the chart, as a list of objects."""
    helm = require_helm()
    out = subprocess.run(
        [
            str(helm),
            "template",
            "mas-operator",
            str(REPO / "charts" / "mas-operator"),
            "--namespace",
            namespace,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@contextlib.contextmanager
def serve_agent(
    document: Path, agent: str, tmp: Path, *, grpc: bool = False, dead_grpc: bool = False
) -> Iterator[str]:
    """``mas-ctl serve`` of ``agent`` in ``document`` on 127.0.0.1 free ports; yields its URL.

    ``grpc``: the agent serves gRPC too. ``dead_grpc``: its card advertises gRPC at
    127.0.0.2, where nothing listens (the listener binds the ``--listen`` host, 127.0.0.1),
    which fails the probe's gRPC checks.
    """
    url = f"http://127.0.0.1:{free_port()}"
    overrides = [f"infra:spec.endpoints[{agent}].url={url}"]
    if grpc or dead_grpc:
        host = "127.0.0.2" if dead_grpc else "127.0.0.1"
        overrides.append(f"infra:spec.endpoints[{agent}].a2a.grpc_url={host}:{free_port()}")
    argv = [sys.executable, "-m", "mas.ctl.cli", "serve", "-f", str(document), "--agent", agent]
    argv += ["--no-control", "--listen", "127.0.0.1"]
    for override in overrides:
        argv += ["--override", override]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp)},
    )
    try:

        def up() -> bool:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"mas-ctl serve of {agent} exited {proc.returncode}: {err}")
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            return False

        eventually(up, COLD_START, interval=0.1, what=f"mas-ctl serve of {agent}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def card_app(url: str) -> Starlette:
    """A bare a2a-sdk app publishing the AgentCard of an agent named ``Web Search`` at ``url``
    (the external endpoint whose card the operator checks)."""
    card = AgentCard(
        name="Web Search",
        description="Searches the web.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="search", name="Search", description="Searches", tags=["web"])],
    )
    return Starlette(routes=create_agent_card_routes(card))

"""Reach an agent in a cluster: ``APP/AGENT`` through the API server's port-forward.

:func:`open_cluster_target` loads the kubeconfig as ``kubectl`` does (``--kubeconfig``, else
``$KUBECONFIG``, else ``~/.kube/config``, else the pod's in-cluster service account;
``--kube-context`` picks a context), reads the Application ``APP`` in the namespace (the
argument, else the context's namespace, else ``default``), resolves AGENT from its spec and
``status.agents`` (:mod:`mas.ctl.cluster_targets` decides), picks a Ready pod of the agent
and forwards one loopback port per A2A port of that pod (HTTP, and gRPC when it has one)
through the API server, one port-forward stream per accepted connection, as
``kubectl port-forward`` does (the ``kubernetes`` client's portforward; no kubectl).

The only module of the runtime packages that imports ``kubernetes`` (import-linter allows
exactly this one); ``mas-ctl`` imports it only for an ``APP/AGENT`` target.

Needed permissions in the namespace: get applications (infra.maslab.io), list pods,
create pods/portforward. A refusal names them; so does each other failure, in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import urllib3
from kubernetes import client, config
from kubernetes.stream import portforward

from mas.ctl.cluster_targets import (
    NEEDED,
    PORT_GRPC,
    PORT_HTTP,
    ClusterAccessError,
    ClusterTargetError,
    UrlRewrite,
    parse_target,
    pick_pod,
    pod_ports,
    pod_selector,
    resolve_agent,
)
from mas.ctl.forwarding import Forwarder

__all__ = ["ClusterAccessError", "ClusterTarget", "ClusterTargetError", "open_cluster_target"]

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
REQUEST_TIMEOUT = 15.0  # seconds, each API call
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_HANDSHAKE = re.compile(r"Handshake status (\d{3})")

T = TypeVar("T")


@dataclass(frozen=True)
class ClusterTarget:
    """A deployed agent reached through local forwarded ports.

    ``base_url`` serves the agent's card at ``/.well-known/agent-card.json``; ``rewrite``
    maps each in-cluster interface URL on that card to its local forwarded address.
    """

    base_url: str
    rewrite: Callable[[str], str]
    app: str
    agent: str
    namespace: str
    pod: str


def load_configuration(
    kubeconfig: str | None, kube_context: str | None
) -> tuple[client.Configuration, str | None]:
    """The client configuration and the context's namespace (None when it names none)."""
    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    default = Path("~/.kube/config").expanduser()
    if path is None and not default.exists():
        if os.environ.get("KUBERNETES_SERVICE_HOST") and kube_context is None:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException as exc:
                raise ClusterAccessError(
                    f"no kubeconfig, and this pod's service account cannot be used "
                    f"({_one_line(exc)}): pass --kubeconfig FILE or set KUBECONFIG"
                ) from None
            ns = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() if _readable() else None
            return configuration, ns or None
        raise ClusterAccessError(
            "no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config"
        )
    source = path or str(default)
    if kubeconfig is not None and not Path(kubeconfig).expanduser().is_file():
        raise ClusterAccessError(f"kubeconfig {kubeconfig}: no such file")
    # KUBECONFIG may list several files; as kubectl does, the ones that exist are merged.
    if not any(Path(one).expanduser().is_file() for one in source.split(os.pathsep) if one):
        raise ClusterAccessError(f"KUBECONFIG={source}: none of its files exists")
    try:
        contexts, active = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=source
        )
    except Exception as exc:
        raise ClusterAccessError(f"kubeconfig {source}: {_one_line(exc)}") from None
    names = [str(c.get("name")) for c in contexts or []]
    if kube_context is not None and kube_context not in names:
        raise ClusterAccessError(
            f"--kube-context {kube_context!r} is not in kubeconfig {source}; "
            f"its contexts: {', '.join(names) or '(none)'}"
        )
    chosen = next((c for c in contexts or [] if c.get("name") == kube_context), active)
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=source, context=kube_context, client_configuration=configuration
        )
    except Exception as exc:
        raise ClusterAccessError(f"kubeconfig {source}: {_one_line(exc)}") from None
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return configuration, str(ns) if ns else None


def _readable() -> bool:
    return SERVICE_ACCOUNT_NAMESPACE.is_file()


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())


def _api_error(exc: Exception, server: str, doing: str) -> ClusterTargetError:
    """One line for a failed API call ``doing`` (e.g. "get applications in namespace x")."""
    if isinstance(exc, client.ApiException):
        status = exc.status
        if status == 0:  # a websocket handshake refused (the port-forward call)
            found = _HANDSHAKE.search(str(exc.reason))
            status = int(found.group(1)) if found else 0
        if status == 401:
            return ClusterAccessError(
                f"the API server at {server} refused the kubeconfig's credentials (401) to {doing}"
            )
        if status == 403:
            return ClusterAccessError(
                f"forbidden: this user may not {doing} (mas-ctl needs: {NEEDED})"
            )
        return ClusterTargetError(
            f"the API server at {server} answered {status or 'an error'} to {doing}: "
            f"{_status_message(exc)}"
        )
    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
        return ClusterAccessError(f"cannot reach the API server at {server}: {_reason(exc)}")
    raise exc


def _status_message(exc: client.ApiException) -> str:
    """The message of the Status the API server sent (in a refused handshake, its last part)."""
    body = exc.body if exc.body else str(exc.reason).rpartition("-+-+-")[2]
    try:
        said = json.loads(body).get("message")
    except (ValueError, TypeError, AttributeError):
        said = None
    return _one_line(said or exc.reason)


def _reason(exc: Exception) -> str:
    inner = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps the cause
    return _one_line(inner if inner is not None else exc)


class _Cluster:
    """The API calls of one target, each in a worker thread (the client blocks)."""

    def __init__(self, configuration: client.Configuration) -> None:
        self.server = str(configuration.host)
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        # portforward() swaps the ApiClient's call_api while it runs: its own client, one
        # call at a time.
        self._forward_core = client.CoreV1Api(client.ApiClient(configuration))
        self._forward_lock = threading.Lock()

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]
        self._forward_core.api_client.close()

    async def call(self, doing: str, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(fn)
        except Exception as exc:
            raise _api_error(exc, self.server, doing) from None

    async def application(self, app: str, namespace: str) -> dict[str, Any]:
        where = f"namespace {namespace!r}"
        try:
            found = await asyncio.to_thread(
                lambda: self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, app, _request_timeout=REQUEST_TIMEOUT
                )
            )
            return cast(dict[str, Any], found)
        except client.ApiException as exc:
            if exc.status != 404:
                raise _api_error(exc, self.server, f"get applications in {where}") from None
        except Exception as exc:
            raise _api_error(exc, self.server, f"get applications in {where}") from None
        try:
            listing = await asyncio.to_thread(
                lambda: self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, _request_timeout=REQUEST_TIMEOUT
                )
            )
        except client.ApiException as exc:
            if exc.status == 404:  # no such resource: the CRD is not installed
                raise ClusterTargetError(
                    f"the API server at {self.server} has no {PLURAL}.{GROUP} resource: "
                    "install the mas-operator chart (its CRD) first"
                ) from None
            raise _api_error(exc, self.server, f"list applications in {where}") from None
        except Exception as exc:
            raise _api_error(exc, self.server, f"list applications in {where}") from None
        items = cast(dict[str, Any], listing).get("items") or []
        names = sorted(str(item["metadata"]["name"]) for item in items)
        raise ClusterTargetError(
            f"no Application {app!r} in {where}; Applications there: {', '.join(names) or '(none)'}"
        )

    async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        listing = await self.call(
            f"list pods in namespace {namespace!r}",
            lambda: self.core.list_namespaced_pod(
                namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ),
        )
        serialize = self.api.sanitize_for_serialization
        return [cast(dict[str, Any], serialize(pod)) for pod in listing.items]  # type: ignore[no-untyped-call]

    async def may_forward(self, namespace: str, pod: str) -> bool | None:
        """Whether RBAC lets this user port-forward to ``pod`` (None: cannot tell)."""
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    namespace=namespace,
                    verb="create",
                    resource="pods",
                    subresource="portforward",
                    name=pod,
                )
            )
        )
        authz = client.AuthorizationV1Api(self.api)
        try:
            answer = await asyncio.to_thread(
                authz.create_self_subject_access_review, review, _request_timeout=REQUEST_TIMEOUT
            )
        except Exception:
            return None  # the forward itself will say what is wrong
        return bool(answer.status is not None and answer.status.allowed)

    def open_stream(self, namespace: str, pod: str, port: int) -> socket.socket:
        """A connected stream socket to ``pod``'s ``port`` (blocking: a websocket handshake)."""
        try:
            with self._forward_lock:
                forward = portforward(
                    self._forward_core.connect_get_namespaced_pod_portforward,
                    pod,
                    namespace,
                    ports=str(port),
                )
        except Exception as exc:
            doing = f"create pods/portforward for pod {pod} in namespace {namespace!r}"
            raise _api_error(exc, self.server, doing) from None
        # The client's end of its socket pair: taken over as a plain socket, so asyncio owns
        # it; the port-forward's proxy thread ends when it closes.
        return socket.socket(fileno=forward.socket(port).detach())


@contextlib.asynccontextmanager
async def open_cluster_target(
    target: str, namespace: str | None, kube_context: str | None, kubeconfig: str | None
) -> AsyncIterator[ClusterTarget]:
    """Resolve ``APP/AGENT`` and forward local ports to a Ready pod of it; see the module."""
    app, agent = parse_target(target)
    configuration, context_namespace = load_configuration(kubeconfig, kube_context)
    ns = namespace or context_namespace or "default"
    cluster = _Cluster(configuration)
    try:
        app_obj = await cluster.application(app, ns)
        resolved = resolve_agent(app_obj, agent, ns)
        pod = pick_pod(resolved, await cluster.pods(ns, pod_selector(app, agent)))
        pod_name = str(pod["metadata"]["name"])
        ports = pod_ports(pod)
        if PORT_HTTP not in ports:
            raise ClusterTargetError(
                f"pod {pod_name} of {target} has no container port named {PORT_HTTP}: "
                "not a pod the operator made"
            )
        if await cluster.may_forward(ns, pod_name) is False:
            raise ClusterAccessError(
                f"forbidden: this user may not create pods/portforward in namespace {ns!r} "
                f"(mas-ctl needs: {NEEDED})"
            )
        wanted = [ports[name] for name in (PORT_HTTP, PORT_GRPC) if name in ports]
        forwarder = Forwarder(
            lambda port: cluster.open_stream(ns, pod_name, port), f"pod {ns}/{pod_name}"
        )
        local: Mapping[int, int] = await forwarder.start(wanted)
        try:
            yield ClusterTarget(
                base_url=f"http://127.0.0.1:{local[ports[PORT_HTTP]]}",
                rewrite=UrlRewrite.for_agent(resolved, local),
                app=app,
                agent=agent,
                namespace=ns,
                pod=pod_name,
            )
        finally:
            await forwarder.close()
    finally:
        cluster.close()

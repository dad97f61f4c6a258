"""The cluster source: Applications and their Events, watched through the API server.

The only module of the console that imports ``kubernetes`` (lazily, in
:meth:`ClusterSource.connect`). One thread per watched namespace (or one for every
namespace) keeps a watch of Applications, and one of the Events whose involved object is an
Application; each change reaches the event loop with ``call_soon_threadsafe`` and replaces
that Application's view. A watch that ends (its server-side timeout, a dropped connection,
a 410 Gone) is listed and watched again; a failure is logged and retried after
:data:`RETRY_SECONDS`, the views kept as they were.

An Application's view: nodes from its spec (wired as the operator wires it; a spec that
does not wire shows the problems, and the nodes ``status`` names), edges from
``status.routes`` (the planned edges, state Unknown, until the operator reports them),
replicas and conformance from ``status.agents``, agents reached at ``status.agents.<id>.url``
(their Services), their badges read at ``status.agents.<id>.metrics_url`` (an operator that
reports none: no badge).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from mas.console.sources import Source
from mas.console.views import (
    UNKNOWN,
    AgentNode,
    ApplicationView,
    ConditionView,
    EdgeView,
    EventView,
    planned_edges,
    structure,
)
from mas.infra.errors import ApplicationInvalid, WiringError
from mas.infra.wiring import wire

logger = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
WATCH_SECONDS = 30  # server-side timeout of one watch request (then listed and watched again)
RETRY_SECONDS = 5.0
EVENTS_KEPT = 50
EVENT_SELECTOR = "involvedObject.kind=Application"


class ClusterError(Exception):
    """The cluster cannot be reached or read; one line saying what to fix."""


class ClusterSource(Source):
    """Applications of a cluster (see the module docstring)."""

    def __init__(self, api: Any, namespaces: list[str]) -> None:
        super().__init__()
        self._api = api  # kubernetes.client.ApiClient
        self.namespaces = namespaces or [""]  # "": every namespace
        self._objects: dict[str, Mapping[str, Any]] = {}
        self._events: dict[str, dict[str, EventView]] = {}
        self._views: dict[str, ApplicationView] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def connect(
        cls,
        namespaces: list[str],
        context: str | None,
        kubeconfig: str | None,
        *,
        in_cluster: bool = False,
    ) -> ClusterSource:
        """A source on the kubeconfig (or the pod's ServiceAccount with ``in_cluster``)."""
        from kubernetes import client, config

        try:
            if in_cluster:
                configuration = client.Configuration()
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                api = client.ApiClient(configuration)
            else:  # a client of its own: the process-wide default is left alone
                api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, context=context
                )
        except Exception as exc:
            where = "the pod's ServiceAccount" if in_cluster else (kubeconfig or "the kubeconfig")
            raise ClusterError(
                f"cannot load {where}: {' '.join(str(exc).split())[:300]}; give --kubeconfig "
                "PATH and --kube-context NAME, or --in-cluster in a pod"
            ) from None
        return cls(api, list(namespaces))

    @property
    def mode(self) -> str:
        return "cluster: " + (", ".join(self.namespaces) if self.namespaces != [""] else "all")

    def applications(self) -> list[ApplicationView]:
        return [self._views[k] for k in sorted(self._views)]

    def application(self, namespace: str, name: str) -> ApplicationView | None:
        return self._views.get(f"{namespace}/{name}")

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for namespace in self.namespaces:
            for kind, run in (("apps", self._watch_apps), ("events", self._watch_events)):
                thread = threading.Thread(
                    target=self._forever,
                    args=(run, namespace),
                    name=f"console-watch-{kind}-{namespace or 'all'}",
                    daemon=True,
                )
                self._threads.append(thread)
        first = [asyncio.to_thread(self._list_apps, ns) for ns in self.namespaces]
        for result in await asyncio.gather(*first, return_exceptions=True):
            if isinstance(result, BaseException):
                logger.warning("listing Applications failed: %s", result)
        for thread in self._threads:
            thread.start()

    async def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 1.0)
        self._api.close()

    # -- the watch threads ---------------------------------------------------------------

    def _forever(self, run: Callable[[str], None], namespace: str) -> None:
        while not self._stop.is_set():
            try:
                run(namespace)
            except Exception as exc:
                logger.warning("watch of %s failed: %s", namespace or "every namespace", exc)
                self._stop.wait(RETRY_SECONDS)

    def _list_apps(self, namespace: str) -> str:
        from kubernetes import client

        api = client.CustomObjectsApi(self._api)
        if namespace:
            listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        else:
            listed = api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        body = cast(dict[str, Any], listed)
        items = {_key(o): o for o in body.get("items") or []}
        self._post(lambda: self._replace_all(namespace, items))
        return str((body.get("metadata") or {}).get("resourceVersion", ""))

    def _watch_apps(self, namespace: str) -> None:
        from kubernetes import client, watch

        version = self._list_apps(namespace)
        api = client.CustomObjectsApi(self._api)
        args: tuple[Any, ...] = (
            (GROUP, VERSION, namespace, PLURAL) if namespace else (GROUP, VERSION, PLURAL)
        )
        call = api.list_namespaced_custom_object if namespace else api.list_cluster_custom_object
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            call, *args, resource_version=version, timeout_seconds=WATCH_SECONDS
        ):
            if self._stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            obj, kind = event["object"], event["type"]
            if kind == "ERROR":
                return  # 410 Gone and the like: list again
            self._post(functools.partial(self._app_changed, kind, obj))

    def _watch_events(self, namespace: str) -> None:
        from kubernetes import client, watch

        api = client.CoreV1Api(self._api)
        if namespace:
            call: Any = api.list_namespaced_event
            args: tuple[Any, ...] = (namespace,)
        else:
            call, args = api.list_event_for_all_namespaces, ()
        listed = call(*args, field_selector=EVENT_SELECTOR)
        for item in listed.items:
            data = self._api.sanitize_for_serialization(item)
            self._post(functools.partial(self._event, data))
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            call,
            *args,
            field_selector=EVENT_SELECTOR,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=WATCH_SECONDS,
        ):
            if self._stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
                return
            if event["type"] in ("ADDED", "MODIFIED"):
                data = self._api.sanitize_for_serialization(event["object"])
                self._post(functools.partial(self._event, data))

    def _post(self, change: Callable[[], None]) -> None:
        if self._loop is not None and not self._stop.is_set():
            self._loop.call_soon_threadsafe(change)

    # -- on the event loop ---------------------------------------------------------------

    def _replace_all(self, namespace: str, items: dict[str, Mapping[str, Any]]) -> None:
        for key in [k for k in self._objects if not namespace or k.startswith(namespace + "/")]:
            if key not in items:
                self._app_changed("DELETED", self._objects[key])
        for obj in items.values():
            self._app_changed("MODIFIED", obj)

    def _app_changed(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self._objects.pop(key, None)
            self._views.pop(key, None)
            self._events.pop(key, None)
        else:
            old = self._objects.get(key)
            if old is not None and _version(old) == _version(obj):
                return
            self._objects[key] = obj
            self._render(key)
        self.changes.publish(key)

    def _event(self, data: Mapping[str, Any]) -> None:
        involved = data.get("involvedObject") or data.get("involved_object") or {}
        key = f"{involved.get('namespace', '')}/{involved.get('name', '')}"
        meta = data.get("metadata") or {}
        seen = self._events.setdefault(key, {})
        seen[str(meta.get("uid") or meta.get("name"))] = EventView(
            type=str(data.get("type") or "Normal"),
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            time=str(
                data.get("lastTimestamp")
                or data.get("eventTime")
                or meta.get("creationTimestamp")
                or ""
            ),
            count=int(data.get("count") or 1),
        )
        if len(seen) > EVENTS_KEPT:
            for old in sorted(seen, key=lambda k: seen[k].time)[: len(seen) - EVENTS_KEPT]:
                del seen[old]
        if key in self._objects:
            self._render(key)
            self.changes.publish(key)

    def _render(self, key: str) -> None:
        before = self._views.get(key)
        view = application_view(self._objects[key], list(self._events.get(key, {}).values()))
        view.version = (before.version + 1) if before is not None else 1
        self._views[key] = view


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def application_view(obj: Mapping[str, Any], events: list[EventView]) -> ApplicationView:
    """One Application object (and its Events) as the console shows it. Pure."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    view = ApplicationView(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")))
    view.phase = str(status.get("phase") or "")
    for condition in status.get("conditions") or []:
        view.conditions.append(
            ConditionView(
                str(condition.get("type", "")),
                str(condition.get("status", "")),
                str(condition.get("reason") or ""),
                str(condition.get("message") or ""),
            )
        )
    ready = next((c for c in view.conditions if c.type == "Ready"), None)
    view.ready = ready.status if ready is not None else "Unknown"
    document = {k: obj.get(k) for k in ("apiVersion", "kind", "metadata", "spec")}
    try:
        wired = wire(document, None, require_urls=False)
    except (ApplicationInvalid, WiringError) as exc:
        view.problems = [f"the spec does not wire: {p}" for p in exc.problems][:20]
    except Exception as exc:  # an object the models cannot read at all
        view.problems = [f"the spec cannot be read: {' '.join(str(exc).split())[:300]}"]
    else:
        view.entry = wired.app.spec.agency.entry
        view.agents, view.externals = structure(wired.app, wired.routes)
        view.edges = [
            dataclasses.replace(e, message="the operator has not reported this edge yet")
            for e in planned_edges(wired.app, wired.routes)
        ]
    agents_status = status.get("agents") or {}
    if not view.agents:
        view.agents = [AgentNode(id=str(a), name=str(a), deployed=True) for a in agents_status]
    for agent in view.agents:
        seen = agents_status.get(agent.id)
        if not isinstance(seen, dict):
            if agent.deployed:
                agent.url = None  # not reported yet: the spec's url is the laptop's
                agent.metrics_url = None
            continue
        agent.url = seen.get("url") or None
        metrics = seen.get("metrics_url")
        agent.metrics_url = metrics if isinstance(metrics, str) and metrics else None
        agent.replicas = _int(seen.get("replicas"))
        agent.ready_replicas = _int(seen.get("ready_replicas"))
        conformant = seen.get("conformant")
        if isinstance(conformant, dict):
            agent.conformant = str(conformant.get("status") or "")
            agent.conformance_message = str(conformant.get("message") or "")
    routes = status.get("routes")
    if isinstance(routes, list):
        view.edges = [
            EdgeView(
                source=str(r.get("from", "")),
                target=str(r.get("to", "")),
                via=str(r.get("via", "")),
                state=str(r.get("state") or UNKNOWN),
                reason=str(r.get("reason") or ""),
                message=str(r.get("message") or ""),
                url=r.get("url"),
            )
            for r in routes
            if isinstance(r, dict)
        ]
    view.events = events
    return view


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None

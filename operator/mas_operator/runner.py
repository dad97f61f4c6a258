"""Running the operator: credentials, kopf settings, metrics, liveness and the leader Lease.

:func:`run_operator` is what ``mas-operator run`` calls and what tests run in-process (in a
thread, with an :class:`OperatorHandle` to stop it). Order: serve liveness, readiness
(:mod:`mas_operator.health`) and metrics, wait for the Lease (standby), then run kopf until
stopped or the Lease is lost, then release.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

import kopf
import urllib3
from aiohttp import web
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from prometheus_client import start_http_server

from mas_operator.backoff import Backoff
from mas_operator.handlers import COLD_EVERY, OperatorContext, register, serve
from mas_operator.health import Readiness, serve_health
from mas_operator.kube import Cluster
from mas_operator.leases import LeaderElector, LeaseSettings
from mas_operator.metrics import OperatorMetrics
from mas_operator.names import DIFFBASE_KEY, DOMAIN
from mas_operator.plan import ApiServer
from mas_operator.scopes import (
    UnwatchedReporter,
    crd_served,
    exact_namespaces,
    report_unwatched,
)
from mas_operator.workqueue import WorkQueue

logger = logging.getLogger(__name__)


class SharedMemo(kopf.Memo):
    """kopf's ``memo``, one for every object: kopf gives each object it watches a shallow
    copy of the memo, and ours holds only the :class:`OperatorContext` every handler shares
    anyway (25,000 children at 1,000 Applications made 25,000 one-key dicts)."""

    def __copy__(self) -> SharedMemo:
        return self


@dataclass(frozen=True)
class OperatorOptions:
    """Everything ``mas-operator run`` can set."""

    namespaces: Sequence[str] = ()
    all_namespaces: bool = False
    kubeconfig: str | None = None
    liveness: str | None = None
    metrics_port: int | None = None
    metrics_address: str = "0.0.0.0"
    resync: float = 30.0
    cold_every: int = COLD_EVERY  # full passes; every such one is cold (0: never)
    leader_election: bool = True
    lease_name: str = "mas-operator"
    lease_namespace: str | None = None
    identity: str | None = None
    console_principal: str | None = None  # the install's console, admitted by agents ...
    console_namespaces: Sequence[str] = ()  # ... of these namespaces (empty: every one)
    api_server: ApiServer = field(default_factory=ApiServer)  # agents reach it for keys
    denial_events: bool = True  # agents may post their denial Events (eventroles)
    lease_duration: float = 15.0
    lease_renew: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)  # retries of failed reconciles


@dataclass
class OperatorHandle:
    """Observe and stop an operator running in another thread."""

    loop: asyncio.AbstractEventLoop | None = None
    stop_event: asyncio.Event | None = None
    leading: bool = False
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    metrics_port: int | None = None
    liveness_port: int | None = None  # liveness and readiness (mas_operator.health)
    readiness: Readiness = field(default_factory=lambda: Readiness(None))

    def stop(self) -> None:
        """Ask the operator to stop (thread-safe)."""
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)


def load_configuration(kubeconfig: str | None) -> k8s.Configuration:
    """Client configuration: ``kubeconfig``, else ``$KUBECONFIG``/``~/.kube/config``, else
    the in-cluster ServiceAccount."""
    cfg = k8s.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    if path is None and os.path.exists(os.path.expanduser("~/.kube/config")):
        path = os.path.expanduser("~/.kube/config")
    if path is not None:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, client_configuration=cfg
        )
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return cfg


def connection_info(cfg: k8s.Configuration) -> kopf.ConnectionInfo:
    """kopf's credentials from the same client configuration the reconciler uses."""
    if cfg.refresh_api_key_hook is not None:
        cfg.refresh_api_key_hook(cfg)
    auth = str(cfg.get_api_key_with_prefix("BearerToken", alias="authorization") or "")
    scheme, _, token = auth.strip().partition(" ")
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def operator_settings(settings: kopf.OperatorSettings, scanning: bool = True) -> None:
    """kopf's storage under our own domain, standalone (the Lease elects), warnings as Events;
    without ``scanning``, no cluster-wide listing of namespaces and CRDs (a scoped install,
    :mod:`mas_operator.scopes`)."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=DOMAIN)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=DOMAIN, key=DIFFBASE_KEY
    )
    settings.posting.level = logging.WARNING
    settings.peering.standalone = True
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.scanning.disabled = not scanning


async def _wait_stop(stop: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


async def _lease_call(
    call: Callable[[], bool], what: str, readiness: Readiness | None = None
) -> bool | None:
    """``call()`` in a thread; ``None`` (logged) when the API server cannot be reached.
    An answer, whatever it says, is recorded in ``readiness``."""
    try:
        result = await asyncio.to_thread(call)
    except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        logger.warning("%s the Lease failed: %s", what, exc)
        return None
    if readiness is not None:
        readiness.api_answered()
    return result


async def _keep_lease(
    elector: LeaderElector, stop: asyncio.Event, lost: asyncio.Event, readiness: Readiness
) -> None:
    """Renew until stopped; give up leadership when renewal fails for a whole lease term.

    A leader that cannot renew for ``duration`` seconds must assume a standby has taken
    over, so it stops rather than act beside the new leader.
    """
    settings = elector.settings
    renewed = time.monotonic()
    while not await _wait_stop(stop, settings.renew_every):
        held = await _lease_call(elector.renew, "renewing", readiness)
        if held:
            renewed = time.monotonic()
            continue
        expired = time.monotonic() - renewed >= settings.duration - settings.renew_every
        if held is False or expired:
            why = "the Lease is held by another" if held is False else "could not renew in time"
            logger.error(
                "lost the Lease %s/%s (%s); stopping", settings.namespace, settings.name, why
            )
            lost.set()
            stop.set()
            return


def _elector(options: OperatorOptions, api: k8s.ApiClient) -> LeaderElector:
    namespace = (
        options.lease_namespace
        or os.environ.get("POD_NAMESPACE")
        or (options.namespaces[0] if options.namespaces else "default")
    )
    identity = (
        options.identity
        or os.environ.get("POD_NAME")
        or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    )
    return LeaderElector(
        api,
        LeaseSettings(
            options.lease_name, namespace, identity, options.lease_duration, options.lease_renew
        ),
    )


async def run_operator(options: OperatorOptions, handle: OperatorHandle | None = None) -> bool:
    """Run until stopped; ``False`` when it stopped because the Lease was lost."""
    handle = handle or OperatorHandle()
    handle.loop = asyncio.get_running_loop()
    stop = handle.stop_event = handle.stop_event or asyncio.Event()
    cfg = load_configuration(options.kubeconfig)
    api = k8s.ApiClient(cfg)
    metrics_server: WSGIServer | None = None
    liveness: web.AppRunner | None = None
    lost = asyncio.Event()
    elector = _elector(options, api) if options.leader_election else None
    readiness = handle.readiness = Readiness(options.lease_duration if elector else None)
    try:
        if options.metrics_port is not None:
            metrics_server, _ = start_http_server(
                options.metrics_port, options.metrics_address, registry=handle.metrics.registry
            )
            handle.metrics_port = metrics_server.server_port
        if options.liveness:
            liveness, handle.liveness_port = await serve_health(
                options.liveness, lambda: handle.leading, readiness
            )
        if elector is not None:
            logger.info(
                "waiting for the Lease %s/%s as %s",
                elector.settings.namespace,
                elector.settings.name,
                elector.settings.identity,
            )
            while not await _lease_call(elector.try_acquire, "taking", readiness):
                if await _wait_stop(stop, elector.settings.retry_every):
                    return True
        handle.leading = True
        handle.metrics.leader.set(1)
        ran = await _run_kopf(
            options=options, api=api, handle=handle, stop=stop, elector=elector, lost=lost
        )
        return ran and not lost.is_set()
    finally:
        handle.leading = False
        handle.metrics.leader.set(0)
        if elector is not None and not lost.is_set():
            await _lease_call(elector.release, "releasing")
        if liveness is not None:
            await liveness.cleanup()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        api.close()  # type: ignore[no-untyped-call]


async def _run_kopf(
    *,
    options: OperatorOptions,
    api: k8s.ApiClient,
    handle: OperatorHandle,
    stop: asyncio.Event,
    elector: LeaderElector | None,
    lost: asyncio.Event,
) -> bool:
    """Run kopf until stopped; ``False`` at once when a scoped operator finds no CRD."""
    registry = kopf.OperatorRegistry()
    register(registry)
    scoped = not options.all_namespaces and exact_namespaces(options.namespaces)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(load_configuration(options.kubeconfig))

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        operator_settings(settings, scanning=not scoped)

    ctx = OperatorContext(
        Cluster(api),
        handle.metrics,
        options.resync,
        options.cold_every,
        console=options.console_principal,
        console_namespaces=tuple(options.console_namespaces),
        api_server=options.api_server,
        denial_events=options.denial_events,
        queue=WorkQueue(options.backoff),
    )
    if scoped and not await crd_served(ctx.cluster):
        return False
    tasks = [asyncio.create_task(serve(ctx)), asyncio.create_task(ctx.cards.run())]
    if scoped:
        reporter = UnwatchedReporter(ctx.cluster, options.namespaces, handle.metrics)
        tasks.append(
            asyncio.create_task(report_unwatched(reporter, options.resync, lambda: ctx.closing))
        )
    if elector is not None:
        tasks.append(asyncio.create_task(_keep_lease(elector, stop, lost, handle.readiness)))
    try:
        await kopf.operator(
            registry=registry,
            memo=SharedMemo(ctx=ctx),
            standalone=True,
            clusterwide=options.all_namespaces,
            namespaces=list(options.namespaces),
            stop_flag=stop,
            ready_flag=handle.readiness.kopf_started,
        )
    finally:
        ctx.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return True

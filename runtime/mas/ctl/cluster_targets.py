"""What an ``APP/AGENT`` target names, read from an Application and its pods (pure).

:mod:`mas.ctl.cluster` does the API calls; this module decides from what they returned
(JSON objects as the API server sends them, camelCase keys), so every answer and every
refusal is testable without a cluster:

- :func:`parse_target`: ``APP/AGENT``, both DNS-1123 names;
- :func:`resolve_agent`: AGENT is an agent of the Application's agency with an A2A door
  (a deployed endpoint). Otherwise a :class:`ClusterTargetError` says what AGENT is and
  what would work: the known agents (which are deployed, which run in-process and inside
  which deployed agents' pods), an external agent's own URL, an MCP-only door;
- :func:`pick_pod`: a Ready pod of the agent (its Deployment's pods, by the operator's
  selector labels), else why none is: each pod's reason as ``kubectl get pods`` shows it
  (``ImagePullBackOff``, ``CrashLoopBackOff``, ``Pending (Unschedulable: ...)``), or a
  Deployment with no pods;
- :class:`UrlRewrite`: the card's in-cluster interface URLs to the local forwarded ports.

Errors::

    RuntimeFailure                  (mas.runtime.errors)
    └── ClusterTargetError          one line: the target cannot be reached, and why
        └── ClusterAccessError      no kubeconfig, unreachable API server, refused (401/403)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from mas.infra.addresses import DEFAULT_PORTS
from mas.infra.errors import InfraError
from mas.infra.incluster import dns_label, service_name
from mas.infra.models import Application
from mas.infra.routes import Routes, build_routes
from mas.runtime.errors import RuntimeFailure

# The operator's selector labels and container port names (mas_operator.names, which the
# runtime may not import; a test pins them equal).
LABEL_APPLICATION = "maslab.io/application"
LABEL_AGENT = "maslab.io/agent"
PORT_HTTP = "a2a-http"
PORT_GRPC = "a2a-grpc"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
NEEDED = "get applications, list pods, create pods/portforward"


class ClusterTargetError(RuntimeFailure):
    """An ``APP/AGENT`` target that cannot be reached; the message is one line."""


class ClusterAccessError(ClusterTargetError):
    """The cluster cannot be asked: no kubeconfig, API server unreachable, or refused."""


def parse_target(target: str) -> tuple[str, str]:
    """``APP/AGENT`` as ``(app, agent)``; refuses anything else with what is accepted."""
    app, sep, agent = target.partition("/")
    if not sep or not _NAME.match(app) or not _NAME.match(agent) or len(app) > 253:
        raise ClusterTargetError(
            f"target {target!r} is not APP/AGENT; accepted: an Application and one of its "
            "agents (e.g. research-desk/concierge) or an agent's URL (http(s)://host:port)"
        )
    return app, agent


def pod_selector(app: str, agent: str) -> str:
    """The label selector of ``agent``'s pods (its Deployment's selector)."""
    return f"{LABEL_APPLICATION}={dns_label(app)},{LABEL_AGENT}={agent}"


@dataclass(frozen=True)
class ResolvedAgent:
    """A deployed agent of an Application, as its status tells it."""

    app: str
    agent: str
    namespace: str
    status: Mapping[str, Any]  # status.agents.<agent> (empty before the operator wrote it)


def _routes(app_obj: Mapping[str, Any]) -> Routes | None:
    document = {
        "apiVersion": app_obj.get("apiVersion"),
        "kind": "Application",
        "metadata": {"name": (app_obj.get("metadata") or {}).get("name")},
        "spec": app_obj.get("spec"),
    }
    try:
        return build_routes(Application.model_validate(document))
    except (ValidationError, InfraError):
        return None  # the operator stalls it; what status says is all there is


def _joined(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none)"


def resolve_agent(app_obj: Mapping[str, Any], agent: str, namespace: str) -> ResolvedAgent:
    """``agent`` of the Application ``app_obj``, deployed with an A2A door; else why not."""
    name = str((app_obj.get("metadata") or {}).get("name"))
    spec = app_obj.get("spec") or {}
    agents = list((spec.get("agency") or {}).get("agents") or {})
    endpoints = spec.get("endpoints") or {}
    status_agents = (app_obj.get("status") or {}).get("agents") or {}
    routes = _routes(app_obj)
    hosts = routes.runtimes if routes is not None else {a: (a,) for a in status_agents}
    a2a = {item.agent for item in routes.listeners if item.protocol == "a2a"} if routes else set()
    if routes is None:
        a2a = set(status_agents)
    where = f"Application {name!r} in namespace {namespace!r}"
    if agent not in agents:
        endpoint = endpoints.get(agent)
        if isinstance(endpoint, Mapping) and endpoint.get("url"):
            raise ClusterTargetError(
                f"{agent!r} is an external agent {where} only uses, not one it deploys; "
                f"reach it at its own URL: {endpoint['url']}"
            )
        known = [_describe(a, hosts, a2a) for a in sorted(agents)]
        raise ClusterTargetError(f"no agent {agent!r} in {where}; its agents: {_joined(known)}")
    if agent not in hosts:
        inside = sorted(d for d, hosted in hosts.items() if agent in hosted and d != agent)
        if inside:
            raise ClusterTargetError(
                f"{agent!r} is not deployed: it runs in-process inside the pods of "
                f"{_joined(inside)}; ask one of those (e.g. {name}/{inside[0]}), which "
                f"delegates to it"
            )
        raise ClusterTargetError(
            f"{agent!r} is not deployed and no deployed agent of {where} delegates to it; "
            f"deployed: {_joined(sorted(hosts))}"
        )
    if agent not in a2a:
        raise ClusterTargetError(
            f"{agent!r} has no A2A endpoint in {where} (it is served over "
            f"{_joined(_protocols(endpoints, agent))} only); mas-ctl speaks A2A"
        )
    status = status_agents.get(agent)
    return ResolvedAgent(name, agent, namespace, status if isinstance(status, Mapping) else {})


def _protocols(endpoints: Mapping[str, Any], agent: str) -> list[str]:
    out = []
    for key, endpoint in endpoints.items():
        if isinstance(endpoint, Mapping) and (endpoint.get("agent") or key) == agent:
            out.append(str(endpoint.get("protocol", "a2a")))
    return sorted(set(out))


def _describe(agent: str, hosts: Mapping[str, Sequence[str]], a2a: set[str]) -> str:
    if agent in hosts:
        return f"{agent} (deployed)" if agent in a2a else f"{agent} (deployed, no A2A endpoint)"
    inside = sorted(d for d, hosted in hosts.items() if agent in hosted)
    return f"{agent} (in-process, inside {_joined(inside)})" if inside else f"{agent} (unused)"


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def pod_reason(pod: Mapping[str, Any]) -> str:
    """Why ``pod`` is not Ready, as ``kubectl get pods`` and ``describe`` would say it."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        for kind in ("waiting", "terminated"):
            detail = state.get(kind) or {}
            if detail.get("reason"):
                said = f": {_one_line(detail['message'])}" if detail.get("message") else ""
                return f"{detail['reason']}{said}"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    scheduled = conditions.get("PodScheduled") or {}
    phase = status.get("phase") or "Pending"
    if scheduled.get("status") == "False":
        said = f": {_one_line(scheduled['message'])}" if scheduled.get("message") else ""
        return f"{phase} ({scheduled.get('reason') or 'not scheduled'}{said})"
    ready = conditions.get("Ready") or {}
    if ready.get("reason") or ready.get("message"):
        said = f": {_one_line(ready['message'])}" if ready.get("message") else ""
        return f"{phase}, not Ready ({ready.get('reason') or 'not ready'}{said})"
    return f"{phase}, not Ready yet"


def pick_pod(resolved: ResolvedAgent, pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """A Ready pod of the agent (by name, for a stable choice); else why none is."""
    live = sorted(
        (p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")),
        key=lambda p: str((p.get("metadata") or {}).get("name")),
    )
    ready = [p for p in live if _ready(p)]
    if ready:
        return ready[0]
    target = f"{resolved.app}/{resolved.agent} in namespace {resolved.namespace!r} is not Ready"
    if live:
        reasons = [f"pod {p['metadata']['name']}: {pod_reason(p)}" for p in live]
        raise ClusterTargetError(f"{target}: {'; '.join(reasons)}")
    deployment = service_name(resolved.app, resolved.agent)
    if not resolved.status:
        raise ClusterTargetError(
            f"{target}: no pods, and the operator has not reported it yet "
            f"(kubectl describe masapp {resolved.app} -n {resolved.namespace})"
        )
    if resolved.status.get("replicas") == 0:
        raise ClusterTargetError(f"{target}: its Deployment {deployment} is scaled to 0 (no pods)")
    raise ClusterTargetError(f"{target}: its Deployment {deployment} has no pods yet")


def pod_ports(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's named container ports (``a2a-http``, ``a2a-grpc``, ...)."""
    out: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") and port.get("containerPort"):
                out[str(port["name"])] = int(port["containerPort"])
    return out


@dataclass(frozen=True)
class UrlRewrite:
    """The agent's in-cluster addresses (its Service's names, the host of the URL its status
    advertises) on a forwarded port, mapped to the local listener for that port."""

    hosts: frozenset[str]
    service_prefix: str  # "<service>.<namespace>.svc." (any cluster domain after it)
    local: Mapping[int, int]  # remote port -> local port

    @classmethod
    def for_agent(cls, resolved: ResolvedAgent, local: Mapping[int, int]) -> UrlRewrite:
        service = service_name(resolved.app, resolved.agent)
        ns = resolved.namespace
        hosts = {service, f"{service}.{ns}", f"{service}.{ns}.svc"}
        for key in ("url", "card_url"):
            advertised = resolved.status.get(key)
            if isinstance(advertised, str):
                try:
                    host = urlsplit(advertised).hostname
                except ValueError:
                    host = None
                if host:
                    hosts.add(host.lower().rstrip("."))
        return cls(frozenset(hosts), f"{service}.{ns}.svc.", dict(local))

    def _known(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts or name.startswith(self.service_prefix)

    def __call__(self, url: str) -> str:
        """``url`` at the local forwarded address when it is one of the agent's; else as is."""
        if "://" not in url:  # a gRPC address: host:port
            host, sep, port_text = url.rpartition(":")
            if sep and port_text.isdigit() and self._known(host.strip("[]")):
                local = self.local.get(int(port_text))
                if local is not None:
                    return f"127.0.0.1:{local}"
            return url
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return url
        if parts.hostname is None or port is None or not self._known(parts.hostname):
            return url
        local = self.local.get(port)
        if local is None:
            return url
        where = f"127.0.0.1:{local}"
        return urlunsplit((parts.scheme, where, parts.path, parts.query, parts.fragment))

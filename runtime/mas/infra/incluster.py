"""The in-cluster URL model: what a deployed agent advertises, and how pods reach it.

An endpoint's ``url`` is what clients are told. In a cluster each deployed agent (an agent
of the agency whose endpoint has ``usage: deploy`` or ``use-and-deploy``) runs in pods of
its own behind the Service ``<application>-<agent>``, on the url's port (8080 when the url
is omitted). The operator, ``mas-operator render`` and ``mas-ctl validate --cluster`` all
apply these rules through :func:`cluster_document`:

1. A deployed endpoint without a url is advertised at its Service:
   ``http://<application>-<agent>.<namespace>.svc:8080``.
2. A deployed endpoint whose url is pod-local (a loopback address such as ``127.0.0.1``,
   ``::1``, ``localhost`` or ``*.localhost``, or an unspecified one such as ``0.0.0.0``)
   is advertised at its Service instead, on the same port, and a :class:`UrlNote` says so
   (the operator posts it as a Warning Event and in the ``Wired`` condition). Such a url is
   right on a laptop (``mas-ctl run-mas``) and wrong in a pod, where it is the pod itself,
   so the same document works in both places.
3. Any other url (an Ingress or LoadBalancer name, say) is advertised as written.
4. A delegation route to a deployed agent of the same Application always goes to that
   agent's Service, whatever it advertises (:func:`pod_document`): the traffic stays in
   the cluster and matches the NetworkPolicies, which admit peers by pod label.
5. A deployed agent's pod-local ``a2a.grpc_url`` (``127.0.0.1:50051``, say) is advertised
   at its Service on the same port, with a :class:`UrlNote`, as rule 2 does for the url; a
   deployed agent without one advertises its url's host (the Service) and ``grpc_port``.
6. Another door of a deployed agent (an endpoint row with ``agent: <id>``, such as an MCP
   door) follows rules 1 to 3 at that agent's Service, on its own port (8090 when it has
   no url).
7. A ``usage: use`` endpoint (an agent this Application does not deploy) with a pod-local
   url is kept, since nothing says where that agent runs, and a :class:`UrlNote` says
   that delegations to it from the pods will fail to connect.

Pure: no sockets, no API calls. It works on the raw document (before validation), so a
document with other problems still gets them all reported by validation afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from mas.infra.addresses import DEFAULT_PORTS, AddressError, ip_of, parse_grpc_address
from mas.infra.routes import Route

DEFAULT_SERVICE_PORT = 8080
DEFAULT_MCP_PORT = 8090  # an MCP door (an endpoint with ``agent:``) that sets no url

_MAX_LABEL = 63
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str) -> str:
    """``text`` as a DNS-1123 label: lowercase, ``.`` to ``-``, at most 63 characters.

    A name that has to be shortened keeps a stable 8-character hash of the full text, so two
    long names never collide.
    """
    label = _NOT_DNS.sub("-", text.lower()).strip("-") or "x"
    if len(label) <= _MAX_LABEL:
        return label
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{label[: _MAX_LABEL - 9].rstrip('-')}-{digest}"


def service_name(application: str, agent: str) -> str:
    """The name of a deployed agent's Service (and of its other child objects)."""
    return dns_label(f"{application}-{agent}")


def service_url(
    application: str, agent: str, namespace: str, port: int = DEFAULT_SERVICE_PORT
) -> str:
    """The in-cluster URL of a deployed agent: its Service's DNS name and port."""
    return f"http://{service_name(application, agent)}.{namespace}.svc:{port}"


def pod_local_kind(host: str) -> str | None:
    """``"loopback"`` or ``"unspecified"`` when ``host`` means the pod itself, else None."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    address = ip_of(name)
    if address is None:
        return None
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    return None


def _pod_local_port(url: Any) -> tuple[str, int] | None:
    """The kind and port of a pod-local ``url``; None when it is not one (or not a URL)."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    kind = pod_local_kind(parts.hostname or "")
    if kind is None or parts.scheme not in DEFAULT_PORTS:
        return None
    return kind, port if port is not None else DEFAULT_PORTS[parts.scheme]


def _pod_local_grpc(address: Any) -> tuple[str, int] | None:
    """The kind and port of a pod-local gRPC ``host:port``; None otherwise (or if invalid)."""
    if not isinstance(address, str):
        return None
    try:
        grpc = parse_grpc_address(address)
    except AddressError:
        return None  # validation reports it
    kind = pod_local_kind(grpc.host)
    return None if kind is None else (kind, grpc.port)


@dataclass(frozen=True)
class UrlNote:
    """A url the cluster cannot use as written: what was done about it, in one message."""

    path: str
    url: str
    mapped_to: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class ClusterUrls:
    """A document with its in-cluster urls, and what the rules changed or could not fix."""

    document: dict[str, Any]
    notes: tuple[UrlNote, ...]
    services: Mapping[str, str]  # deployed agent -> its Service url


def _deployed(endpoint: Mapping[str, Any]) -> bool:
    usage = endpoint.get("usage")
    return usage in ("deploy", "use-and-deploy") or (
        usage is None and endpoint.get("expose") is True
    )


def _delegators(spec: Mapping[str, Any], target: str) -> list[str]:
    agents = (spec.get("agency") or {}).get("agents") or {}
    if not isinstance(agents, Mapping):
        return []
    out = []
    for name, manifest in agents.items():
        delegates = ((manifest or {}).get("spec") or {}).get("delegates_to") or []
        if isinstance(delegates, list) and target in delegates:
            out.append(str(name))
    return out


def _tool_users(spec: Mapping[str, Any], server: str) -> list[str]:
    """The agents whose ``spec.tools`` name the tool server ``server``."""
    agents = (spec.get("agency") or {}).get("agents") or {}
    if not isinstance(agents, Mapping):
        return []
    out = []
    for name, manifest in agents.items():
        grants = ((manifest or {}).get("spec") or {}).get("tools") or []
        if isinstance(grants, list) and any(
            isinstance(g, Mapping) and g.get("server") == server for g in grants
        ):
            out.append(str(name))
    return out


def _what(kind: str) -> str:
    if kind == "loopback":
        return "a loopback address, which in a pod is the pod itself"
    return "an unspecified address (a bind address, never one a client can reach)"


def cluster_document(document: Mapping[str, Any], namespace: str) -> ClusterUrls:
    """``document`` with each deployed endpoint's url as the cluster advertises it."""
    doc = copy.deepcopy(dict(document))
    application = str((doc.get("metadata") or {}).get("name", ""))
    spec = doc.get("spec")
    endpoints = spec.get("endpoints") if isinstance(spec, dict) else None
    agents = (spec.get("agency") or {}).get("agents") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(endpoints, dict):
        return ClusterUrls(doc, (), {})
    local_agents = set(agents) if isinstance(agents, dict) else set()
    notes: list[UrlNote] = []
    services: dict[str, str] = {}
    for agent, endpoint in endpoints.items():
        if not isinstance(endpoint, dict):
            continue
        path = f"spec.endpoints.{agent}.url"
        url = endpoint.get("url")
        local = _pod_local_port(url)
        door = endpoint.get("agent")
        if _deployed(endpoint) and isinstance(door, str) and door != agent and door in local_agents:
            # another door of an agent (an MCP endpoint with ``agent:``): that agent's
            # Service, on the door's own port
            if url is None:
                endpoint["url"] = service_url(application, door, namespace, DEFAULT_MCP_PORT)
            elif local is not None:
                kind, port = local
                endpoint["url"] = service_url(application, door, namespace, port)
                message = (
                    f"{url} is {_what(kind)}; in the cluster this door of {door!r} is "
                    f"advertised and reached at its Service, {endpoint['url']}"
                )
                notes.append(UrlNote(path, str(url), endpoint["url"], message))
        elif _deployed(endpoint) and agent in local_agents:
            if url is None:
                endpoint["url"] = service_url(application, str(agent), namespace)
            elif local is not None:
                kind, port = local
                endpoint["url"] = service_url(application, str(agent), namespace, port)
                message = (
                    f"{url} is {_what(kind)}; in the cluster {agent!r} is advertised and "
                    f"reached at its Service, {endpoint['url']}"
                )
                notes.append(UrlNote(path, str(url), endpoint["url"], message))
            services[str(agent)] = _service_of(application, str(agent), namespace, endpoint)
            note = _map_grpc_url(endpoint, application, str(agent), namespace)
            if note is not None:
                notes.append(note)
        elif local is not None:
            kind, _ = local
            who = _delegators(spec, str(agent))
            users = _tool_users(spec, str(agent))
            if who:
                delegations = f"delegations to {agent!r} from {', '.join(who)}"
            elif users:
                delegations = f"tool calls to {agent!r} from {', '.join(users)}"
            else:
                delegations = "routes to it"

            message = (
                f"{url} is {_what(kind)}; this Application does not deploy {agent!r}, so "
                f"{delegations} fail to connect from the pods: set a url the pods can reach"
            )
            notes.append(UrlNote(path, str(url), None, message))
    # by path: the API server hands the operator the endpoints in key order, a file may not
    return ClusterUrls(doc, tuple(sorted(notes, key=lambda note: note.path)), services)


def _map_grpc_url(
    endpoint: dict[str, Any], application: str, agent: str, namespace: str
) -> UrlNote | None:
    """Rule 5: a deployed agent's pod-local ``a2a.grpc_url`` at its Service, same port."""
    a2a = endpoint.get("a2a")
    address = a2a.get("grpc_url") if isinstance(a2a, dict) else None
    local = _pod_local_grpc(address)
    if local is None or not isinstance(a2a, dict):
        return None
    kind, port = local
    a2a["grpc_url"] = f"{service_name(application, agent)}.{namespace}.svc:{port}"
    message = (
        f"{address} is {_what(kind)}; in the cluster the gRPC interface of {agent!r} is "
        f"advertised and reached at its Service, {a2a['grpc_url']}"
    )
    return UrlNote(f"spec.endpoints.{agent}.a2a.grpc_url", str(address), a2a["grpc_url"], message)


def _service_of(application: str, agent: str, namespace: str, endpoint: Mapping[str, Any]) -> str:
    url = endpoint.get("url")
    port = DEFAULT_SERVICE_PORT
    try:
        parts = urlsplit(str(url))
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, DEFAULT_SERVICE_PORT)
    except ValueError:
        pass  # validation reports the url
    return service_url(application, agent, namespace, port)


def pod_document(
    document: Mapping[str, Any], services: Mapping[str, str], agent: str
) -> dict[str, Any]:
    """The document the pods of ``agent`` read: every other deployed agent at its Service.

    ``document`` is a :attr:`ClusterUrls.document`, ``services`` its
    :attr:`ClusterUrls.services`. ``agent``'s own url stays what it advertises (its
    AgentCard); the urls of the others are only routes from this pod, so they name the
    Services.
    """
    doc = copy.deepcopy(dict(document))
    endpoints = doc["spec"]["endpoints"]
    for other, url in services.items():
        if other != agent:
            endpoints[other]["url"] = url
    return doc


def through_services(routes: Iterable[Route], services: Mapping[str, str]) -> tuple[Route, ...]:
    """``routes`` with each remote route to a deployed agent sent to its Service url."""
    return tuple(
        dataclasses.replace(r, url=services[r.target])
        if r.kind == "remote" and r.target in services
        else r
        for r in routes
    )

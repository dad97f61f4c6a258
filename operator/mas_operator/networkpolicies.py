"""``build_network_policy``: each agent pod reaches only what its routes need.

Egress: DNS on port 53 to any destination, the pods of each agent of this Application it
routes to (on that agent's A2A ports), each external peer (an IP address becomes an
``ipBlock``; a host name can only be allowed by port, since a NetworkPolicy cannot name
hosts; a pod-local one gets no rule), the configured model endpoint, and a PostgreSQL
task store (its URL's address and port; PostgreSQL's port 5432 to any address when the URL
comes from a Secret, which the operator does not read), and the API server, where the
agent's caller check reads the cluster issuer's keys (:class:`~mas_operator.plan.ApiServer`:
its endpoints' addresses and ports as the chart found them, else those ports to any
address). DNS is not limited
to pods (``namespaceSelector: {}``): the resolver a pod's ``/etc/resolv.conf`` names is often
not a pod (NodeLocal DNSCache and other host-network resolvers, a resolver on the node or
outside the pod network), and a policy that blocks it breaks every name, the Services of
peer agents included. Ports are pod ports: a Service's port is translated before policies
apply, and the operator gives each Service port the same number as the container port it
targets.
Webhooks: a pod whose endpoint advertises ``a2a.capabilities.pushNotifications`` POSTs to
receivers its clients name at run time, so no peer lists them. Its egress follows the
endpoint's ``a2a.push`` policy, which the runtime checks before every POST: by default TCP
on any port to every address outside the ranges that policy refuses (:data:`NON_PUBLIC`:
private, shared, loopback, link-local, multicast, reserved; a cluster's pod and Service
ranges are private ones); each IP address of ``allowed_hosts`` as an ``ipBlock``; and TCP
to any destination when ``allow_private`` is on or ``allowed_hosts`` names a host (a
NetworkPolicy cannot name hosts, and such a receiver may be a pod).
Ingress: the A2A ports from anywhere (the endpoint is deployed: publicly available), the
metrics port only from ``spec.runtime.network_policy.metrics_namespace`` when it is set.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from mas.infra.addresses import ip_of
from mas_operator.names import (
    METRICS_PORT,
    PORT_GRPC,
    PORT_HTTP,
    PORT_MCP,
    child_labels,
    selector_labels,
)
from mas_operator.plan import AgentPlan, Peer, Plan

DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
ANY_TCP_PORT = [{"protocol": "TCP"}]  # a NetworkPolicyPort without a port: all of them
# Addresses the default push policy (library_ioa.plugins.a2a.server.push.url_policy) never POSTs to,
# kept out of the webhook egress; a subset of its refusals, so no push it allows is blocked.
NON_PUBLIC = {
    "0.0.0.0/0": (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ),
    "::/0": ("::/127", "fc00::/7", "fe80::/10", "ff00::/8"),
}


def _ip_block(host: str | None) -> dict[str, Any] | None:
    if host is None:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    bits = 32 if address.version == 4 else 128
    return {"ipBlock": {"cidr": f"{address}/{bits}"}}


def _egress_rule(plan: Plan, peer: Peer) -> dict[str, Any]:
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": peer.port}]}
    if peer.agent is not None:
        rule["to"] = [{"podSelector": {"matchLabels": selector_labels(plan.name, peer.agent)}}]
    else:
        block = _ip_block(peer.host)
        if block is not None:
            rule["to"] = [block]
    return rule


def _api_server_egress(plan: Plan) -> dict[str, Any]:
    """The API server's endpoints (module docstring): the caller check reads keys there."""
    api = plan.api_server
    rule: dict[str, Any] = {"ports": [{"protocol": "TCP", "port": p} for p in api.ports]}
    if api.cidrs:
        rule["to"] = [{"ipBlock": {"cidr": cidr}} for cidr in api.cidrs]
    return rule


def _push_egress(plan: Plan, agent: AgentPlan) -> list[dict[str, Any]]:
    """Egress to webhook receivers when the agent's endpoint advertises push (docstring)."""
    door = next(item for item in plan.wired.routes.listeners if item.agent == agent.agent)
    a2a = plan.app.spec.endpoints[door.endpoint].a2a
    if not a2a.capabilities.pushNotifications:
        return []
    addresses = [ip_of(host) for host in a2a.push.allowed_hosts]
    if a2a.push.allow_private or None in addresses:
        return [{"ports": ANY_TCP_PORT}]
    public = [{"ipBlock": {"cidr": c, "except": list(e)}} for c, e in NON_PUBLIC.items()]
    listed = [_ip_block(str(a)) for a in dict.fromkeys(addresses)]
    return [{"to": public + [b for b in listed if b is not None], "ports": ANY_TCP_PORT}]


def _ingress_rules(plan: Plan, agent: AgentPlan) -> list[dict[str, Any]]:
    a2a = [{"protocol": "TCP", "port": PORT_HTTP}]
    if agent.grpc_port is not None:
        a2a.append({"protocol": "TCP", "port": PORT_GRPC})
    if agent.mcp_port is not None:
        a2a.append({"protocol": "TCP", "port": PORT_MCP})
    rules: list[dict[str, Any]] = [{"ports": a2a}]
    metrics_namespace = plan.app.spec.runtime.network_policy.metrics_namespace
    if metrics_namespace:
        rules.append(
            {
                "from": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": metrics_namespace}
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
            }
        )
    return rules


def build_network_policy(plan: Plan, agent: AgentPlan) -> dict[str, Any]:
    """The NetworkPolicy of one deployed agent's pods."""
    egress: list[dict[str, Any]] = [{"ports": DNS_PORTS}]  # any resolver (module docstring)
    egress += [_egress_rule(plan, peer) for peer in agent.peers]
    egress += _push_egress(plan, agent)
    egress.append(_api_server_egress(plan))
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": agent.name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
        },
        "spec": {
            "podSelector": {"matchLabels": selector_labels(plan.name, agent.agent)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": _ingress_rules(plan, agent),
            "egress": egress,
        },
    }

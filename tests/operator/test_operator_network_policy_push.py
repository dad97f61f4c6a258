"""The webhook egress of an agent whose endpoint advertises push notifications.

The receivers are named by clients at run time, so the rule follows the endpoint's
``a2a.push`` policy (operator/mas_operator/networkpolicies.py): public addresses by default,
listed addresses, or anywhere when private receivers or host names are allowed.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from library_ioa.plugins.a2a.server.push.url_policy import address_is_public
from mas_operator.children import build_children
from mas_operator.networkpolicies import NON_PUBLIC
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(30)

ANY_TCP = [{"protocol": "TCP"}]


def app(push: bool, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    a2a: dict[str, Any] = {"capabilities": {"pushNotifications": push}}
    if policy is not None:
        a2a["push"] = policy
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "desk", "namespace": "team-a"},
        "spec": {
            "agency": {
                "entry": "concierge",
                "agents": {
                    "concierge": {"spec": {"delegates_to": ["researcher"]}},
                    "researcher": {"spec": {}},
                },
            },
            "endpoints": {
                "concierge": {"usage": "deploy", "a2a": a2a},
                "researcher": {"usage": "use-and-deploy"},
            },
        },
    }


def egress(doc: dict[str, Any], agent: str = "concierge") -> list[dict[str, Any]]:
    children = build_children(plan_application(doc))
    [policy] = [
        c
        for c in children
        if c["kind"] == "NetworkPolicy" and c["metadata"]["name"] == f"desk-{agent}"
    ]
    rules: list[dict[str, Any]] = policy["spec"]["egress"]
    return rules


def webhook_rules(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rules if r["ports"] == ANY_TCP]


def test_no_push_no_webhook_egress() -> None:
    assert webhook_rules(egress(app(push=False))) == []
    assert webhook_rules(egress(app(push=True), agent="researcher")) == []


def test_push_by_default_reaches_every_public_address_on_any_port() -> None:
    [rule] = webhook_rules(egress(app(push=True)))
    assert rule["to"] == [
        {"ipBlock": {"cidr": cidr, "except": list(excluded)}}
        for cidr, excluded in NON_PUBLIC.items()
    ]
    # The pod and Service ranges of a cluster (private ones) stay closed to the pod.
    v4 = rule["to"][0]["ipBlock"]["except"]
    for inside in ("10.244.0.7", "10.96.0.10", "172.20.1.1", "192.168.5.5", "169.254.169.254"):
        assert any(ipaddress.ip_address(inside) in ipaddress.ip_network(n) for n in v4), inside


@pytest.mark.parametrize("cidr", [n for excluded in NON_PUBLIC.values() for n in excluded])
def test_the_excluded_ranges_are_ones_the_push_policy_refuses(cidr: str) -> None:
    """Nothing the runtime would POST to is blocked: each excluded range is refused there."""
    network = ipaddress.ip_network(cidr)
    for address in (network[0], network[-1], network[network.num_addresses // 2]):
        assert not address_is_public(str(address)), address


def test_allowed_addresses_are_added_as_ip_blocks() -> None:
    policy = {"allowed_hosts": ["10.1.2.3", "[fd00::5]", "10.1.2.3"]}
    [rule] = webhook_rules(egress(app(push=True, policy=policy)))
    assert rule["to"][2:] == [
        {"ipBlock": {"cidr": "10.1.2.3/32"}},
        {"ipBlock": {"cidr": "fd00::5/128"}},
    ]


@pytest.mark.parametrize(
    "policy",
    [{"allow_private": True}, {"allowed_hosts": ["10.1.2.3", "hooks.team-a.svc"]}],
)
def test_private_receivers_or_host_names_open_tcp_to_any_destination(
    policy: dict[str, Any],
) -> None:
    assert webhook_rules(egress(app(push=True, policy=policy))) == [{"ports": ANY_TCP}]


def test_an_oidc_issuer_is_reachable_by_its_port() -> None:
    """The agent reads its OIDC issuer's discovery document and JWKS itself: egress to the
    issuer's port (a host name cannot be named by a NetworkPolicy; an address can)."""
    doc = app(push=False)
    issuers = ["https://login.example.com/realms/staff", "https://10.0.0.7:8443/idp"]
    schemes = [{"type": "oidc", "oidc": {"issuer": i, "audiences": ["mas"]}} for i in issuers]
    doc["spec"]["endpoints"]["concierge"]["a2a"]["auth"] = {"schemes": schemes}
    rules = egress(doc)
    assert {"ports": [{"protocol": "TCP", "port": 443}]} in rules
    address = {
        "ports": [{"protocol": "TCP", "port": 8443}],
        "to": [{"ipBlock": {"cidr": "10.0.0.7/32"}}],
    }
    assert address in rules
    assert not any(r.get("ports") == [{"protocol": "TCP", "port": 443}] for r in egress(app(False)))

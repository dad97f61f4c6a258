"""A real reconcile: no Secret value in status, Events, ConfigMaps, pods or the operator log."""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import pytest
from kubernetes import client as k8s
from security_support import AUTH_REF, HEADER_REF, secured_app
from tests.operator.operator_support import eventually

from mas_operator.names import METRICS_PORT

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(120)]


def test_a_reconciled_application_carries_only_secret_references(
    running_operator: Any, operator_api: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api = operator_api
    values = {
        ref.name: f"s3cret-{ref.name}-{secrets.token_hex(8)}" for ref in (AUTH_REF, HEADER_REF)
    }
    for ref in (AUTH_REF, HEADER_REF):
        secret = k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=ref.name), string_data={ref.key: values[ref.name]}
        )
        api.core.create_namespaced_secret(api.ns, secret)
    app = secured_app()
    app["metadata"]["namespace"] = api.ns
    api.create(app)
    broken = secured_app()
    broken["metadata"] = {"name": "broken", "namespace": api.ns}
    broken["spec"]["agency"]["agents"]["front"]["spec"]["delegates_to"] = ["ghost"]
    api.create(broken)  # stalls: a Warning Event and a status message

    eventually(lambda: len(api.deployments()) == 2, what="two Deployments")
    eventually(lambda: (api.get("desk").get("status") or {}).get("conditions"), what="a status")
    eventually(lambda: api.condition("broken", "Stalled"), what="the broken app to stall")
    events = eventually(
        lambda: api.core.list_namespaced_event(api.ns).items, what="the operator's Events"
    )

    def dump(obj: Any) -> str:
        return json.dumps(api.client.sanitize_for_serialization(obj), default=str)

    surfaces = {
        "status": json.dumps([api.get("desk").get("status"), api.get("broken").get("status")]),
        "events": dump(events),
        "configmaps": dump(api.core.list_namespaced_config_map(api.ns).items),
        "deployments": dump(api.deployments()),
        "services": dump(api.core.list_namespaced_service(api.ns).items),
        "operator log": caplog.text,
    }
    assert "front-auth" in surfaces["configmaps"]  # the reference is there...
    assert "ghost" in surfaces["events"]  # ...and the Events are the operator's
    for where, text in surfaces.items():
        for value in values.values():
            assert value not in text, f"a Secret value leaked into the {where}"
    # The metrics port is on the agent's Service for the console (docs/security.md, The
    # metrics port): it leads to the runtime's metrics listener only, never an A2A door, and
    # the agent's NetworkPolicy admits it from nowhere unless metrics_namespace says so.
    for service in api.core.list_namespaced_service(api.ns).items:
        metered = [p for p in service.spec.ports if METRICS_PORT in (p.port, p.target_port)]
        assert [(p.name, p.port, p.target_port) for p in metered] == [
            ("metrics", METRICS_PORT, "metrics")
        ]
    policies = api.net.list_namespaced_network_policy(api.ns).items
    assert policies
    for policy in policies:
        for rule in policy.spec.ingress:
            if any(port.port == METRICS_PORT for port in rule.ports or []):
                assert rule._from, f"{policy.metadata.name} admits the metrics port from anywhere"

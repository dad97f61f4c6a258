"""What the operator renders: the metrics port only to the metrics listener and only from
``metrics_namespace``, Secrets only as references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from security_support import AUTH_REF, ENV_REF, HEADER_REF, secured_app

from mas.infra.secrets import secret_env_name
from mas_operator.cli import main as operator_main
from mas_operator.names import METRICS_PORT

pytestmark = [pytest.mark.timeout(30)]


@pytest.fixture
def rendered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    # Even were the operator's own environment to hold the values, nothing may copy them.
    for ref in (AUTH_REF, HEADER_REF, ENV_REF):
        monkeypatch.setenv(secret_env_name(ref), f"leak-{ref.name}-value")
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(secured_app()))
    assert operator_main(["render", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    assert "leak-" not in out
    return [d for d in yaml.safe_load_all(out) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_the_metrics_port_leads_only_to_the_metrics_listener(
    rendered: list[dict[str, Any]],
) -> None:
    """The Service carries the metrics port for the console, which may not list Pods
    (docs/security.md, The metrics port): named ``metrics``, to the container port of that
    name, never an A2A door's; no other Service port reaches it; and the NetworkPolicy admits
    it from no one (no ``metrics_namespace`` here), as it did on the pod port alone."""
    services = of_kind(rendered, "Service")
    assert {s["metadata"]["name"] for s in services} == {"desk-front", "desk-back"}
    for service in services:
        metered = [
            p for p in service["spec"]["ports"] if METRICS_PORT in (p["port"], p["targetPort"])
        ]
        metered += [p for p in service["spec"]["ports"] if p["targetPort"] == "metrics"]
        assert (
            metered
            == [
                {
                    "name": "metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                }
            ]
            * 2
        )
    for deployment in of_kind(rendered, "Deployment"):  # the port the Service leads to
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"} in container[
            "ports"
        ]
        command = container["command"]
        assert command[command.index("--metrics-port") + 1] == str(METRICS_PORT)
    policies = of_kind(rendered, "NetworkPolicy")
    assert len(policies) == 2
    for policy in policies:
        for rule in policy["spec"]["ingress"]:
            assert {"protocol": "TCP", "port": METRICS_PORT} not in rule["ports"], rule


def test_secrets_reach_pods_only_as_secret_key_refs(rendered: list[dict[str, Any]]) -> None:
    deployments = {d["metadata"]["name"]: d for d in of_kind(rendered, "Deployment")}
    [front] = deployments["desk-front"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in front["env"]}
    for ref in (AUTH_REF, HEADER_REF):
        variable = env[secret_env_name(ref)]
        assert variable == {
            "name": secret_env_name(ref),
            "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
        }
    assert env["FRONT_KEY"]["valueFrom"] == {"secretKeyRef": ENV_REF.model_dump()}
    assert all("value" not in e or not e["name"].startswith("MAS_SECRET_") for e in front["env"])


def test_config_maps_carry_references_only(rendered: list[dict[str, Any]]) -> None:
    configs = {c["metadata"]["name"]: c for c in of_kind(rendered, "ConfigMap")}
    document = yaml.safe_load(configs["desk-front"]["data"]["application.yaml"])
    endpoints = document["spec"]["endpoints"]
    assert endpoints["back"]["headers"]["Authorization"] == {
        "secret_key_ref": HEADER_REF.model_dump()
    }
    schemes = endpoints["front"]["a2a"]["auth"]["schemes"]
    assert schemes[0]["secret_key_ref"] == AUTH_REF.model_dump()
    assert "value" not in str(schemes[0])
    assert "leak-" not in yaml.safe_dump(configs)

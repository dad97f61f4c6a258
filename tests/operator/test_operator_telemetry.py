"""spec.runtime.tracing and spec.runtime.log_format become the agent pods' environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mas.infra.errors import ApplicationInvalid
from mas_operator.children import build_children
from mas_operator.plan import plan_application

pytestmark = pytest.mark.timeout(120)  # cold processes: the suite default

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLE = REPO / "examples" / "agency.yaml"


def example(runtime: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = "shop"
    doc["spec"]["runtime"] = runtime
    return doc


def pod_env(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    children = build_children(plan_application(doc, "team-a"))
    env: dict[str, dict[str, str]] = {}
    for child in children:
        if child["kind"] == "Deployment":
            container = child["spec"]["template"]["spec"]["containers"][0]
            agent = next(e["value"] for e in container["env"] if e["name"] == "MAS_AGENT")
            env[agent] = {e["name"]: e.get("value", "") for e in container["env"]}
    return env


def test_tracing_and_json_logs_reach_every_agent_pod_as_the_standard_variables() -> None:
    tracing = {"enabled": True, "endpoint": "http://collector.obs:4318", "sampling_ratio": 0.25}
    env = pod_env(example({"tracing": tracing, "log_format": "json"}))
    assert env and set(env) == {"concierge", "researcher"}
    for agent, variables in env.items():
        telemetry = {k: v for k, v in variables.items() if k.startswith(("OTEL_", "MAS_LOG"))}
        assert telemetry == {
            "MAS_LOG_FORMAT": "json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector.obs:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": agent,
            "OTEL_RESOURCE_ATTRIBUTES": "service.namespace=shop,k8s.namespace.name=team-a",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
        }


def test_by_default_the_pods_get_no_telemetry_variables() -> None:
    for variables in pod_env(example({})).values():
        assert not [k for k in variables if k.startswith(("OTEL_", "MAS_LOG"))]


def test_a_variable_the_user_sets_in_runtime_env_keeps_the_users_value() -> None:
    runtime = {
        "tracing": {"enabled": True, "endpoint": "http://collector.obs:4318"},
        "env": [{"name": "OTEL_SERVICE_NAME", "value": "mine"}],
    }
    for variables in pod_env(example(runtime)).values():
        assert variables["OTEL_SERVICE_NAME"] == "mine"
        assert variables["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector.obs:4318"


@pytest.mark.parametrize(
    ("tracing", "expected"),
    [
        ({"enabled": True}, "spec.runtime.tracing: {'enabled': True}: "),
        (
            {"enabled": True, "endpoint": "collector:4318"},
            "spec.runtime.tracing.endpoint: 'collector:4318'",
        ),
        ({"sampling_ratio": 2}, "spec.runtime.tracing.sampling_ratio: 2"),
    ],
)
def test_a_bad_tracing_block_names_the_field_and_the_value(
    tracing: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ApplicationInvalid) as caught:
        plan_application(example({"tracing": tracing}), "team-a")
    problems = [str(p) for p in caught.value.problems]
    assert any(p.startswith(expected) for p in problems), problems


def test_a_bad_log_format_is_a_usage_error_naming_where_it_came_from() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mas_operator.cli", "--log-format", "nope", "render", "-f", "x"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert out.returncode == 2 and "--log-format" in out.stderr and "json" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "mas_operator.cli", "render", "-f", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        env={"MAS_LOG_FORMAT": "yaml", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 2
    assert out.stderr == "error: MAS_LOG_FORMAT: 'yaml' is not a log format; accepted: text, json\n"

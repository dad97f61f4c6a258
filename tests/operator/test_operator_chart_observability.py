"""The chart's Grafana dashboard and PrometheusRule alerts: optional, and built on real metrics.

Every metric a dashboard panel, a template variable or an alert queries must be one the code
exports: the names come from the real registries (the runtime's, with the A2A ingress
metrics on it, and a fresh operator's), never from a list kept here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
import yaml
from operator_support import REPO, helm_template
from prometheus_client import CollectorRegistry

import library_ioa.plugins.a2a.server.metrics as a2a_metrics
from mas.runtime.metrics import REGISTRY as RUNTIME_REGISTRY
from mas_operator.metrics import OperatorMetrics

FILES = REPO / "charts" / "mas-operator" / "files"
pytestmark = pytest.mark.timeout(120)

# The series names a family exposes, by type (prometheus_client's exposition).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
    "summary": ("", "_count", "_sum", "_created"),
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "group_left", "group_right", "inf", "nan"}


def exported(registries: Iterable[CollectorRegistry]) -> set[str]:
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
            names |= {sample.name for sample in family.samples}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a ``label_values`` query) reads."""
    variable = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*).*\)\s*", expr, re.S)
    if variable is not None:
        return {variable.group(1)}
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"(?<![\w.$])[a-zA-Z_:][\w:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group(0) in KEYWORDS:
            continue  # a function or an operator
        names.add(match.group(0))
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from panels(item.get("panels", []))

    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"${variable['name']}", variable["query"]["query"]


def alert_queries(rules: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["alert"], rule["expr"]


def checked(queries: Iterable[tuple[str, str]], known: set[str]) -> set[str]:
    """Every query reads at least one metric and only exported ones; the names read."""
    read: set[str] = set()
    for where, expr in queries:
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        assert names <= known, f"{where}: {sorted(names - known)} are not exported"
        read |= names
    return read


@pytest.fixture(scope="module")
def known() -> set[str]:
    assert a2a_metrics.A2A_REGISTRY is RUNTIME_REGISTRY  # one /metrics shows them all
    names = exported([RUNTIME_REGISTRY, OperatorMetrics().registry])
    assert "maslab_a2a_requests_total" in names and "mas_operator_leader" in names
    return names


def test_the_checker_finds_the_metrics_of_an_expression_and_a_misspelt_one(
    known: set[str],
) -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, agent) (rate(maslab_turn_latency_bucket{agent=~"$a"}'
        "[$__rate_interval]))) / on (agent) group_left sum(maslab_queue_depth) > bool 3"
    )
    assert metric_names(expr) == {"maslab_turn_latency_bucket", "maslab_queue_depth"}
    assert metric_names(expr) - known == {"maslab_turn_latency_bucket"}  # _seconds missing
    assert metric_names('label_values(maslab_turns_total{namespace=~"$ns"}, agent)') == {
        "maslab_turns_total"
    }


def test_every_dashboard_query_reads_exported_metrics(known: set[str]) -> None:
    dashboard = json.loads((FILES / "dashboard.json").read_text())
    queries = list(dashboard_queries(dashboard))
    assert len(queries) >= 12
    read = checked(queries, known)
    for wanted in (
        "maslab_a2a_requests_total",
        "maslab_a2a_request_seconds_bucket",
        "maslab_turn_latency_seconds_bucket",
        "maslab_queue_depth",
        "maslab_delegation_calls_total",
        "mas_operator_reconciles_total",
        "mas_operator_retries_total",
        "mas_operator_leader",
    ):
        assert wanted in read, wanted
    panel_ids = [p["id"] for p in dashboard["panels"]]
    assert len(panel_ids) == len(set(panel_ids))


def test_every_alert_reads_exported_metrics(known: set[str]) -> None:
    rules = yaml.safe_load((FILES / "alerts.yaml").read_text())
    alerts = list(alert_queries(rules))
    assert len(alerts) >= 6
    checked(alerts, known)
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("info", "warning", "critical")
            assert rule["annotations"]["summary"] and rule["for"]


def test_the_chart_renders_the_dashboard_rules_and_pod_monitor_only_when_asked() -> None:
    kinds = {o["kind"] for o in helm_template()}
    assert not kinds & {"PrometheusRule", "PodMonitor"}
    assert not any(o["metadata"]["name"].endswith("-dashboards") for o in helm_template())
    objects = helm_template(
        "--set",
        "dashboards.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=prom",
        "--set",
        "agentPodMonitor.enabled=true",
    )
    config = next(o for o in objects if o["metadata"]["name"] == "mas-operator-dashboards")
    assert (
        config["kind"] == "ConfigMap" and config["metadata"]["labels"]["grafana_dashboard"] == "1"
    )
    assert json.loads(config["data"]["maslab.json"]) == json.loads(
        (FILES / "dashboard.json").read_text()
    )
    rule = next(o for o in objects if o["kind"] == "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prom"
    assert rule["spec"] == yaml.safe_load((FILES / "alerts.yaml").read_text())
    monitor = next(o for o in objects if o["kind"] == "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "mas-agent"
    assert monitor["spec"]["podMetricsEndpoints"] == [
        {
            "port": "metrics",
            "interval": "30s",
            "relabelings": [  # the application label the tokens-per-Application panel sums by
                {
                    "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_instance"],
                    "targetLabel": "application",
                }
            ],
        }
    ]


def test_the_operator_logs_json_and_traces_its_reconciles_when_the_values_ask() -> None:
    def env(*args: str) -> dict[str, str]:
        objects = helm_template(*args)
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        items = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        return {e["name"]: e.get("value", "") for e in items}

    default = env()
    assert default["MAS_LOG_FORMAT"] == "text" and "OTEL_EXPORTER_OTLP_ENDPOINT" not in default
    asked = env("--set", "logFormat=json", "--set", "tracing.endpoint=http://otel.obs:4318")
    assert asked["MAS_LOG_FORMAT"] == "json"
    assert asked["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel.obs:4318"
    assert asked["OTEL_SERVICE_NAME"] == "mas-operator"

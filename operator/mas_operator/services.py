"""``build_service``: the Service that publishes one agent's A2A listeners, its card and its
runtime's ``/metrics``."""

from __future__ import annotations

from typing import Any

from mas_operator.names import (
    ANNOTATION_CARD_URL,
    ANNOTATION_METRICS_URL,
    ANNOTATION_URL,
    METRICS_PORT,
    PORT_GRPC,
    PORT_HTTP,
    PORT_MCP,
    PORT_METRICS,
    child_labels,
    selector_labels,
)
from mas_operator.plan import AgentPlan, Plan


def service_ports(agent: AgentPlan) -> list[dict[str, Any]]:
    """Named ports: the A2A HTTP port, gRPC when set, the MCP door when it has one, and the
    runtime's metrics port.

    The metrics port is on the Service so that a reader without the right to list Pods (the
    web console) reaches ``/metrics``: one ready pod's answer per connection, as any Service
    gives. It opens nothing new: the pods' ``metrics`` container port is as reachable, and the
    agent's NetworkPolicy admits it only from ``network_policy.metrics_namespace`` either way.
    Prometheus scrapes the pods themselves (a PodMonitor), one series per pod.
    """
    ports = [
        {"name": PORT_HTTP, "port": agent.http_port, "targetPort": PORT_HTTP, "protocol": "TCP"}
    ]
    if agent.grpc_port is not None:
        ports.append(
            {"name": PORT_GRPC, "port": agent.grpc_port, "targetPort": PORT_GRPC, "protocol": "TCP"}
        )
    if agent.mcp_port is not None:
        ports.append(
            {"name": PORT_MCP, "port": agent.mcp_port, "targetPort": PORT_MCP, "protocol": "TCP"}
        )
    ports.append(
        {"name": PORT_METRICS, "port": METRICS_PORT, "targetPort": PORT_METRICS, "protocol": "TCP"}
    )
    return ports


def build_service(plan: Plan, agent: AgentPlan) -> dict[str, Any]:
    """The ClusterIP Service of one deployed agent; its annotations carry its URLs (the
    agent's, its card's and its metrics')."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": agent.name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
            "annotations": _annotations(agent),
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(plan.name, agent.agent),
            "ports": service_ports(agent),
        },
    }


def _annotations(agent: AgentPlan) -> dict[str, str]:
    notes = {ANNOTATION_URL: agent.url, ANNOTATION_CARD_URL: agent.card_url}
    if agent.metrics_url is not None:
        notes[ANNOTATION_METRICS_URL] = agent.metrics_url
    return notes

"""``build_service``: the Service that publishes one agent's A2A listeners and its card."""

from __future__ import annotations

from typing import Any

from mas_operator.names import (
    ANNOTATION_CARD_URL,
    ANNOTATION_URL,
    PORT_GRPC,
    PORT_HTTP,
    PORT_MCP,
    child_labels,
    selector_labels,
)
from mas_operator.plan import AgentPlan, Plan


def service_ports(agent: AgentPlan) -> list[dict[str, Any]]:
    """Named ports: the A2A HTTP port, gRPC when set, and the MCP door when it has one.

    The runtime's metrics port stays off this public Service (as ``mas-ctl serve`` intends);
    Prometheus scrapes the pods' ``metrics`` container port (a PodMonitor).
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
    return ports


def build_service(plan: Plan, agent: AgentPlan) -> dict[str, Any]:
    """The ClusterIP Service of one deployed agent; its annotations carry the card URL."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": agent.name,
            "namespace": plan.namespace,
            "labels": child_labels(plan.name, agent.agent),
            "annotations": {ANNOTATION_URL: agent.url, ANNOTATION_CARD_URL: agent.card_url},
        },
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(plan.name, agent.agent),
            "ports": service_ports(agent),
        },
    }

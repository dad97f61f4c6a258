"""``telemetry_env``: the environment that turns on traces and JSON logs in an agent pod.

From ``spec.runtime.tracing`` (the standard OpenTelemetry variables, read by
:mod:`mas.telemetry.tracing` in the pod) and ``spec.runtime.log_format`` (``MAS_LOG_FORMAT``):

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf``;
- ``OTEL_SERVICE_NAME``: the agent id; ``OTEL_RESOURCE_ATTRIBUTES``: the Application as
  ``service.namespace`` and the namespace as ``k8s.namespace.name``;
- ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` with ``sampling_ratio`` as its argument.

A name the user already sets in ``spec.runtime.env`` is left to the user's value.
"""

from __future__ import annotations

from typing import Any

from mas_operator.plan import AgentPlan, Plan


def telemetry_env(plan: Plan, agent: AgentPlan) -> list[dict[str, Any]]:
    """The pod's tracing and log-format variables (module docstring)."""
    runtime = plan.app.spec.runtime
    values: dict[str, str] = {}
    if runtime.log_format != "text":
        values["MAS_LOG_FORMAT"] = runtime.log_format
    tracing = runtime.tracing
    if tracing.enabled and tracing.endpoint is not None:
        values |= {
            "OTEL_EXPORTER_OTLP_ENDPOINT": tracing.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_SERVICE_NAME": agent.agent,
            "OTEL_RESOURCE_ATTRIBUTES": (
                f"service.namespace={plan.name},k8s.namespace.name={plan.namespace}"
            ),
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": f"{tracing.sampling_ratio:g}",
        }
    taken = {item.name for item in runtime.env}
    return [{"name": k, "value": v} for k, v in values.items() if k not in taken]

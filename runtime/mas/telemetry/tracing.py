"""OpenTelemetry traces of a MAS Lab process: off unless the environment asks for them.

:func:`configure` runs once at process start (``mas-ctl``, ``mas-operator``). Tracing is on
when the standard variables ask for an exporter and nothing switches the SDK off:

- on: ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, or
  ``OTEL_TRACES_EXPORTER`` is ``otlp`` (or ``console``, spans on stderr);
- off (the default): none of those, ``OTEL_TRACES_EXPORTER=none``, or
  ``OTEL_SDK_DISABLED=true``.

The rest is the SDK's own reading of the environment: ``OTEL_SERVICE_NAME`` (else the name
the process gives), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and its ``_ARG``
(default ``parentbased_always_on``), the OTLP/HTTP exporter's endpoint, headers and timeout.
Context travels as W3C ``traceparent``/``tracestate`` (``OTEL_PROPAGATORS``).

Off costs one check: :func:`on` is a module-level flag, every helper returns a shared no-op
context manager (or ``None``) without building a span, and the transports add no middleware
(the A2A server and clients ask :func:`on` once, when they are built).

Span attributes follow the OTel semantic conventions where they exist, plus the names in
:data:`MAS_AGENT` and its neighbours. :func:`tool_span` is the one-line hook for a tool
source (MCP or another): ``with tool_span(agent, "search"): ...``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported when tracing is on: an untraced CLI never loads OpenTelemetry
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

logger = logging.getLogger(__name__)

__all__ = [
    "A2A_CONTEXT_ID",
    "A2A_TASK_ID",
    "MAS_AGENT",
    "MAS_CALLER",
    "MAS_ORIGIN",
    "MAS_SESSION_ID",
    "MAS_TURN_ID",
    "Kind",
    "TracingConfigError",
    "annotate",
    "capture",
    "configure",
    "current_ids",
    "disable",
    "enable",
    "end_turn",
    "extract",
    "fail",
    "inject",
    "model_span",
    "on",
    "record_event",
    "record_usage",
    "shutdown",
    "span",
    "tool_span",
    "tracer",
    "turn_span",
    "wanted",
]

MAS_AGENT = "mas.agent"
MAS_SESSION_ID = "mas.session_id"
MAS_TURN_ID = "mas.turn_id"
A2A_TASK_ID = "a2a.task_id"
A2A_CONTEXT_ID = "a2a.context_id"
# The verified identity of an A2A request's caller (a ServiceAccount subject, or the a2a.auth
# scheme it authenticated with): an attribute of the request's SERVER span.
MAS_CALLER = "mas.caller"
# The principal that started the chain of delegations this request belongs to (a person, an
# a2a.auth scheme, ...; mas.runtime.turns.origin_principal): on the request and turn spans.
MAS_ORIGIN = "mas.origin_principal"

INSTRUMENTATION = "maslab"
_EXPORTERS = ("otlp", "console")
_NOOP: AbstractContextManager[None] = contextlib.nullcontext()

_on = False
_provider: TracerProvider | None = None
_tracer: Tracer | None = None

Kind = Literal["internal", "client", "server"]


class TracingConfigError(ValueError):
    """An ``OTEL_*`` variable this module reads has a value it cannot use."""


def on() -> bool:
    """Whether this process records spans (the one check of the hot path)."""
    return _on


def wanted(env: Mapping[str, str]) -> bool:
    """Whether ``env`` asks for traces (the module docstring's rules)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    if exporter:
        if exporter not in _EXPORTERS:
            raise TracingConfigError(
                f"OTEL_TRACES_EXPORTER={exporter!r} is not supported; accepted: "
                f"{', '.join((*_EXPORTERS, 'none'))}"
            )
        return True
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def configure(service_name: str, env: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK tracer provider when ``env`` asks for traces; ``True`` if it did.

    Idempotent; spans still buffered are flushed at exit (:func:`shutdown`).
    """
    if _on or not wanted(env):
        return _on
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME") or service_name})
    provider = TracerProvider(resource=resource)  # the sampler comes from OTEL_TRACES_SAMPLER
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    from opentelemetry import trace

    trace.set_tracer_provider(provider)  # the SDK's own spans (a2a-sdk) use the global one
    enable(provider)
    atexit.register(shutdown)
    logger.info("tracing on: service %s", resource.attributes.get(SERVICE_NAME))
    return True


class _Api:
    """The OpenTelemetry API functions the helpers call, imported once when tracing starts."""

    def __init__(self) -> None:
        from opentelemetry import propagate
        from opentelemetry.context import get_current
        from opentelemetry.trace import SpanKind, get_current_span

        self.kinds: dict[str, SpanKind] = {k.name.lower(): k for k in SpanKind}
        self.get_current = get_current
        self.get_current_span = get_current_span
        self.inject = propagate.inject
        self.extract = propagate.extract


_api: _Api | None = None


def enable(provider: TracerProvider) -> None:
    """Record MAS Lab's spans with ``provider`` (what :func:`configure` installs; a test may
    pass its own, e.g. with the SDK's in-memory exporter, without touching the global one)."""
    global _on, _provider, _tracer, _api  # noqa: PLW0603 - the process-wide switch
    _api = _api or _Api()
    _provider, _tracer, _on = provider, provider.get_tracer(INSTRUMENTATION), True


def disable() -> None:
    """Stop recording; helpers are no-ops again (the provider is left as it is)."""
    global _on, _tracer
    _on, _tracer = False, None


def shutdown() -> None:
    """Export what is buffered and stop recording (safe to call twice)."""
    global _provider
    provider, _provider = _provider, None
    disable()
    if provider is not None and hasattr(provider, "shutdown"):
        provider.shutdown()


def tracer() -> Tracer:
    """The tracer of MAS Lab's own spans (a no-op one when off)."""
    if _tracer is not None:
        return _tracer
    from opentelemetry.trace import NoOpTracer

    return NoOpTracer()


def span(
    name: str,
    *,
    kind: Kind = "internal",
    attributes: Mapping[str, Any] | None = None,
    parent: Context | None = None,
) -> AbstractContextManager[Span | None]:
    """A current span around a block (exceptions recorded), or a no-op when tracing is off."""
    if not _on or _api is None:
        return _NOOP
    return tracer().start_as_current_span(
        name, context=parent, kind=_api.kinds[kind], attributes=_clean(attributes)
    )


def turn_span(
    agent: str, turn: Any, parent: Context | None, queue_wait: float
) -> AbstractContextManager[Any]:
    """The span of one turn in an agent's mailbox, under the submitter's span.

    ``parent`` is what :func:`capture` returned at submission (``None``: not traced);
    ``queue_wait`` (seconds between submission and start) is the ``mas.queue.wait_ms``
    attribute.
    """
    if parent is None or not _on:
        return _NOOP
    attributes = {
        MAS_AGENT: agent,
        MAS_SESSION_ID: turn.session_id,
        MAS_TURN_ID: turn.turn_id,
        A2A_CONTEXT_ID: turn.session_id,
        "mas.queue.wait_ms": round(queue_wait * 1000, 3),
    }
    origin = turn.metadata.get(MAS_ORIGIN) if isinstance(turn.metadata, Mapping) else None
    if isinstance(origin, str) and origin:
        attributes[MAS_ORIGIN] = origin
    return span(f"turn {agent}", attributes=attributes, parent=parent)


def end_turn(target: Span, status: str, message: str = "") -> None:
    """Record a turn's outcome on its span; ``failed`` is an error status."""
    target.set_attribute("mas.turn.outcome", status)
    if status == "failed":
        fail(target, message or "the turn failed")


def model_span(agent: str, provider: str, model: str | None) -> AbstractContextManager[Any]:
    """The span of one model call (gen-ai semantic conventions)."""
    if not _on:
        return _NOOP
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the older convention's name, still read by many backends
        "gen_ai.request.model": model,
        MAS_AGENT: agent,
    }
    return span(f"chat {model or provider}", kind="client", attributes=attributes)


def record_usage(
    target: Span | None, input_tokens: int, output_tokens: int, response_model: str | None
) -> None:
    """The tokens of one model call on its span (gen-ai ``gen_ai.usage.*``)."""
    if target is not None and target.is_recording():
        target.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        target.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        if response_model:
            target.set_attribute("gen_ai.response.model", response_model)


def record_event(name: str, attributes: Mapping[str, Any]) -> None:
    """An event (``name``, ``attributes``) on the current span, if one records."""
    if not _on or _api is None:
        return
    current = _api.get_current_span()
    if current.is_recording():
        current.add_event(name, _clean(attributes) or {})


def tool_span(agent: str, tool: str, source: str = "mcp") -> AbstractContextManager[Any]:
    """The span of one tool call (gen-ai ``execute_tool``); the hook for tool sources."""
    if not _on:
        return _NOOP
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "mas.tool.source": source,
        MAS_AGENT: agent,
    }
    return span(f"execute_tool {tool}", attributes=attributes)


def annotate(name: str, value: str) -> None:
    """Set the attribute ``name`` on the active span when on (no span: nothing)."""
    if _on and _api is not None and value:
        _api.get_current_span().set_attribute(name, value)


def capture() -> Context | None:
    """The current context, to parent work that runs in another task; ``None`` when off."""
    return _api.get_current() if _on and _api is not None else None


def inject(carrier: MutableMapping[str, str]) -> None:
    """Write the current trace context (``traceparent``...) into ``carrier`` when on."""
    if _on and _api is not None:
        _api.inject(carrier)


def extract(carrier: Mapping[str, str]) -> Context:
    """The remote parent carried by ``carrier`` (header or metadata names in lower case)."""
    api = _api or _Api()
    return api.extract(carrier)


def current_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the active span, or ``None`` (off or no span)."""
    if not _on or _api is None:
        return None
    ctx = _api.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def fail(target: Span | None, message: str) -> None:
    """Mark ``target`` as an error with ``message`` (a turn that failed without raising)."""
    if target is not None and target.is_recording():
        from opentelemetry.trace import Status, StatusCode

        target.set_status(Status(StatusCode.ERROR, message))


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not attributes:
        return None
    return {k: v for k, v in attributes.items() if v is not None and v != ""}

"""Fixtures of the tracing tests: MAS Lab's spans recorded by the real OpenTelemetry SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mas.telemetry import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test (before any server is built), every finished span kept."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        yield exporter
    finally:
        tracing.disable()
        provider.shutdown()

"""The JSON log form: one object per line, trace ids when a span is active, fields kept."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider

from mas.telemetry import tracing
from mas.telemetry.logs import FIELDS, JsonFormatter, LogFormatError, resolve_format


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("mas.test", logging.INFO, __file__, 1, message, args, None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_line_has_time_level_logger_message_and_the_fields_of_the_call() -> None:
    line = json.loads(
        JsonFormatter().format(
            record("turn %s: %s", "t1", "completed", **{FIELDS: {"agent": "a", "level": "x"}})
        )
    )
    assert line.pop("time").endswith("Z")
    assert line == {
        "level": "INFO",
        "logger": "mas.test",
        "message": "turn t1: completed",
        "agent": "a",
    }


def test_a_line_written_under_a_span_carries_its_trace_and_span_ids() -> None:
    tracing.enable(TracerProvider())
    try:
        with tracing.span("work") as span:
            assert span is not None
            line = json.loads(JsonFormatter().format(record("inside")))
            context = span.get_span_context()
        outside = json.loads(JsonFormatter().format(record("outside")))
    finally:
        tracing.disable()
    assert line["trace_id"] == format(context.trace_id, "032x")
    assert line["span_id"] == format(context.span_id, "016x")
    assert "trace_id" not in outside


def test_an_exception_is_one_field_of_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        made = logging.LogRecord("m", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = JsonFormatter().format(made)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exception"]


def test_the_flag_wins_over_the_variable_and_bad_values_name_their_source() -> None:
    assert resolve_format(None, {}) == "text"
    assert resolve_format(None, {"MAS_LOG_FORMAT": "JSON"}) == "json"
    assert resolve_format("text", {"MAS_LOG_FORMAT": "json"}) == "text"
    with pytest.raises(LogFormatError, match=r"^MAS_LOG_FORMAT: 'xml' is not a log format; "):
        resolve_format(None, {"MAS_LOG_FORMAT": "xml"})

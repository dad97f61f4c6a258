"""Log output of ``mas-ctl`` and ``mas-operator``: plain text, or one JSON object per line.

The format is ``--log-format`` on either command, else the ``MAS_LOG_FORMAT`` variable (the
operator sets it on agent pods from ``spec.runtime.log_format``), else ``text``.

A JSON line holds ``time`` (UTC, RFC 3339 with milliseconds), ``level``, ``logger``,
``message``, ``trace_id`` and ``span_id`` when a span is active (:mod:`mas.telemetry.tracing`),
``exception`` when the record carries one, and the structured fields a call site passes as
``extra={"fields": {...}}`` (the per-request and per-turn lines do). Nothing else of the
record is written, so what reaches a line is exactly what reaches the text form: the same
message, never a header (credentials are redacted before any logger sees them).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any, Literal

from mas.telemetry.tracing import current_ids

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
ENV_VAR = "MAS_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = "fields"  # the ``extra`` key of a record's structured fields

_RESERVED = frozenset(("time", "level", "logger", "message", "trace_id", "span_id", "exception"))


class LogFormatError(ValueError):
    """A log format that is neither ``text`` nor ``json``; the message names the source."""


def resolve_format(flag: str | None, env: Mapping[str, str] = os.environ) -> LogFormat:
    """The flag's format, else ``MAS_LOG_FORMAT``'s, else ``text``."""
    source, value = ("--log-format", flag) if flag else (ENV_VAR, env.get(ENV_VAR, ""))
    value = (value or "text").strip().lower()
    if value == "json":
        return "json"
    if value == "text":
        return "text"
    raise LogFormatError(
        f"{source}: {value!r} is not a log format; accepted: {', '.join(LOG_FORMATS)}"
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per record (module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        seconds = time.gmtime(record.created)
        millis = int(record.msecs)
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", seconds) + f".{millis:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        ids = current_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                if key not in _RESERVED and value is not None:
                    line[str(key)] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def setup_logging(level: int, log_format: LogFormat) -> None:
    """The root logger's one stderr handler, in ``log_format``."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])

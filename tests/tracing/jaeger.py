"""A real Jaeger (``cmd/jaeger``: OTLP/HTTP receiver, memory store, query API) on free ports.

The binary is built by ``scripts/build-jaeger`` into ``$MAS_JAEGER_DIR`` (default
``~/.cache/maslab/jaeger/<version from go.mod>``). Tests that need it skip with the build
command when it is absent, and fail instead when ``MAS_REQUIRE_JAEGER=1`` (CI).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.ports import free_ports

HERE = Path(__file__).resolve().parent
REQUIRE_ENV = "MAS_REQUIRE_JAEGER"
START_DEADLINE = 60.0  # a cold Go binary on a busy, shared 2-core machine


def jaeger_version() -> str:
    """The Jaeger version pinned in tests/tracing/go.mod."""
    for line in (HERE / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) == 3 and words[:2] == ["require", "github.com/jaegertracing/jaeger"]:
            return words[2]
    raise AssertionError("tests/tracing/go.mod does not require github.com/jaegertracing/jaeger")


def jaeger_binary() -> Path:
    """Where scripts/build-jaeger puts the binary."""
    default = Path.home() / ".cache" / "maslab" / "jaeger" / jaeger_version()
    return Path(os.environ.get("MAS_JAEGER_DIR") or default) / "jaeger"


def require_jaeger() -> Path:
    """The binary; skip (or, with ``MAS_REQUIRE_JAEGER=1``, fail) when it is missing."""
    binary = jaeger_binary()
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    why = f"no Jaeger binary at {binary}: build it with scripts/build-jaeger"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


BIND_ATTEMPTS = 3


class PortTaken(AssertionError):
    """Jaeger exited because one of its ports was taken between the choice and its bind."""


CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


@dataclass
class Jaeger:
    """A running Jaeger: its OTLP/HTTP endpoint and its query API."""

    process: subprocess.Popen[bytes]
    otlp_endpoint: str
    query_url: str
    log: Path
    _client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10.0))

    @classmethod
    def start(cls, binary: Path, workdir: Path) -> Jaeger:
        """Start on free ports; returns once the query API answers.

        A port free when chosen (:func:`tests.ports.free_ports`) can still be taken by
        another listener before Jaeger binds it. Jaeger then exits with "address already in
        use", and it is started again on other ports.
        """
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                return cls._start_once(binary, workdir)
            except PortTaken:
                if attempt == BIND_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(cls, binary: Path, workdir: Path) -> Jaeger:
        otlp, query, query_grpc = free_ports(3)
        config = workdir / "jaeger.yaml"
        config.write_text(CONFIG.format(otlp=otlp, query=query, query_grpc=query_grpc))
        log = workdir / "jaeger.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(binary), "--config", f"file:{config}"], stdout=out, stderr=subprocess.STDOUT
            )
        jaeger = cls(process, f"http://127.0.0.1:{otlp}", f"http://127.0.0.1:{query}", log)
        deadline = time.monotonic() + START_DEADLINE
        while not (jaeger._answers() and _accepts(otlp)):
            if process.poll() is not None:
                said = jaeger.output()
                if "address already in use" in said:
                    raise PortTaken(said)
                raise AssertionError(f"jaeger exited {process.returncode}:\n{said}")
            if time.monotonic() > deadline:
                jaeger.stop()
                raise AssertionError(f"jaeger did not start:\n{jaeger.output()}")
            time.sleep(0.1)
        return jaeger

    def output(self) -> str:
        """What Jaeger logged."""
        return self.log.read_text(errors="replace")

    def _answers(self) -> bool:
        try:
            return self._client.get(f"{self.query_url}/api/services").status_code == 200
        except httpx.HTTPError:
            return False

    def traces(self, service: str) -> list[dict[str, Any]]:
        """The traces of ``service`` (the query API's JSON: spans, processes)."""
        reply = self._client.get(
            f"{self.query_url}/api/traces", params={"service": service, "limit": 50}
        )
        reply.raise_for_status()
        data: list[dict[str, Any]] = reply.json()["data"] or []
        return data

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """One trace by id, or ``None`` while Jaeger does not know it."""
        reply = self._client.get(f"{self.query_url}/api/traces/{trace_id}")
        if reply.status_code == 404:
            return None
        reply.raise_for_status()
        data = reply.json()["data"] or []
        return data[0] if data else None

    def stop(self) -> None:
        """Stop the process."""
        self._client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0

"""One request through three agents in two processes is one trace in a real Jaeger.

``mas-ctl run-mas`` hosts desk (the entry, deployed: it takes the request over A2A) and
worker (in-process); worker's peer ``remote`` is a separate ``mas-ctl serve``, reached
through ``--bind``. Both export OTLP/HTTP to Jaeger (built by ``scripts/build-jaeger``; skipped
without it unless ``MAS_REQUIRE_JAEGER=1``). The trace Jaeger returns must hold the entry
request, desk's turn, the in-process delegation and worker's turn, and the remote hop with
the serve process's request and turn spans under it; the JSON log lines of both processes
carry the same trace id.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.ports import free_port
from tests.tracing.jaeger import Jaeger, require_jaeger

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

START = 60.0  # a cold interpreter importing the SDK on a busy, shared 2-core machine
STEP = 30.0
SERVICE = "lf.a2a.v1.A2AService"


def application(desk: int, remote: int) -> dict[str, Any]:
    def forward(to: str, reply: str) -> dict[str, Any]:
        rule = {"match": "^(?P<q>.+)", "delegate": {"to": to, "message": "{q}"}, "reply": reply}
        return {"type": "scripted", "params": {"rules": [rule]}}

    agents = {
        "desk": {"delegates_to": ["worker"], "model": forward("worker", "desk: {result}")},
        "worker": {"delegates_to": ["remote"], "model": forward("remote", "worker: {result}")},
        "remote": {"model": {"type": "echo"}},
    }
    return {
        "apiVersion": "infra.maslab.io/v1",
        "kind": "Application",
        "metadata": {"name": "traced"},
        "spec": {
            "agency": {"entry": "desk", "agents": {a: {"spec": s} for a, s in agents.items()}},
            "endpoints": {
                "desk": {"url": f"http://127.0.0.1:{desk}", "usage": "deploy"},
                "remote": {"url": f"http://127.0.0.1:{remote}", "usage": "deploy"},
            },
        },
    }


@dataclass
class Process:
    """A ``mas-ctl`` child with its output in files."""

    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    @classmethod
    def start(cls, tmp: Path, name: str, env: dict[str, str], *args: str) -> Process:
        out, err = tmp / f"{name}.out", tmp / f"{name}.err"
        full = {**os.environ, **env, "MAS_CONTROL_DIR": str(tmp / f"{name}-control")}
        full.update(PYTHONUNBUFFERED="1", OTEL_BSP_SCHEDULE_DELAY="200")
        full.pop("MAS_DEBUG", None)
        argv = [sys.executable, "-m", "mas.ctl.cli", *args]
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=full)
        return cls(process, out, err)

    def text(self, stream: str = "err") -> str:
        return (self.err if stream == "err" else self.out).read_text(errors="replace")

    def wait_for(self, text: str, stream: str = "err") -> None:
        deadline = time.monotonic() + START
        while text not in self.text(stream):
            if self.process.poll() is not None:
                raise AssertionError(f"exited {self.process.returncode}: {self.text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} within {START} s: {self.text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, as an operator's pod gets: buffered spans are exported on the way out."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STEP)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def json_lines(self) -> list[dict[str, Any]]:
        lines = self.text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]


def spans_by_name(trace: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    services = {k: p["serviceName"] for k, p in trace["processes"].items()}
    found: dict[str, list[dict[str, Any]]] = {}
    for span in trace["spans"]:
        span["service"] = services[span["processID"]]
        span["tags_"] = {t["key"]: t["value"] for t in span["tags"]}
        found.setdefault(span["operationName"], []).append(span)
    return found


def one(found: dict[str, list[dict[str, Any]]], name: str, **tags: Any) -> dict[str, Any]:
    spans = [s for s in found.get(name, []) if all(s["tags_"].get(k) == v for k, v in tags.items())]
    assert len(spans) == 1, f"{name} {tags}: {sorted(found)}"
    return spans[0]


def parent_of(span: dict[str, Any]) -> str | None:
    refs = [r for r in span["references"] if r["refType"] == "CHILD_OF"]
    return refs[0]["spanID"] if refs else None


def under(child: dict[str, Any], ancestor: dict[str, Any], trace: dict[str, Any]) -> bool:
    by_id = {s["spanID"]: s for s in trace["spans"]}
    node: dict[str, Any] | None = child
    while node is not None and (parent := parent_of(node)) is not None:
        if parent == ancestor["spanID"]:
            return True
        node = by_id.get(parent)
    return False


@dataclass
class Outcome:
    """What one request through desk -> worker -> remote left behind."""

    jaeger: Jaeger
    run: Process
    served: Process
    trace: dict[str, Any]


EXPECTED = {"turn desk", "delegate worker", "turn worker", "turn remote", "POST a2a.peer"}


def find_trace(jaeger: Jaeger) -> dict[str, Any]:
    """The trace of the entry request, once Jaeger holds every expected span (bounded)."""
    deadline = time.monotonic() + STEP
    while True:
        for trace in jaeger.traces("run-mas-proc"):
            names = {s["operationName"] for s in trace["spans"]}
            if f"{SERVICE}/SendMessage" in names and names >= EXPECTED:
                return trace
        assert time.monotonic() < deadline, (
            f"no full trace in Jaeger: {jaeger.traces('run-mas-proc')}"
        )
        time.sleep(0.2)  # both processes exported on exit; Jaeger stores asynchronously


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    binary = require_jaeger()
    tmp = tmp_path_factory.mktemp("traced")
    jaeger = Jaeger.start(binary, tmp)
    try:
        desk, remote = free_port(), free_port()
        app = tmp / "app.yaml"
        app.write_text(yaml.safe_dump(application(desk, remote), sort_keys=False))
        otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_endpoint}
        served = Process.start(
            tmp,
            "serve",
            {**otlp, "OTEL_SERVICE_NAME": "remote-proc"},
            *("--log-format", "json", "-v", "serve", "-f", str(app), "--agent", "remote"),
            "--no-control",
        )
        run = None
        try:
            served.wait_for("serving remote: A2A", stream="out")
            run = Process.start(
                tmp,
                "run",
                {**otlp, "OTEL_SERVICE_NAME": "run-mas-proc", "MAS_LOG_FORMAT": "json"},
                *("-v", "run-mas", "-f", str(app), "--bind", f"remote=a2a://127.0.0.1:{remote}"),
            )
            run.wait_for("ready: serving until SIGINT or SIGTERM")
            message = {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "tea"}]}
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": message},
            }
            with httpx.Client(timeout=STEP) as http:
                reply = http.post(
                    f"http://127.0.0.1:{desk}/", json=body, headers={"A2A-Version": "1.0"}
                )
            assert "desk: worker: tea" in reply.text, reply.text
        finally:
            if run is not None:
                run.stop()
            served.stop()
        assert run is not None and run.process.returncode == 0, run.text()
        assert served.process.returncode == 0, served.text()
        yield Outcome(jaeger, run, served, find_trace(jaeger))
    finally:
        jaeger.stop()


def test_one_request_through_three_agents_in_two_processes_is_one_trace(
    outcome: Outcome,
) -> None:
    trace = outcome.trace
    assert {p["serviceName"] for p in trace["processes"].values()} == {
        "run-mas-proc",
        "remote-proc",
    }
    found = spans_by_name(trace)
    entry = one(found, f"{SERVICE}/SendMessage", **{"mas.agent": "desk"})
    assert parent_of(entry) is None and entry["service"] == "run-mas-proc"
    assert entry["tags_"]["rpc.method"] == "SendMessage"
    assert entry["tags_"]["a2a.transport"] == "JSONRPC"
    assert entry["tags_"]["a2a.task_id"]
    chain = [
        entry,
        one(found, "turn desk"),
        one(found, "delegate worker"),
        one(found, "turn worker"),
        one(found, "delegate remote"),
        one(found, "POST a2a.peer"),
        one(found, f"{SERVICE}/SendMessage", **{"mas.agent": "remote"}),
        one(found, "turn remote"),
    ]
    for parent, child in itertools.pairwise(chain):
        assert under(child, parent, trace), (
            f"{child['operationName']} not under {parent['operationName']}"
        )
    assert [s["service"] for s in chain[-2:]] == ["remote-proc", "remote-proc"]
    assert all(s["service"] == "run-mas-proc" for s in chain[:-2])
    assert parent_of(chain[-2]) == chain[-3]["spanID"]  # the remote server under the hop
    # The SDK's own spans (where a request takes the SDK's path) hang under a request span.
    sdk = [s for s in trace["spans"] if s["operationName"].startswith("a2a.")]
    orphans = [s["operationName"] for s in sdk if not any(under(s, r, trace) for r in chain)]
    assert sdk and not orphans


def test_the_json_log_lines_of_both_processes_join_the_trace_by_its_id(outcome: Outcome) -> None:
    trace_id = outcome.trace["traceID"].rjust(32, "0")  # Jaeger drops leading zeros
    entry = one(spans_by_name(outcome.trace), f"{SERVICE}/SendMessage", **{"mas.agent": "desk"})
    lines = outcome.run.json_lines() + outcome.served.json_lines()
    joined = [
        (r["event"], r["agent"])
        for r in lines
        if r.get("trace_id") == trace_id and r.get("event") in ("a2a_request", "turn")
    ]
    assert sorted(joined) == [
        ("a2a_request", "desk"),
        ("a2a_request", "remote"),
        ("turn", "desk"),
        ("turn", "remote"),
        ("turn", "worker"),
    ]
    desk = next(r for r in lines if r.get("event") == "a2a_request" and r["agent"] == "desk")
    assert desk["task_id"] == entry["tags_"]["a2a.task_id"]
    assert desk["span_id"] and desk["level"] == "INFO" and desk["logger"]

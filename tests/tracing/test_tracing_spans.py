"""One trace across every hop, on real a2a-sdk servers on loopback and the real OTel SDK.

front (JSON-RPC, traced caller) delegates in-process to worker, which delegates over A2A
to peer, another exposure. The caller's ``traceparent`` must parent the front request span,
and every span down to the peer's turn must hang under it in one trace. gRPC and HTTP+JSON
pick the context up too; the JSON log lines of the request and the turns carry its trace id.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import logging
import secrets
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.security.security_support import V1, echo_endpoint, rpc_send, serve

from library_ioa.plugins.a2a.server.tracing import HttpTracing
from mas.infra.model_choice import ModelChoice
from mas.infra.models import AgentManifest
from mas.runtime.agent import Agent
from mas.runtime.boundary.delegation import DelegationContract
from mas.runtime.models.scripted import ScriptedModel
from mas.runtime.turns import TurnEnded, TurnInput
from mas.telemetry import tracing
from mas.telemetry.httpclient import traced_transport
from mas.telemetry.logs import JsonFormatter

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

STEP = 15.0
SERVICE = "lf.a2a.v1.A2AService"


def agents() -> dict[str, Any]:
    def delegate(to: str, reply: str) -> dict[str, Any]:
        rule = {"match": "^(?P<q>.+)", "delegate": {"to": to, "message": "{q}"}, "reply": reply}
        return {"type": "scripted", "params": {"rules": [rule]}}

    return {
        "front": {"delegates_to": ["worker"], "model": delegate("worker", "front: {result}")},
        "worker": {"delegates_to": ["peer"], "model": delegate("peer", "worker: {result}")},
    }


def traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


async def until(check: Callable[[], bool], what: str, exporter: InMemorySpanExporter) -> None:
    """Wait (bounded) for spans that end just after the answer is sent."""
    async with asyncio.timeout(STEP):
        while not check():
            await asyncio.sleep(0.02)
    assert check(), what


def named(spans: Sequence[ReadableSpan], name: str, agent: str | None = None) -> ReadableSpan:
    found = [
        s
        for s in spans
        if s.name == name and (agent is None or (s.attributes or {}).get("mas.agent") == agent)
    ]
    assert len(found) == 1, f"{name} ({agent}): {[s.name for s in spans]}"
    return found[0]


def under(child: ReadableSpan, ancestor: ReadableSpan, spans: Sequence[ReadableSpan]) -> bool:
    """Whether ``ancestor`` is on ``child``'s parent chain."""
    by_id = {s.context.span_id: s for s in spans}
    node: ReadableSpan | None = child
    while node is not None and node.parent is not None:
        if node.parent.span_id == ancestor.context.span_id:
            return True
        node = by_id.get(node.parent.span_id)
    return False


def request_span_of(agent: str) -> Callable[[Sequence[ReadableSpan]], list[ReadableSpan]]:
    def pick(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        return [
            s
            for s in spans
            if s.name == f"{SERVICE}/SendMessage" and (s.attributes or {}).get("mas.agent") == agent
        ]

    return pick


async def test_one_trace_from_the_caller_through_the_in_process_worker_to_the_remote_peer(
    spans: InMemorySpanExporter,
) -> None:
    trace_id, caller_span, header = traceparent()
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        async with serve(
            {"peer": {"model": {"type": "echo"}}}, {"peer": echo_endpoint()}, "peer"
        ) as peer:
            endpoints = {"front": echo_endpoint(), "peer": {"url": peer.url, "usage": "use"}}
            async with (
                serve(agents(), endpoints, "front") as front,
                httpx.AsyncClient(base_url=front.url, timeout=STEP) as http,
            ):
                reply = await http.post(
                    "/", json=rpc_send("tea please"), headers={**V1, "traceparent": header}
                )
                assert "front: worker: tea please" in reply.text, reply.text
                await until(
                    lambda: bool(request_span_of("front")(spans.get_finished_spans())),
                    "the front request span ended",
                    spans,
                )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)

    finished = spans.get_finished_spans()
    assert {hex_id(s.context.trace_id, 32) for s in finished} == {trace_id}
    entry = named(finished, f"{SERVICE}/SendMessage", "front")
    assert entry.parent is not None and hex_id(entry.parent.span_id, 16) == caller_span
    assert entry.parent.is_remote
    attributes = entry.attributes or {}
    assert attributes["rpc.system"] == "a2a" and attributes["rpc.method"] == "SendMessage"
    assert attributes["a2a.transport"] == "JSONRPC"
    assert attributes["http.request.method"] == "POST" and attributes["url.path"] == "/"
    assert attributes["http.response.status_code"] == 200
    assert attributes["a2a.task_id"] and attributes["a2a.context_id"]

    chain = [
        entry,
        named(finished, "turn front"),
        named(finished, "delegate worker"),
        named(finished, "turn worker"),
        named(finished, "delegate peer"),
        named(finished, "SendMessage a2a.peer"),  # the peer advertises gRPC: used
        named(finished, f"{SERVICE}/SendMessage", "peer"),
        named(finished, "turn peer"),
    ]
    for parent, child in itertools.pairwise(chain):
        assert under(child, parent, finished), f"{child.name} is not under {parent.name}"
    remote = chain[6]
    assert remote.parent is not None and remote.parent.is_remote  # came in as traceparent
    assert remote.parent.span_id == chain[5].context.span_id
    turn = chain[1].attributes or {}
    assert turn["mas.agent"] == "front" and turn["mas.turn.outcome"] == "completed"
    assert turn["mas.session_id"] == attributes["a2a.context_id"]
    assert "mas.queue.wait_ms" in turn and turn["mas.turn_id"]
    models = [s for s in finished if (s.attributes or {}).get("mas.agent") == "worker"]
    models = [s for s in models if s.name == "chat scripted"]
    assert len(models) == 2  # one step decides to delegate, the next answers with the result
    assert all(under(m, chain[3], finished) for m in models)
    assert (models[0].attributes or {})["gen_ai.operation.name"] == "chat"
    delegation = chain[4].attributes or {}
    assert delegation["mas.delegation.target"] == "peer"
    assert delegation["mas.delegation.comm"] == "A2AAgentComm"

    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    requests = [r for r in records if r.get("event") == "a2a_request"]
    turns = [r for r in records if r.get("event") == "turn"]
    assert {(r["agent"], r["method"], r["transport"], r["status"]) for r in requests} == {
        ("front", "SendMessage", "JSONRPC", "ok"),
        ("peer", "SendMessage", "GRPC", "ok"),  # delegations prefer the peer's gRPC
    }
    assert {r["agent"] for r in turns} == {"front", "worker", "peer"}
    assert all(r["outcome"] == "completed" and r["duration_ms"] >= 0 for r in turns)
    assert {r["trace_id"] for r in requests + turns} == {trace_id}
    front_line = next(r for r in requests if r["agent"] == "front")
    assert front_line["task_id"] == attributes["a2a.task_id"]
    assert front_line["span_id"] == hex_id(entry.context.span_id, 16)
    assert front_line["level"] == "INFO" and front_line["time"].endswith("Z")


def grpc_send(text: str) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    return SendMessageRequest(message=message)


async def test_grpc_and_http_json_requests_continue_the_callers_trace(
    spans: InMemorySpanExporter,
) -> None:
    endpoint = echo_endpoint()
    async with serve({"peer": {"model": {"type": "echo"}}}, {"peer": endpoint}, "peer") as peer:
        grpc_trace, grpc_parent, grpc_header = traceparent()
        assert peer.grpc_port is not None
        async with grpc.aio.insecure_channel(f"127.0.0.1:{peer.grpc_port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = (("traceparent", grpc_header), ("a2a-version", "1.0"))
            answer = await stub.SendMessage(grpc_send("over grpc"), metadata=metadata, timeout=STEP)
        assert "over grpc" in str(answer)

        rest_trace, rest_parent, rest_header = traceparent()
        body = {"message": rpc_send("over rest")["params"]["message"]}
        async with httpx.AsyncClient(base_url=peer.url, timeout=STEP) as http:
            reply = await http.post(
                "/a2a/rest/message:send", json=body, headers={**V1, "traceparent": rest_header}
            )
            assert (await http.get("/readyz")).status_code == 200  # a probe: never a trace
        assert reply.status_code == 200 and "over rest" in reply.text, reply.text

        def both() -> list[ReadableSpan]:
            return request_span_of("peer")(spans.get_finished_spans())

        await until(lambda: len(both()) == 2, "both request spans ended", spans)
    seen = {}
    for span in both():
        assert span.parent is not None
        seen[(hex_id(span.context.trace_id, 32), hex_id(span.parent.span_id, 16))] = span
    assert set(seen) == {(grpc_trace, grpc_parent), (rest_trace, rest_parent)}
    assert not [s for s in spans.get_finished_spans() if "readyz" in s.name]
    over_grpc = seen[(grpc_trace, grpc_parent)].attributes or {}
    assert over_grpc["a2a.transport"] == "GRPC" and over_grpc["rpc.grpc.status_code"] == 0
    over_rest = seen[(rest_trace, rest_parent)].attributes or {}
    assert over_rest["a2a.transport"] == "HTTP+JSON"
    assert over_rest["url.path"] == "/a2a/rest/message:send"
    finished = spans.get_finished_spans()
    for trace_id in (grpc_trace, rest_trace):
        turns = [
            s
            for s in finished
            if s.name == "turn peer" and hex_id(s.context.trace_id, 32) == trace_id
        ]
        assert len(turns) == 1, trace_id


async def test_an_untraced_process_adds_no_middleware_no_transport_and_no_ids() -> None:
    assert not tracing.on()
    assert traced_transport("a2a.peer") is None  # httpx's own transport: no traceparent
    async with serve(
        {"peer": {"model": {"type": "echo"}}}, {"peer": echo_endpoint()}, "peer"
    ) as peer:
        assert not isinstance(peer._http._app, HttpTracing)
        async with httpx.AsyncClient(base_url=peer.url, timeout=STEP) as http:
            reply = await http.post("/", json=rpc_send("plain"), headers=V1)
        assert "plain" in reply.text, reply.text
    assert tracing.current_ids() is None
    with tracing.span("nothing") as span:
        assert span is None


def test_the_environment_decides_whether_tracing_is_on() -> None:
    assert not tracing.wanted({})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert tracing.wanted({"OTEL_TRACES_EXPORTER": "console"})
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert not tracing.wanted({**endpoint, "OTEL_SDK_DISABLED": "true"})
    assert not tracing.wanted({**endpoint, "OTEL_TRACES_EXPORTER": "none"})
    with pytest.raises(tracing.TracingConfigError) as caught:
        tracing.wanted({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert str(caught.value) == (
        "OTEL_TRACES_EXPORTER='zipkin' is not supported; accepted: otlp, console, none"
    )


async def test_the_model_span_carries_the_tokens_of_the_call(spans: InMemorySpanExporter) -> None:
    model = ScriptedModel(default={"reply": "ok", "usage": {"input": 120, "output": 30}})
    agent = Agent(
        "counter",
        AgentManifest(),
        model,
        DelegationContract("counter", {}),
        choice=ModelChoice("scripted", {"model": "script-1"}),
    )
    events = [e async for e in agent.run(TurnInput("s", "t", "hello"))]
    assert isinstance(events[-1], TurnEnded) and events[-1].status == "completed"
    [chat] = [s for s in spans.get_finished_spans() if s.name == "chat script-1"]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert attributes["gen_ai.usage.output_tokens"] == 30
    assert attributes["gen_ai.request.model"] == "script-1"
    assert attributes["gen_ai.response.model"] == "scripted"
    assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "scripted"

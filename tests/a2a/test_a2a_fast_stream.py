"""The fast streaming path streams exactly what the SDK's own path streams.

Two exposures of the same scripted agent run side by side, one with the fast handler and
route (the default), one with ``fast_send=False`` (the SDK's ``DefaultRequestHandler`` and
``create_jsonrpc_routes`` only). Each case sends the same bytes to both and compares the
status, the SSE headers and the body frame by frame as text (so field names, order and
separators count), after replacing what is generated per request (UUIDs, artifact
suffixes, timestamps); then what the task store says afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, a2a_pb2_grpc
from a2a_support import STEP, ScriptRunner, endpoint_for, eventually, free_port, wait_for
from fast_path_support import EXPOSURES, V1, body, exposure, normalised
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.plugins.a2a.server.fast.stream import StreamRun
from library_ioa.plugins.a2a.server.publisher import TurnPublisher
from library_ioa.serving.listeners import HttpListener
from mas.ctl.session.mailbox import SessionTurnMailbox
from mas.infra.models import AgentManifest
from mas.runtime.turns import TurnEnded, TurnEvent, TurnInput

pytestmark = pytest.mark.integration

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SUFFIX = re.compile(r"-[0-9a-f]{12}\b")
_TIME = re.compile(r'"timestamp": ?"[^"]+"')
SSE_HEADERS = ("content-type", "cache-control", "connection", "x-accel-buffering")


def scrubbed(text: str) -> str:
    """``text`` with generated ids and times replaced by placeholders."""
    text = _TIME.sub('"timestamp": "<time>"', text)
    return _SUFFIX.sub("-<hex>", _UUID.sub("<uuid>", text))


@dataclass
class Streamed:
    """One streaming answer: status, SSE headers and frames (scrubbed text)."""

    status: int
    headers: dict[str, str]
    frames: list[str] = field(default_factory=list)

    def results(self) -> list[dict[str, Any]]:
        """The JSON of every data frame."""
        out = []
        for frame in self.frames:
            for line in frame.split("\r\n"):
                if line.startswith("data: "):
                    out.append(json.loads(line[len("data: ") :]))
        return out


def stream_body(text: str, **message: Any) -> bytes:
    sent = {"role": "ROLE_USER", "messageId": "s-1", "parts": [{"text": text}], **message}
    return body(method="SendStreamingMessage", message=sent)


async def read_stream(
    http: httpx.AsyncClient,
    url: str,
    content: bytes,
    *,
    path: str = "/",
    until: str | None = None,
    then: Any = None,
    headers: dict[str, str] = V1,
) -> Streamed:
    """Post ``content`` and read the whole answer; ``then()`` runs once a frame has ``until``."""
    async with (
        asyncio.timeout(STEP),
        http.stream("POST", url + path, content=content, headers=headers) as reply,
    ):
        headers = {k: reply.headers.get(k, "") for k in SSE_HEADERS}
        answer = Streamed(reply.status_code, headers)
        buffer = ""
        async for chunk in reply.aiter_text():
            buffer += chunk
            while "\r\n\r\n" in buffer:
                frame, buffer = buffer.split("\r\n\r\n", 1)
                answer.frames.append(scrubbed(frame))
                if until is not None and then is not None and until in frame:
                    await then(frame)
                    then = None
        if buffer:
            answer.frames.append(scrubbed(buffer))
    return answer


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: Any) -> Any:
    request = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    return (await http.post(url + "/", json=request, headers=V1)).json()


def task_id_of(frame: str) -> str:
    """The task id in the raw (unscrubbed) frame of a streamed task or status update."""
    result = json.loads(frame.split("data: ", 1)[1])["result"]
    return str(result["task"]["id"] if "task" in result else result["statusUpdate"]["taskId"])


@pytest.mark.parametrize(
    "text",
    [
        "echo one two three",
        "quick hello",
        "artifacts",
        "fail it broke",
        "ask which day?",
        "héllo ✓",
    ],
)
async def test_every_kind_of_turn_streams_alike(
    pair: tuple[httpx.AsyncClient, str, str], text: str, runs: list[StreamRun]
) -> None:
    http, fast, sdk = pair
    answers = [await read_stream(http, base, stream_body(text)) for base in (fast, sdk)]
    assert len(runs) == 1  # the fast exposure's stream ran on a StreamRun, the SDK's did not
    assert answers[0] == answers[1]
    assert answers[0].status == 200 and answers[0].headers["content-type"].startswith(
        "text/event-stream"
    )
    assert answers[0].results(), answers[0]


async def test_the_stored_task_is_the_same_after_the_stream(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    http, fast, sdk = pair
    stored = []
    for base in (fast, sdk):
        answer = await read_stream(http, base, stream_body("echo stored words", contextId="c-1"))
        listed = await rpc(http, base, "ListTasks", {"contextId": "c-1"})
        task = listed["result"]["tasks"][0]
        found = await rpc(http, base, "GetTask", {"id": task["id"]})
        stored.append((answer.frames, normalised(listed), normalised(found)))
    assert stored[0] == stored[1]
    task = stored[0][2]["result"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(p["text"] for p in task["artifacts"][0]["parts"]) == "echo stored words"


@pytest.mark.parametrize(
    "message",
    [
        {"role": "ROLE_USER", "parts": [{"text": "no id"}]},
        {"role": "ROLE_USER", "messageId": "m", "parts": []},
        {"role": "ROLE_NOBODY", "messageId": "m", "parts": [{"text": "x"}]},
        {"role": "ROLE_USER", "messageId": "m", "taskId": "nope", "parts": [{"text": "x"}]},
    ],
)
async def test_bad_streaming_requests_get_the_same_answer(
    pair: tuple[httpx.AsyncClient, str, str], message: dict[str, Any]
) -> None:
    http, fast, sdk = pair
    content = body(method="SendStreamingMessage", message=message)
    answers = []
    for base in (fast, sdk):
        reply = await http.post(base + "/", content=content, headers=V1)
        answers.append((reply.status_code, reply.headers["content-type"], scrubbed(reply.text)))
    assert answers[0] == answers[1]


async def test_a_history_length_applies_to_the_streamed_task(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    http, fast, sdk = pair
    sent = {"role": "ROLE_USER", "messageId": "s-2", "parts": [{"text": "echo short"}]}
    data = {"message": sent, "configuration": {"historyLength": 0}}
    content = json.dumps(
        {"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage", "params": data}
    ).encode()
    answers = [await read_stream(http, base, content) for base in (fast, sdk)]
    assert answers[0] == answers[1]


async def test_rest_streams_alike(pair: tuple[httpx.AsyncClient, str, str]) -> None:
    http, fast, sdk = pair
    request = {"message": {"role": "ROLE_USER", "messageId": "r", "parts": [{"text": "echo a b"}]}}
    content = json.dumps(request).encode()
    answers = [
        await read_stream(http, base, content, path="/a2a/rest/message:stream")
        for base in (fast, sdk)
    ]
    assert answers[0] == answers[1] and len(answers[0].frames) == 7, answers[0]


async def test_a_0_3_message_stream_streams_alike(
    pair: tuple[httpx.AsyncClient, str, str], runs: list[StreamRun]
) -> None:
    http, fast, sdk = pair
    message = {"role": "user", "messageId": "m-03", "kind": "message", "contextId": "c-03"}
    message["parts"] = [{"kind": "text", "text": "echo old words"}]
    content = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "message/stream", "params": {"message": message}}
    ).encode()
    old = {"Content-Type": "application/json"}  # no A2A-Version: read as 0.3
    answers = [await read_stream(http, base, content, headers=old) for base in (fast, sdk)]
    assert len(runs) == 1
    assert answers[0] == answers[1]
    assert '"completed"' in answers[0].frames[-1], answers[0]


@contextlib.asynccontextmanager
async def grpc_pair() -> AsyncIterator[list[str]]:
    """Both exposures with gRPC; their gRPC addresses (fast first)."""
    async with contextlib.AsyncExitStack() as stack:
        addresses = []
        for fast in (True, False):
            mailbox = SessionTurnMailbox(ScriptRunner())
            served = A2AExposure(
                agent_id="scripted",
                manifest=AgentManifest(),
                endpoint=endpoint_for(free_port(), free_port()),
                mailbox=mailbox,
                grpc=True,
                drain_timeout=2.0,
                message_grace=5.0,
                fast_send=fast,
            )
            await served.start()
            stack.push_async_callback(mailbox.aclose)
            stack.push_async_callback(served.aclose)
            assert served.grpc_address is not None
            addresses.append(served.grpc_address)
        yield addresses


@pytest.mark.parametrize("text", ["echo one two", "quick hi", "fail no"])
async def test_grpc_streams_alike(text: str, runs: list[StreamRun]) -> None:
    request = SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id="g-1", parts=[Part(text=text)])
    )
    answers = []
    async with grpc_pair() as addresses:
        for address in addresses:
            async with grpc.aio.insecure_channel(address) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                call = stub.SendStreamingMessage(
                    request, metadata=(("a2a-version", "1.0"),), timeout=STEP
                )
                answers.append([scrubbed(json.dumps(MessageToDict(r))) async for r in call])
    assert len(runs) == 1
    assert answers[0] == answers[1] and answers[0], answers


@contextlib.asynccontextmanager
async def gated_pair() -> AsyncIterator[tuple[httpx.AsyncClient, list[tuple[str, ScriptRunner]]]]:
    """Both exposures, each with its own runner, so a gate of the same name opens each."""
    runners = [ScriptRunner(), ScriptRunner()]
    async with (
        exposure(fast=True, message_grace=0.2, runner=runners[0]) as fast,
        exposure(fast=False, message_grace=0.2, runner=runners[1]) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        yield http, [(fast, runners[0]), (sdk, runners[1])]


async def test_a_cancel_during_a_stream_ends_it_alike() -> None:
    async with gated_pair() as (http, bases):
        seen = []
        for base, _runner in bases:
            answers: dict[str, Any] = {}

            async def cancel(
                frame: str, base: str = base, answers: dict[str, Any] = answers
            ) -> None:
                task_id = task_id_of(frame)
                answers["task_id"] = task_id
                answers["cancel"] = normalised(await rpc(http, base, "CancelTask", {"id": task_id}))

            streamed = await read_stream(
                http, base, stream_body("wait g1 never"), until="TASK_STATE_WORKING", then=cancel
            )
            found = await rpc(http, base, "GetTask", {"id": answers["task_id"]})
            again = await rpc(http, base, "CancelTask", {"id": answers["task_id"]})
            seen.append((streamed, answers["cancel"], normalised(found), normalised(again)))
        for _base, runner in bases:
            runner.gates["g1"].set()  # the turns go on after the cancel, and end unseen
    assert seen[0] == seen[1]
    streamed, canceled, found, again = seen[0]
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
    assert found["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert streamed.results()[-1]["result"]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_CANCELED"
    )
    assert again["error"]["code"] == -32002, again  # TaskNotCancelableError


async def test_input_required_then_resume_and_cancel_alike(
    pair: tuple[httpx.AsyncClient, str, str],
) -> None:
    http, fast, sdk = pair
    seen = []
    for base in (fast, sdk):
        asked = await read_stream(http, base, stream_body("ask which day?", contextId="c-ask"))
        task_id = (await rpc(http, base, "ListTasks", {"contextId": "c-ask"}))["result"]["tasks"]
        task_id = task_id[0]["id"]
        message = {"role": "ROLE_USER", "messageId": "s-3", "taskId": task_id}
        message["parts"] = [{"text": "monday"}]
        resumed = await read_stream(
            http, base, body(method="SendStreamingMessage", message=message)
        )
        asked_again = await read_stream(http, base, stream_body("ask again?", contextId="c-ask2"))
        listed = await rpc(http, base, "ListTasks", {"contextId": "c-ask2"})
        parked = listed["result"]["tasks"][0]["id"]
        canceled = await rpc(http, base, "CancelTask", {"id": parked})
        seen.append((asked, resumed, asked_again, normalised(canceled)))
    assert seen[0] == seen[1]
    assert seen[0][3]["result"]["status"]["state"] == "TASK_STATE_CANCELED", seen[0][3]


async def test_a_resubscription_during_a_stream_gets_the_same_events() -> None:
    async with gated_pair() as (http, bases):
        seen = []
        for base, runner in bases:
            subscribed: dict[str, Streamed] = {}

            async def resubscribe(
                frame: str, base: str = base, runner: ScriptRunner = runner, out: Any = subscribed
            ) -> None:
                task_id = task_id_of(frame)
                content = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 4,
                        "method": "SubscribeToTask",
                        "params": {"id": task_id},
                    }
                ).encode()

                async def open_gate(_: str) -> None:
                    runner.gates["g2"].set()

                out["it"] = await read_stream(
                    http, base, content, until="TASK_STATE_WORKING", then=open_gate
                )

            streamed = await read_stream(
                http, base, stream_body("wait g2 late words"), until="TASK_STATE_WORKING",
                then=resubscribe,
            )  # fmt: skip
            seen.append((streamed, subscribed["it"]))
    assert seen[0] == seen[1]
    assert seen[0][1].results()[-1]["result"]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )


async def test_a_client_that_goes_away_leaves_the_turn_running_to_its_end() -> None:
    async with gated_pair() as (http, bases):
        for base, runner in bases:
            async with (
                asyncio.timeout(STEP),
                http.stream(
                    "POST", base + "/", content=stream_body("wait g3 bye"), headers=V1
                ) as reply,
            ):
                async for line in reply.aiter_lines():
                    if "TASK_STATE_WORKING" in line:
                        task_id = json.loads(line[len("data: ") :])["result"]["statusUpdate"][
                            "taskId"
                        ]
                        break  # the client goes away mid-stream
            await wait_for(runner.started["g3"])
            runner.gates["g3"].set()

            async def completed(base: str = base, task_id: str = task_id) -> bool:
                found = await rpc(http, base, "GetTask", {"id": task_id})
                return bool(found["result"]["status"]["state"] == "TASK_STATE_COMPLETED")

            await eventually(completed, "the turn ends and is stored without its client")


@dataclass
class RaisingRunner(ScriptRunner):
    """A runner whose model raises on ``raise``, after one streamed word."""

    async def run(self, turn: TurnInput) -> AsyncIterator[TurnEvent]:  # type: ignore[override]
        if turn.text.startswith("raise"):
            from mas.runtime.turns import TextDelta

            yield TextDelta("partial")
            raise RuntimeError("the model broke")
        async for event in super().run(turn):
            yield event


async def test_a_model_that_raises_streams_alike() -> None:
    async with (
        exposure(fast=True, runner=RaisingRunner()) as fast,
        exposure(fast=False, runner=RaisingRunner()) as sdk,
        httpx.AsyncClient(timeout=STEP) as http,
    ):
        answers = [await read_stream(http, base, stream_body("raise now")) for base in (fast, sdk)]
    assert answers[0] == answers[1]
    assert answers[0].results()[-1]["result"]["statusUpdate"]["status"]["state"] == (
        "TASK_STATE_FAILED"
    )


async def test_an_executor_that_raises_mid_stream_fails_the_task_alike(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[httpx.AsyncClient, str, str], runs: list[StreamRun]
) -> None:
    async def broken_end(self: TurnPublisher, end: TurnEnded) -> None:
        raise RuntimeError("the publisher broke")

    monkeypatch.setattr(TurnPublisher, "_end", broken_end)
    http, fast, sdk = pair
    seen = []
    for base in (fast, sdk):
        answer = await read_stream(http, base, stream_body("echo x y", contextId="c-broken"))
        listed = await rpc(http, base, "ListTasks", {"contextId": "c-broken"})
        seen.append((answer, normalised(listed)))
    assert len(runs) == 1
    assert seen[0] == seen[1]
    assert seen[0][0].frames[-1].startswith("event: error"), seen[0][0].frames[-1]
    assert seen[0][1]["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_FAILED"


async def test_a_message_naming_the_streamed_task_waits_behind_its_turn_alike() -> None:
    async with gated_pair() as (http, bases):
        seen = []
        for base, runner in bases:
            follow_up: dict[str, Any] = {}

            async def send_second(
                frame: str, base: str = base, runner: ScriptRunner = runner, out: Any = follow_up
            ) -> None:
                message = {"role": "ROLE_USER", "messageId": "s-5", "taskId": task_id_of(frame)}
                message["parts"] = [{"text": "quick second"}]
                out["task_id"] = message["taskId"]
                out["reply"] = asyncio.ensure_future(
                    http.post(base + "/", content=body(message=message), headers=V1)
                )

                async def waiting() -> bool:
                    return out["task_id"] in EXPOSURES[base].executor.waiting

                await eventually(waiting, "the second message waits behind the running turn")
                runner.gates["g4"].set()

            streamed = await read_stream(
                http, base, stream_body("wait g4 first"), until="TASK_STATE_WORKING",
                then=send_second,
            )  # fmt: skip
            reply = await follow_up["reply"]
            found = await rpc(http, base, "GetTask", {"id": follow_up["task_id"]})
            seen.append((streamed, normalised(reply.json()), normalised(found)))
    assert seen[0] == seen[1]
    streamed, reply, found = seen[0]
    last = streamed.results()[-1]["result"]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_WORKING" and last["metadata"], last
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
    assert found["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


@contextlib.asynccontextmanager
async def push_pair(
    runners: list[ScriptRunner],
) -> AsyncIterator[tuple[httpx.AsyncClient, list[str], dict[str, list[Any]], str]]:
    """Both exposures with push notifications, and one receiver of their pushes."""
    received: dict[str, list[Any]] = {"fast": [], "sdk": []}

    async def collect(request: Request) -> Response:
        received[request.path_params["which"]].append(await request.json())
        return Response(status_code=204)

    hooks = HttpListener(
        Starlette(routes=[Route("/hook/{which}", collect, methods=["POST"])]),
        "127.0.0.1",
        0,
        graceful_timeout=1,
    )
    await hooks.start()
    bases: list[str] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            for fast, runner in zip((True, False), runners, strict=True):
                mailbox = SessionTurnMailbox(runner)
                endpoint = endpoint_for(free_port(), pushNotifications=True)
                # a config attached mid-stream without auth (refused by default: security.md)
                endpoint.a2a.push.allow_anonymous_create = True
                served = A2AExposure(
                    agent_id="scripted",
                    manifest=AgentManifest(),
                    endpoint=endpoint,
                    mailbox=mailbox,
                    drain_timeout=2.0,
                    message_grace=0.2,
                    fast_send=fast,
                )
                await served.start()
                stack.push_async_callback(mailbox.aclose)
                stack.push_async_callback(served.aclose)
                bases.append(served.url)
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=STEP))
            yield http, bases, received, f"http://127.0.0.1:{hooks.port}/hook"
    finally:
        await hooks.aclose()


async def test_a_push_config_added_mid_stream_is_pushed_alike() -> None:
    runners = [ScriptRunner(), ScriptRunner()]
    async with push_pair(runners) as (http, bases, received, hook):
        seen = []
        for base, runner, which in zip(bases, runners, ("fast", "sdk"), strict=True):
            created: dict[str, Any] = {}

            async def configure(
                frame: str,
                base: str = base,
                runner: ScriptRunner = runner,
                which: str = which,
                created: dict[str, Any] = created,
            ) -> None:
                config = {"taskId": task_id_of(frame), "url": f"{hook}/{which}", "token": "tok"}
                answer = await rpc(http, base, "CreateTaskPushNotificationConfig", config)
                created["it"] = json.loads(json.dumps(normalised(answer)).replace(which, "X"))
                runner.gates["g6"].set()

            streamed = await read_stream(
                http, base, stream_body("wait g6 pushed"), until="TASK_STATE_WORKING",
                then=configure,
            )  # fmt: skip

            async def pushed(which: str = which) -> bool:
                return any("TASK_STATE_COMPLETED" in json.dumps(b) for b in received[which])

            await eventually(pushed, "the completed status is pushed")
            seen.append((streamed, created["it"], normalised(received[which])))
    assert seen[0] == seen[1]
    assert "result" in seen[0][1], seen[0][1]
    assert any("artifactUpdate" in pushed for pushed in seen[0][2]), seen[0][2]

"""Every door of an agent enforces its one ``a2a.auth``, and a conversation belongs to its
principal: the MCP door refuses what the A2A door refuses (401 with the challenge), and a
``contextId`` (or MCP ``session``) another principal uses is a conversation of its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import httpx2
import pytest
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from security_support import API_KEY_HEADER, AUTH, V1, Secrets, echo_endpoint, serve
from tests.ports import free_port
from tests.session_modes.session_modes_support import STEP, application, scripted, story

from mas.ctl.session.modes import SessionProcess
from mas.infra.errors import ApplicationInvalid
from mas.infra.wiring import wire

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]


def desk_app(release: Path, *, auth_on: str) -> tuple[dict[str, Any], str, str]:
    """Agent 'desk' with an A2A and an MCP door; ``auth_on`` names the row with the auth."""
    a2a, mcp = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    doors: dict[str, dict[str, Any]] = {
        "desk": {"url": a2a, "usage": "deploy"},
        "desk-mcp": {"protocol": "mcp", "agent": "desk", "url": mcp, "usage": "deploy"},
    }
    doors[auth_on]["a2a"] = {"auth": AUTH}
    model = scripted(story(release), default="heard: {input}")
    return application({"desk": {"model": model}}, doors), a2a, f"{mcp}/mcp"


class Desk:
    def __init__(self, process: SessionProcess, a2a: str, mcp: str, release: Path) -> None:
        self.process, self.a2a, self.mcp, self.release = process, a2a, mcp, release

    async def history(self, session: str) -> list[str]:
        runner: Any = self.process.host.runner("desk")
        return [m.content for m in await runner.history(session)]


@pytest.fixture(params=["desk", "desk-mcp"], ids=["auth-on-a2a-row", "auth-on-mcp-row"])
async def desk(request: Any, creds: Secrets, tmp_path: Path) -> AsyncIterator[Desk]:
    release = tmp_path / "story.release"
    doc, a2a, mcp = desk_app(release, auth_on=request.param)
    process = SessionProcess(wire(doc), control=False)
    await process.start()
    try:
        yield Desk(process, a2a, mcp, release)
    finally:
        release.touch()
        await process.aclose(drain=False)


def bearer(creds: Secrets) -> dict[str, str]:
    return {"Authorization": f"Bearer {creds.token}"}


def api_key(creds: Secrets) -> dict[str, str]:
    return {API_KEY_HEADER: creds.api_key}


def rpc(method: str, text: str, context_id: str) -> dict[str, Any]:
    message = {
        "role": "ROLE_USER",
        "messageId": uuid.uuid4().hex,
        "contextId": context_id,
        "parts": [{"text": text}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def texts_of(value: Any) -> list[str]:
    """Every ``text`` in a JSON answer, in order."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in ([v] if k == "text" else texts_of(v))]
    if isinstance(value, list):
        return [t for v in value for t in texts_of(v)]
    return []


def context_ids_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {
            c for k, v in value.items() for c in ({v} if k == "contextId" else context_ids_of(v))
        }
    if isinstance(value, list):
        return {c for v in value for c in context_ids_of(v)}
    return set()


async def a2a_send(url: str, headers: dict[str, str], text: str, context_id: str) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=STEP) as http:
        response = await http.post(
            "/", json=rpc("SendMessage", text, context_id), headers={**V1, **headers}
        )
    assert response.status_code == 200, response.text
    return response.json()


async def a2a_stream(url: str, headers: dict[str, str], text: str, context_id: str) -> list[Any]:
    events = []
    async with (
        httpx.AsyncClient(base_url=url, timeout=STEP) as http,
        http.stream(
            "POST",
            "/",
            json=rpc("SendStreamingMessage", text, context_id),
            headers={**V1, **headers, "Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    return events


async def rest_send(url: str, headers: dict[str, str], text: str, context_id: str) -> Any:
    body = json.dumps({"message": rpc("x", text, context_id)["params"]["message"]})
    async with httpx.AsyncClient(base_url=url, timeout=STEP) as http:
        response = await http.post(
            "/a2a/rest/message:send",
            content=body,
            headers={**V1, **headers, "Content-Type": "application/json"},
        )
    assert response.status_code == 200, response.text
    return response.json()


@contextlib.asynccontextmanager
async def mcp_client(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(STEP))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    else:
        yield exc
        if exc.__cause__ is not None:
            yield from leaves(exc.__cause__)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def test_the_mcp_door_refuses_what_the_a2a_door_refuses(desk: Desk, creds: Secrets) -> None:
    async with httpx.AsyncClient(timeout=STEP) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {API_KEY_HEADER: "wrong"}):
            refused = await http.post(desk.mcp, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"] == 'Bearer realm="a2a"'
            error = refused.json()["error"]
            assert error["code"] == -32600 and "authentication required" in error["message"]
            a2a = await http.post(desk.a2a + "/", json=rpc("SendMessage", "x", "c"), headers=V1)
            assert a2a.status_code == 401  # whichever row declares it, both doors enforce it
        probe = desk.mcp.removesuffix("/mcp")
        assert (await http.get(probe + "/healthz")).status_code == 200
        assert (await http.get(probe + "/readyz")).status_code == 200
        served = await http.post(
            desk.mcp, json=INITIALIZE, headers={**MCP_HEADERS, **api_key(creds)}
        )
        assert served.status_code == 200, served.text
    # The official client: refused without a credential, served with either.
    with pytest.raises(BaseException) as caught:
        async with asyncio.timeout(STEP), mcp_client(desk.mcp, {}) as client:
            await client.call_tool("ask", {"message": "let me in", "session": "s"})
    assert any(
        "authentication required (missing credentials); present a credential of the agent's "
        "a2a.auth" in str(leaf)
        for leaf in leaves(caught.value)
    ), caught.value
    for headers in (bearer(creds), api_key(creds)):
        async with asyncio.timeout(STEP), mcp_client(desk.mcp, headers) as client:
            result = await client.call_tool("ask", {"message": "hello", "session": "s"})
        assert result.structured_content == {
            "session": "s",
            "status": "completed",
            "text": "heard: hello",
        }
    assert await desk.history("bearer/s") == ["hello", "heard: hello"]
    assert await desk.history("apiKey/s") == ["hello", "heard: hello"]
    assert await desk.history("s") == []  # the refused call ran no turn


async def test_a_conversation_belongs_to_the_principal_that_uses_it(
    desk: Desk, creds: Secrets
) -> None:
    first_chunk = asyncio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        first_chunk.set()

    async with asyncio.timeout(STEP * 3), mcp_client(desk.mcp, bearer(creds)) as alice:
        held = asyncio.create_task(
            alice.call_tool(
                "ask", {"message": "story", "session": "shared"}, progress_callback=progress
            )
        )
        await first_chunk.wait()  # A's turn on 'shared' is running, held after "one "
        # B names A's context on every transport and door: its own conversation, at once
        # (it does not queue behind A's held turn), under the id it named.
        plain = await a2a_send(desk.a2a, api_key(creds), "b over json-rpc", "shared")
        assert "heard: b over json-rpc" in texts_of(plain)
        assert context_ids_of(plain) == {"shared"}
        streamed = await a2a_stream(desk.a2a, api_key(creds), "b streaming", "shared")
        assert "heard: b streaming" in "".join(texts_of(streamed))
        assert context_ids_of(streamed) == {"shared"}
        rest = await rest_send(desk.a2a, api_key(creds), "b over rest", "shared")
        assert "heard: b over rest" in texts_of(rest)
        async with mcp_client(desk.mcp, api_key(creds)) as bob:
            over_mcp = await bob.call_tool("ask", {"message": "b over mcp", "session": "shared"})
        assert over_mcp.structured_content is not None
        assert over_mcp.structured_content["session"] == "shared"
        assert not held.done()
        assert await desk.history("apiKey/shared") == [
            "b over json-rpc",
            "heard: b over json-rpc",
            "b streaming",
            "heard: b streaming",
            "b over rest",
            "heard: b over rest",
            "b over mcp",
            "heard: b over mcp",
        ]
        desk.release.touch()
        result = await held
    assert result.structured_content is not None
    assert result.structured_content["text"] == "one two three four five six"
    # A's own conversation holds only A's turns; A goes on with it over A2A.
    reply = await a2a_send(desk.a2a, bearer(creds), "a again", "shared")
    assert "heard: a again" in texts_of(reply)
    assert await desk.history("bearer/shared") == [
        "story",
        "one two three four five six",
        "a again",
        "heard: a again",
    ]


def test_doors_of_one_agent_with_different_auth_are_refused(creds: Secrets) -> None:
    doc, _, _ = desk_app(Path("unused"), auth_on="desk")
    other = {"schemes": [{"type": "api_key", "value_env": "SOME_OTHER_KEY"}]}
    doc["spec"]["endpoints"]["desk-mcp"]["a2a"] = {"auth": other}
    with pytest.raises(ApplicationInvalid) as refused:
        wire(doc)
    text = str(refused.value)
    assert "spec.endpoints.desk-mcp.a2a.auth: differs from spec.endpoints.desk.a2a.auth" in text
    assert "every door of agent 'desk' enforces one auth" in text


def test_auth_on_a_tool_server_is_refused_naming_headers() -> None:
    doc, _, _ = desk_app(Path("unused"), auth_on="desk")
    doc["spec"]["endpoints"]["tools"] = {
        "protocol": "mcp",
        "usage": "use",
        "url": "http://127.0.0.1:8600/mcp",
        "a2a": {"auth": AUTH},
    }
    with pytest.raises(ApplicationInvalid) as refused:
        wire(doc)
    assert "spec.endpoints.tools.a2a.auth: is the inbound auth of a deployed door" in str(
        refused.value
    )
    assert "headers" in str(refused.value)


async def test_a_stored_conversation_stays_its_principals_across_a_restart(
    creds: Secrets, tmp_path: Path
) -> None:
    db = tmp_path / "tasks.db"
    a2a = f"http://127.0.0.1:{free_port()}"
    store = {"type": "sql", "url": f"sqlite+aiosqlite:///{db}"}
    doc = application(
        {"desk": {"model": scripted(default="heard: {input}")}},
        {"desk": {"url": a2a, "usage": "deploy", "a2a": {"auth": AUTH, "task_store": store}}},
    )
    for run in ("before", "after"):  # the second process reads what the first stored
        process = SessionProcess(wire(doc), control=False)
        await process.start()
        try:
            await a2a_send(a2a, bearer(creds), f"a {run}", "shared")
            await a2a_send(a2a, api_key(creds), f"b {run}", "shared")
        finally:
            await process.aclose(drain=False)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "select session_id, body from mas_conversation_messages order by session_id, seq"
        ).fetchall()
    stored: dict[str, list[str]] = {}
    for session, body in rows:
        stored.setdefault(session, []).append(json.loads(body)["content"])
    assert stored == {
        "apiKey/shared": ["b before", "heard: b before", "b after", "heard: b after"],
        "bearer/shared": ["a before", "heard: a before", "a after", "heard: a after"],
    }


async def test_over_grpc_a_context_id_names_the_callers_own_conversation(
    creds: Secrets, tmp_path: Path
) -> None:
    release = tmp_path / "story.release"
    agents = {"desk": {"model": scripted(story(release), default="heard: {input}")}}
    async with serve(agents, {"desk": echo_endpoint(auth=AUTH)}, "desk") as exposure:
        first_chunk = asyncio.Event()

        async def held_story() -> None:  # A's turn on 'shared', held after "one "
            async with (
                httpx.AsyncClient(base_url=exposure.url, timeout=STEP * 3) as http,
                http.stream(
                    "POST",
                    "/",
                    json=rpc("SendStreamingMessage", "story", "shared"),
                    headers={**V1, **bearer(creds), "Accept": "text/event-stream"},
                ) as response,
            ):
                async for line in response.aiter_lines():
                    if "one " in line:
                        first_chunk.set()

        held = asyncio.create_task(held_story())
        try:
            async with asyncio.timeout(STEP):
                await first_chunk.wait()
            request = SendMessageRequest()
            request.message.message_id = uuid.uuid4().hex
            request.message.context_id = "shared"
            request.message.role = 1
            request.message.parts.add().text = "b over grpc"
            async with grpc.aio.insecure_channel(f"127.0.0.1:{exposure.grpc_port}") as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                reply = await stub.SendMessage(  # B does not queue behind A's held turn
                    request,
                    metadata=(("a2a-version", "1.0"), ("x-api-key", creds.api_key)),
                    timeout=STEP,
                )
            assert reply.message.context_id == "shared"
            assert [p.text for p in reply.message.parts] == ["heard: b over grpc"]
            assert not held.done()
        finally:
            release.touch()
            async with asyncio.timeout(STEP):
                await held

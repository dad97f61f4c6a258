"""Inbound auth: declared on the public card, enforced on JSON-RPC, HTTP+JSON and gRPC."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
import yaml
from a2a.types import SendMessageRequest, a2a_pb2_grpc
from security_support import API_KEY_HEADER, AUTH, V1, Secrets, echo_endpoint, rpc_send, serve
from tests.security.served_process import app_document

from library_ioa.plugins.a2a.exposure import A2AExposure
from library_ioa.serving.auth import Authenticator, Credential
from mas.ctl.cli import main

pytestmark = [pytest.mark.timeout(60), pytest.mark.integration]

ECHO = {"echo": {"model": {"type": "echo"}}}
STEP = 10.0


@pytest.fixture
async def guarded(creds: Secrets) -> AsyncIterator[A2AExposure]:
    endpoint = echo_endpoint(
        auth=AUTH,
        capabilities={"extendedAgentCard": True},
        extended_skills=[{"id": "audit", "description": "Reads the audit log."}],
    )
    async with serve(ECHO, {"echo": endpoint}, "echo") as exposure:
        yield exposure


@pytest.fixture
async def http(guarded: A2AExposure) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=guarded.url, timeout=STEP) as client:
        yield client


async def test_the_card_is_public_and_declares_the_schemes(
    http: httpx.AsyncClient, creds: Secrets
) -> None:
    response = await http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    schemes = card["securitySchemes"]
    assert set(schemes) == {"bearer", "apiKey"}
    assert schemes["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    api_key = schemes["apiKey"]["apiKeySecurityScheme"]
    assert (api_key["location"], api_key["name"]) == ("header", API_KEY_HEADER)
    assert card["securityRequirements"] == [
        {"schemes": {"bearer": {}}},
        {"schemes": {"apiKey": {}}},
    ]
    assert creds.token not in response.text and creds.api_key not in response.text
    assert (await http.get("/healthz")).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {API_KEY_HEADER: "wrong"},
        {"Authorization": "Basic x"},
    ],
    ids=["none", "wrong-bearer", "wrong-key", "basic"],
)
async def test_json_rpc_without_the_right_credential_is_401(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await http.post("/", json=rpc_send("let me in"), headers={**V1, **headers})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="a2a"'
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600
    assert "authentication required" in body["error"]["message"]
    assert "let me in" not in response.text


async def test_json_rpc_with_either_credential_is_served(
    http: httpx.AsyncClient, creds: Secrets
) -> None:
    for headers in ({"Authorization": f"Bearer {creds.token}"}, {API_KEY_HEADER: creds.api_key}):
        response = await http.post("/", json=rpc_send("hello there"), headers={**V1, **headers})
        assert response.status_code == 200, response.text
        assert "hello there" in response.text and "result" in response.json()
    lower = await http.post(
        "/",
        json=rpc_send("scheme is case-insensitive"),
        headers={**V1, "authorization": f"bearer {creds.token}"},
    )
    assert lower.status_code == 200


async def test_http_json_requires_the_credential_too(
    http: httpx.AsyncClient, creds: Secrets
) -> None:
    body = json.dumps({"message": rpc_send("rest hello")["params"]["message"]})
    headers = {"Content-Type": "application/json", **V1}
    refused = await http.post("/a2a/rest/message:send", content=body, headers=headers)
    assert refused.status_code == 401
    error = refused.json()["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    listed = await http.get("/a2a/rest/tasks", headers=V1)
    assert listed.status_code == 401
    served = await http.post(
        "/a2a/rest/message:send", content=body, headers={**headers, API_KEY_HEADER: creds.api_key}
    )
    assert served.status_code == 200 and "rest hello" in served.text


async def test_the_extended_card_requires_the_credential(
    http: httpx.AsyncClient, creds: Secrets
) -> None:
    refused = await http.get("/a2a/rest/extendedAgentCard", headers=V1)
    assert refused.status_code == 401
    rpc = {"jsonrpc": "2.0", "id": 3, "method": "GetExtendedAgentCard", "params": {}}
    assert (await http.post("/", json=rpc, headers=V1)).status_code == 401
    bearer = {**V1, "Authorization": f"Bearer {creds.token}"}
    allowed = await http.post("/", json=rpc, headers=bearer)
    assert allowed.status_code == 200
    card = allowed.json()["result"]  # the card it advertises, not -32007 (not configured)
    assert [s["id"] for s in card["skills"]] == ["general", "audit"]
    assert card["capabilities"]["extendedAgentCard"] is True
    public = (await http.get("/.well-known/agent-card.json")).json()
    assert [s["id"] for s in public["skills"]] == ["general"]
    rest = await http.get("/a2a/rest/extendedAgentCard", headers=bearer)
    assert rest.status_code == 200 and "Reads the audit log." in rest.text, rest.text


def grpc_request(text: str) -> SendMessageRequest:
    request = SendMessageRequest()
    request.message.message_id = text.replace(" ", "-")
    request.message.role = 1
    request.message.parts.add().text = text
    return request


async def test_grpc_requires_the_credential_in_metadata(
    guarded: A2AExposure, creds: Secrets
) -> None:
    version = ("a2a-version", "1.0")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for metadata in ((version,), (version, ("authorization", "Bearer nope"))):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(grpc_request("grpc knock"), metadata=metadata, timeout=STEP)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "authentication required" in (refused.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as stream_refused:
            async for _ in stub.SendStreamingMessage(
                grpc_request("s"), metadata=(version,), timeout=STEP
            ):
                pass
        assert stream_refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        for good in (("authorization", f"Bearer {creds.token}"), ("x-api-key", creds.api_key)):
            reply = await stub.SendMessage(
                grpc_request("grpc welcome"), metadata=(version, good), timeout=STEP
            )
            assert "grpc welcome" in str(reply)


def test_the_authenticator_compares_every_scheme_and_never_shows_a_secret() -> None:
    auth = Authenticator(
        [
            Credential("bearer", "bearer", "authorization", b"bearer ", b"s3cr3t"),
            Credential("apiKey", "api_key", "x-api-key", b"", b"k3y"),
        ]
    )
    assert auth.accepts({"authorization": b"Bearer s3cr3t"})
    assert auth.accepts({"x-api-key": b"k3y"})
    assert not auth.accepts({"authorization": b"Bearer s3cr3"})
    assert not auth.accepts({"authorization": b"s3cr3t"})
    assert not auth.accepts({"x-api-key": b"Bearer s3cr3t"})
    assert not auth.accepts({})
    assert "s3cr3t" not in repr(auth.credentials)


def test_mas_ctl_serve_names_a_missing_secret_variable(
    tmp_path: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    monkeypatch.delenv("SEC_TEST_API_KEY", raising=False)
    document = app_document(ECHO, {"echo": echo_endpoint(auth=AUTH)})
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(document))
    code = main(["serve", "-f", str(path), "--agent", "echo", "--no-control"])
    err = capsys.readouterr().err
    assert code == 1
    assert "spec.endpoints.echo.a2a.auth.schemes[0].secret_key_ref" in err
    assert "MAS_SECRET_A2A_INBOUND_TOKEN_" in err and "not set" in err
    assert "Traceback" not in err

"""Push-notification URLs: the SSRF policy (a2a.push), the token on each push, the serve flag."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from security_support import V1, echo_endpoint, rpc_send, serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tests.security.served_process import app_document, serve_process

from library_ioa.plugins.a2a.server.push.url_policy import PushUrlPolicy, address_is_public
from library_ioa.serving.listeners import HttpListener
from mas.infra.conformance import PROBE_PUSH_HOST, PROBE_PUSH_URL

pytestmark = [pytest.mark.timeout(240)]  # two cold mas-ctl serve in one test

ECHO = {"echo": {"model": {"type": "echo"}}}
STEP = 10.0


@pytest.mark.parametrize(
    "url",
    [
        "ftp://93.184.215.14/x",
        "file:///etc/passwd",
        "gopher://example.com/",
        "http:///no-host",
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://100.64.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[fe80::1]/hook",
        "http://0.0.0.0/hook",
        "http://224.0.0.1/hook",
        "http://2130706433/hook",  # 127.0.0.1 as one decimal number
        "http://0x7f.1/hook",
        "http://no-such-host.invalid/hook",
        "http://[::1/hook",
    ],
)
async def test_the_default_policy_refuses(url: str) -> None:
    policy = PushUrlPolicy(resolve_timeout=3)
    assert await policy.refusal(url) is not None
    assert not await policy(url)


@pytest.mark.parametrize(
    ("url", "accepted"),
    [
        (PROBE_PUSH_URL, True),
        (f"http://{PROBE_PUSH_HOST}:8080/other/path", True),
        (f"ftp://{PROBE_PUSH_HOST}/x", False),  # the scheme rule still holds
        ("https://push-receiver.other.invalid/mas-conformance", False),  # only that one name
        (f"https://x.{PROBE_PUSH_HOST}/mas-conformance", False),
    ],
)
async def test_only_the_probe_webhook_is_accepted_while_it_does_not_resolve(
    url: str, accepted: bool
) -> None:
    """The conformance probe's push-config check works without DNS; nothing else unresolvable
    is accepted, and nothing can be delivered to a name that does not resolve."""
    assert (await PushUrlPolicy(resolve_timeout=3)(url)) is accepted


@pytest.mark.parametrize(
    "url", ["http://93.184.215.14/hook", "https://8.8.8.8:8443/hook", "http://[2606:4700::1111]/"]
)
async def test_public_addresses_are_accepted(url: str) -> None:
    assert await PushUrlPolicy()(url)


async def test_configuration_opens_private_addresses() -> None:
    listed = PushUrlPolicy(allowed_hosts=["127.0.0.1", "Receiver.Internal"])
    assert await listed("http://127.0.0.1:9/hook")
    assert await listed("http://receiver.internal/hook")  # listed: not resolved at all
    assert not await listed("http://10.0.0.1/hook")
    anything = PushUrlPolicy(allow_private=True)
    assert await anything("http://169.254.169.254/")
    assert not await anything("ftp://127.0.0.1/")  # the scheme rule always holds


def test_address_classification() -> None:
    assert address_is_public("1.1.1.1")
    for private in ("127.0.0.1", "10.0.0.1", "169.254.169.254", "fd00:ec2::254", "::1", "::"):
        assert not address_is_public(private)
    assert not address_is_public("not an address")


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[tuple[str, list[tuple[dict[str, str], Any]], asyncio.Event]]:
    """A webhook receiver on loopback: its URL, what it received, set on a terminal state."""
    received: list[tuple[dict[str, str], Any]] = []
    done = asyncio.Event()

    async def hook(request: Request) -> Response:
        body = await request.json()
        received.append((dict(request.headers), body))
        if body.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED":
            done.set()
        return Response(status_code=204)

    listener = HttpListener(
        Starlette(routes=[Route("/hook", hook, methods=["POST"])]), "127.0.0.1", 0
    )
    await listener.start()
    try:
        yield f"http://127.0.0.1:{listener.port}/hook", received, done
    finally:
        await listener.aclose()


def with_push(text: str, url: str, token: str) -> dict[str, Any]:
    request = rpc_send(text)
    request["params"]["configuration"] = {
        "taskPushNotificationConfig": {"url": url, "token": token}
    }
    return request


async def test_a_served_agent_refuses_private_push_urls_by_default() -> None:
    endpoint = echo_endpoint(capabilities={"pushNotifications": True})
    async with (
        receiver() as (url, received, _),
        serve(ECHO, {"echo": endpoint}, "echo", grpc=False) as exposure,
        httpx.AsyncClient(base_url=exposure.url, timeout=STEP) as http,
    ):
        for target in (url, "http://169.254.169.254/latest/meta-data/", "http://localhost:1/x"):
            response = await http.post("/", json=with_push("push me", target, "t"), headers=V1)
            assert response.status_code == 200
            error = response.json()["error"]
            assert error["code"] == -32602
            assert "push notification URL" in error["message"]
    assert received == []


async def test_an_allowed_host_gets_each_push_with_its_token() -> None:
    endpoint = echo_endpoint(
        capabilities={"pushNotifications": True}, push={"allowed_hosts": ["127.0.0.1"]}
    )
    async with (
        receiver() as (url, received, done),
        serve(ECHO, {"echo": endpoint}, "echo", grpc=False) as exposure,
        httpx.AsyncClient(base_url=exposure.url, timeout=STEP) as http,
    ):
        token = "push-token-7f3a"
        response = await http.post("/", json=with_push("push me", url, token), headers=V1)
        assert "result" in response.json(), response.text
        async with asyncio.timeout(STEP):
            await done.wait()
    assert received
    assert all(headers.get("x-a2a-notification-token") == token for headers, _ in received)


def test_serve_public_push_urls_only_overrides_the_model(tmp_path: Path) -> None:
    endpoint = echo_endpoint(capabilities={"pushNotifications": True}, push={"allow_private": True})
    document = app_document(ECHO, {"echo": endpoint})
    hook = "http://127.0.0.1:9/hook"
    with serve_process(document, "echo", tmp_path, "--no-control", "--public-push-urls-only") as p:
        url = p.ready.split("A2A ", 1)[1].split(" ", 1)[0]
        strict = httpx.post(url, json=with_push("x", hook, "t"), headers=V1, timeout=STEP)
    assert strict.json()["error"]["code"] == -32602
    (tmp_path / "lax").mkdir()
    with serve_process(document, "echo", tmp_path / "lax", "--no-control") as p:
        url = p.ready.split("A2A ", 1)[1].split(" ", 1)[0]
        lax = httpx.post(url, json=with_push("x", hook, "t"), headers=V1, timeout=STEP)
    assert "result" in lax.json(), lax.text  # the model's allow_private: true holds

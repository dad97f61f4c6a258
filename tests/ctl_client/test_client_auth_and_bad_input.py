"""Credentials and bad input: a bearer token from a file or the environment, a header, a 401
that names the options to use, secrets absent from every output even with ``-vv``, and each
bad TARGET, card, transport or task id as one line with a non-zero exit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from ctl_client_support import API_KEY, TOKEN, TRANSPORTS, OurAgent, run
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from tests.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def one_error_line(err: str) -> str:
    """The stderr of a failed command: exactly one ``error:`` line, no traceback."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_without_credentials_a_401_names_the_options(
    tmp_path: Path, guarded_desk: OurAgent, transport: str
) -> None:
    code, out, err = await run(
        tmp_path, "ask", guarded_desk.url, "-m", "hello", "--transport", transport
    )
    assert code == 1 and out == ""
    line = one_error_line(err)
    refusal = "gRPC UNAUTHENTICATED" if transport == "grpc" else "HTTP 401"
    assert f"{guarded_desk.url} refused SendMessage ({refusal})" in line
    assert "its card asks for API key in header 'X-API-Key' (apiKey), Bearer (bearer)" in line
    assert "no credentials given: use --token-file PATH (bearer), -H 'Name: value'" in line


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_token_file_or_a_header_is_accepted_and_never_shown(
    tmp_path: Path, guarded_desk: OurAgent, transport: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    url = guarded_desk.url
    common = ("--transport", transport, "-vv")
    code, out, err = await run(
        tmp_path, "ask", url, "-m", "ask helper tea", "--token-file", str(token_file), *common
    )
    assert code == 0, err
    assert out == "helper said: helper did: tea\n"
    assert TOKEN not in out + err and "DEBUG" in err  # -vv logged, the token not

    code, out, err = await run(
        tmp_path, "ask", url, "-m", "hi", "-H", f"X-API-Key: {API_KEY}", *common
    )
    assert code == 0, err
    assert out == "heard: hi\n"
    assert API_KEY not in out + err

    code, out, err = await run(
        tmp_path, "tasks", url, "--transport", transport, env={"MAS_CTL_TOKEN": TOKEN}
    )
    assert code == 0, err
    assert "completed" in out

    code, out, err = await run(tmp_path, "ask", url, "-m", "hi", "-H", "X-API-Key: wrong", *common)
    assert code == 1
    assert "the credentials given were refused" in err and "wrong" not in err
    assert API_KEY not in out + err


async def test_bad_credential_options_are_one_line_without_their_value(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"
    code, _, err = await run(tmp_path, "ask", url, "-m", "x", "-H", TOKEN)
    assert code == 2
    assert one_error_line(err) == "error: -H #1 has no ':'; accepted: -H 'Name: value'"
    assert TOKEN not in err

    missing = tmp_path / "absent"
    code, _, err = await run(tmp_path, "ask", url, "-m", "x", "--token-file", str(missing))
    assert code == 2
    assert one_error_line(err) == (
        f"error: --token-file: cannot read {missing} (No such file or directory); "
        "accepted: a file holding the token"
    )

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    both = ("--token-file", str(token_file), "-H", f"Authorization: Bearer {TOKEN}")
    code, _, err = await run(tmp_path, "ask", url, "-m", "x", *both)
    assert code == 2
    assert "both set the Authorization header; give one of them" in one_error_line(err)
    assert TOKEN not in err


@contextlib.asynccontextmanager
async def not_an_agent() -> AsyncIterator[str]:
    """A web server whose card path answers HTML, and whose /json path a card without
    any transport mas-ctl speaks."""

    async def html(_: object) -> PlainTextResponse:
        return PlainTextResponse("<html>hello</html>", media_type="text/html")

    async def card(_: object) -> JSONResponse:
        return JSONResponse(
            {
                "name": "odd",
                "description": "speaks only a binding of its own",
                "version": "1",
                "supportedInterfaces": [
                    {"url": "http://127.0.0.1:1/x", "protocolBinding": "CARRIER-PIGEON"}
                ],
                "capabilities": {},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [],
            }
        )

    async def forbidden(_: object) -> PlainTextResponse:
        return PlainTextResponse("no", status_code=403)

    routes = [
        Route("/.well-known/agent-card.json", html),
        Route("/closed/.well-known/agent-card.json", forbidden),
        Route("/odd/.well-known/agent-card.json", card),
    ]
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="error")
    )
    serving = asyncio.create_task(server.serve(), name="not-an-agent")
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if serving.done():
                    serving.result()
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)


async def test_bad_targets_cards_transports_and_task_ids(tmp_path: Path, desk: OurAgent) -> None:
    accepted = "accepted: a URL (http://host:port[/path] or https://...) or APP/AGENT"
    code, _, err = await run(tmp_path, "ask", "localhost:8080", "-m", "x")
    assert code == 2
    assert one_error_line(err) == (
        f"error: TARGET 'localhost:8080' is neither a URL nor APP/AGENT; {accepted}"
    )
    code, _, err = await run(tmp_path, "card", "ftp://host/agent")
    assert code == 2
    assert (
        one_error_line(err)
        == f"error: TARGET 'ftp://host/agent': scheme 'ftp' is not served; {accepted}"
    )

    closed = f"http://127.0.0.1:{free_port()}"
    code, _, err = await run(tmp_path, "ask", closed, "-m", "x")
    assert code == 1
    assert one_error_line(err).startswith(f"error: cannot reach {closed} (the AgentCard request): ")
    assert err.rstrip().endswith("check the TARGET URL and that the agent is running")

    async with not_an_agent() as url:
        code, _, err = await run(tmp_path, "card", url)
        assert code == 1
        assert one_error_line(err) == (
            f"error: {url}/.well-known/agent-card.json is not JSON (text/html; charset=utf-8); "
            "TARGET must be an A2A agent's base URL"
        )
        code, _, err = await run(tmp_path, "ask", f"{url}/odd", "-m", "x")
        assert code == 1
        assert one_error_line(err) == (
            f"error: the AgentCard of {url}/odd offers CARRIER-PIGEON; mas-ctl speaks JSONRPC, "
            "HTTP+JSON and GRPC"
        )
        code, _, err = await run(tmp_path, "card", f"{url}/closed")
        assert code == 1
        assert one_error_line(err) == (
            f"error: {url}/closed/.well-known/agent-card.json answered HTTP 403; the card is "
            "normally public: present a credential with --token-file PATH, -H 'Name: value' or "
            "$MAS_CTL_TOKEN"
        )
        code, _, err = await run(tmp_path, "card", f"{url}/odd", "--transport", "grpc")
        assert code == 1
        assert one_error_line(err) == (
            f"error: the AgentCard of {url}/odd offers CARRIER-PIGEON, not GRPC "
            "(--transport grpc); use another agent"
        )

    code, _, err = await run(tmp_path, "task", desk.url, "no-such-task", "--transport", "rest")
    assert code == 1
    assert one_error_line(err) == (
        f"error: {desk.url} knows no task 'no-such-task'; its tasks: mas-ctl tasks TARGET"
    )

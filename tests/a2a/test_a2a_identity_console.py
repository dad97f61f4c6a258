"""The console calls agents with its own identity: a real agent that checks identities (a
real a2a-sdk server on loopback) admits the console's calls when it admits the console, as
the operator makes every agent do (``MAS_A2A_CONSOLE``), and refuses them otherwise; the
console re-reads its token file when it is rotated, and on a laptop sends no token.

The tokens are signed by keys the test generates (tests/token_issuer.py), as in
test_a2a_identity_inbound.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a_support import Served, free_port, serve_agent
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from test_a2a_identity_inbound import CONCIERGE, STRANGER, signed
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from library_ioa.serving.listeners import HttpListener
from mas.console.agents import IDENTITY_REFUSED, AgentCalls
from mas.ctl.client.errors import AuthRefused
from mas.ctl.commands.console import _identity
from mas.infra import identity
from mas.infra.identity import Admission, AdmittedCaller
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.token_file import TokenFile
from mas.runtime.identity.verification import TokenVerifier

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CONSOLE = "system:serviceaccount:mas-system:mas-operator-console"


@contextlib.asynccontextmanager
async def agent(
    issuer: Issuer, *admitted: AdmittedCaller, grpc_on: bool = False
) -> AsyncIterator[Served]:
    """A scripted agent that checks identities and admits ``admitted``."""
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CallerCheck(Admission("scripted", admitted), verifier)
    async with serve_agent(grpc_on=grpc_on, caller_check=check) as served:
        yield served


@contextlib.asynccontextmanager
async def card_offering(url: str, binding: str) -> AsyncIterator[str]:
    """The url of a card front that advertises only the agent's ``binding`` interface."""
    async with httpx.AsyncClient() as http:
        real = (await http.get(f"{url}{AGENT_CARD_WELL_KNOWN_PATH}")).json()
    card = ParseDict(real, AgentCard(), ignore_unknown_fields=True)
    kept = [i for i in card.supported_interfaces if i.protocol_binding == binding]
    assert kept, f"the agent offers no {binding}"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)

    async def card_route(_: Request) -> Response:
        return JSONResponse(MessageToDict(card))

    front = HttpListener(
        Starlette(routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, card_route)]), "127.0.0.1", free_port()
    )
    await front.start()
    try:
        yield f"http://127.0.0.1:{front.port}"
    finally:
        await front.aclose()


def rotate(path: Path, token: str) -> None:
    """Write the token as the kubelet does: a new file swapped in."""
    fresh = path.with_name(f".{uuid.uuid4().hex}")
    fresh.write_text(token)
    os.replace(fresh, path)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_an_agent_that_admits_the_console_answers_every_call_it_makes(
    tmp_path: Path, binding: str
) -> None:
    issuer = Issuer()
    volume = tmp_path / "token"
    rotate(volume, signed(issuer, CONSOLE))
    calls = AgentCalls(identity=TokenFile(volume, check_interval=0))
    console_rule = AdmittedCaller(CONSOLE, identity.CONSOLE_SOURCE)
    refusal = "gRPC PERMISSION_DENIED" if binding == "GRPC" else "HTTP 403"
    async with (
        agent(
            issuer,
            AdmittedCaller(CONCIERGE, "delegates_to of concierge"),
            console_rule,
            grpc_on=binding == "GRPC",
        ) as served,
        card_offering(served.url, binding) as url,
    ):
        read = await calls.card(url)
        events = [e async for e in calls.turn(url, "echo hello from the console", "c1")]
        tasks = await calls.tasks(url, "c1")
        task = await calls.task(url, tasks[0].id)
        canceled = await calls.cancel(url, "c1", task.id)
        # the kubelet rotates the token to another identity: the next call sends it
        rotate(volume, signed(issuer, STRANGER))
        with pytest.raises(AuthRefused, match=rf"refused ListTasks \({refusal}\)"):
            await calls.tasks(url)
        rotate(volume, signed(issuer, CONSOLE))
        assert [t.id for t in await calls.tasks(url, "c1")] == [task.id]
        await calls.aclose()
    assert read.card.name and read.interface == binding
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "context" and "text" in kinds, events
    assert events[-1] == {
        "kind": "ended",
        "status": "completed",
        "text": "echo hello from the console",
    }
    assert task.context_id == "c1" and len(tasks) == 1
    assert canceled and canceled[0]["task_id"] == task.id
    # the console is the caller the agent saw: the conversation is the console's
    assert [t.session_id for t in served.runner.seen] == [f"{CONSOLE}/c1"]


async def test_an_agent_that_does_not_admit_the_console_refuses_it(tmp_path: Path) -> None:
    issuer = Issuer()
    volume = tmp_path / "token"
    rotate(volume, signed(issuer, CONSOLE))
    calls = AgentCalls(identity=TokenFile(volume, check_interval=0))
    laptop = AgentCalls()  # mas-ctl console -f: no token of its own
    async with agent(issuer, AdmittedCaller(CONCIERGE, "delegates_to of concierge")) as served:
        with pytest.raises(AuthRefused, match=r"refused ListTasks \(HTTP 403\)") as refused:
            await calls.tasks(served.url)
        events = [e async for e in calls.turn(served.url, "quick refused", "c2")]
        with pytest.raises(AuthRefused, match=r"refused ListTasks \(HTTP 401\)"):
            await laptop.tasks(served.url)
        await calls.aclose()
    assert events[-1]["kind"] == "error" and "HTTP 403" in events[-1]["message"], events
    # what the page says names what to change, not mas-ctl's options
    assert str(refused.value).endswith(IDENTITY_REFUSED)
    assert "--token-file" not in events[-1]["message"]
    assert served.runner.seen == []


def test_only_the_cluster_console_reads_a_token_file(monkeypatch: pytest.MonkeyPatch) -> None:
    laptop = argparse.Namespace(cluster=False, file="app.yaml")
    cluster = argparse.Namespace(cluster=True, file=None)
    monkeypatch.delenv(identity.TOKEN_FILE_ENV, raising=False)
    assert _identity(laptop) is None
    assert _identity(cluster).path == Path(identity.TOKEN_PATH)
    monkeypatch.setenv(identity.TOKEN_FILE_ENV, "/elsewhere/token")
    assert _identity(laptop) is None
    assert _identity(cluster).path == Path("/elsewhere/token")

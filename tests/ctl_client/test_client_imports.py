"""``mas-ctl ask`` loads what the transport its TARGET's card leads to needs, and no more:
never gRPC (nor the SDK's 0.3 gRPC transport) against a JSON-RPC or HTTP+JSON agent, gRPC
for a card that offers only gRPC, never httpx's command line
(``library_ioa.plugins.a2a.sdk_extras.load_client``; docs/performance.md, ``mas-ctl ask``
to first token). Each case runs the command in a fresh interpreter and reads its
``sys.modules`` once the command has returned."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ctl_client_support import environment
from sdk_agent import sdk_agent
from tests.deadlines import COLD_START

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# argv[1]: the modules watched (JSON); the rest: mas-ctl's command line.
PROBE = """
import contextlib, io, json, sys
from mas.ctl.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[2:])
loaded = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
print(json.dumps({"code": code, "out": out.getvalue(), "loaded": loaded}))
"""

GRPC = ["grpc", "a2a.compat.v0_3.grpc_transport", "a2a.client.transports.grpc"]
CLI = ["httpx._main", "rich", "click", "pygments"]


async def probe(workdir: Path, *argv: str) -> dict[str, Any]:
    """Run ``mas-ctl ARGV`` in a fresh interpreter: its exit code, stdout and which of the
    watched modules it loaded."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE,
        json.dumps([*GRPC, *CLI, "a2a.client"]),
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(workdir),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), COLD_START)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode(errors="replace")
    result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return result


@pytest.mark.parametrize("transport", [None, "rest"], ids=["card-order", "rest"])
async def test_ask_over_http_never_loads_grpc_or_httpx_command_line(
    tmp_path: Path, transport: str | None
) -> None:
    forced = ("--transport", transport) if transport else ()
    async with sdk_agent(streaming=True) as agent:  # its card lists JSON-RPC first, then gRPC
        result = await probe(tmp_path, "ask", agent.url, "-m", "hi", *forced)
    assert result["code"] == 0
    assert result["out"] == "echo: hi\n"
    assert result["loaded"] == ["a2a.client"]


async def test_a_grpc_only_card_loads_grpc_and_answers(tmp_path: Path) -> None:
    async with sdk_agent(streaming=True, bindings=("GRPC",)) as agent:
        result = await probe(tmp_path, "ask", agent.url, "-m", "hi")
        card = await probe(tmp_path, "card", agent.url, "-o", "json")
    assert result["code"] == 0
    assert result["out"] == "echo: hi\n"
    assert result["loaded"] == sorted(["a2a.client", *GRPC])
    assert card["code"] == 0
    bindings = [i["protocolBinding"] for i in json.loads(card["out"])["supportedInterfaces"]]
    assert bindings == ["GRPC"]


# In a fresh interpreter: load_client(grpc=...) for each argument in turn.
LOADS = """
import json, sys
from library_ioa.plugins.a2a.sdk_extras import load_client
steps = [[load_client(grpc=arg == "grpc"), "grpc" in sys.modules] for arg in sys.argv[1:]]
print(json.dumps(steps))
"""


@pytest.mark.parametrize(
    ("args", "steps"),
    [
        (["grpc"], [[True, True]]),
        (["http"], [[False, False]]),
        # the first load decides for the process: the SDK keeps its placeholders
        (["http", "grpc"], [[False, False], [False, False]]),
    ],
    ids=["grpc", "http", "http-then-grpc"],
)
def test_load_client_and_the_sdk_behaviour_it_relies_on(
    args: list[str], steps: list[list[bool]]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADS, *args],
        capture_output=True,
        text=True,
        timeout=COLD_START,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == steps

"""Peers built on other A2A implementations, each served from its own virtualenv.

``scripts/build-interop`` makes one venv per directory under ``peers/`` (its pinned
``requirements.txt`` beside its ``peer.py``, copied into the venv once installed) and
prints the directory holding them; the tests find it through ``MAS_INTEROP_DIR``. Without
it, or with a venv built from other pins, they skip with the build command, and fail
instead when ``MAS_REQUIRE_INTEROP=1`` (CI). A peer is a real server process on
a loopback port, waited for by polling its agent card under a deadline, killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.deadlines import COLD_START
from tests.ports import free_port

PEERS = Path(__file__).resolve().parent / "peers"
DIR_ENV = "MAS_INTEROP_DIR"
REQUIRE_ENV = "MAS_REQUIRE_INTEROP"
CARD_PATH = "/.well-known/agent-card.json"
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Peer:
    """One peer: its directory under ``peers/``, and what it says back."""

    name: str
    heard: str  # it answers "<heard> <the text it was sent>"
    artifact: str  # the name of the artifact its answer lands in
    protocol_version: str  # what its agent card announces


FASTA2A = Peer("fasta2a_pydantic_ai", "pydantic-ai heard:", "result", "1.0")
STRANDS = Peer("strands_agents", "strands heard:", "agent_response", "0.3.0")
A2A_SDK_0_3 = Peer("a2a_sdk_0_3", "a2a-sdk 0.3 heard:", "a2a-sdk-0.3 answer", "0.3.0")
ALL = (FASTA2A, STRANDS, A2A_SDK_0_3)


def _fail_or_skip(why: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}", pytrace=False)
    pytest.skip(why)


def peer_python(peer: Peer) -> Path:
    """The interpreter of ``peer``'s venv; skip (or, with ``MAS_REQUIRE_INTEROP=1``, fail)
    when the venvs are not built."""
    build = f'build them with: export {DIR_ENV}="$(scripts/build-interop | tail -n 1)"'
    root = os.environ.get(DIR_ENV)
    if not root:
        _fail_or_skip(f"{DIR_ENV} is not set, so there are no interop peer venvs; {build}")
    venv = Path(str(root)) / peer.name
    python = venv / "bin" / "python"
    if not os.access(python, os.X_OK):
        _fail_or_skip(f"no venv for the interop peer {peer.name} in {root}; {build}")
    pins = PEERS / peer.name / "requirements.txt"
    built_from = venv / "requirements.txt"
    if not built_from.is_file() or built_from.read_text() != pins.read_text():
        _fail_or_skip(f"the venv {venv} was not built from {pins} as it is now; {build}")
    return python


@dataclass
class Served:
    """A running peer: its base URL and where its output goes."""

    peer: Peer
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        """What the peer process printed."""
        return self.log.read_text(errors="replace")


def _card_answers(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(url + CARD_PATH).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def serve_peer(peer: Peer, workdir: Path) -> Iterator[Served]:
    """``peer`` serving on a free loopback port until the block ends."""
    python = peer_python(peer)
    port = free_port()
    log = workdir / f"{peer.name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(python), str(PEERS / peer.name / "peer.py"), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    served = Served(peer, f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + COLD_START
        with httpx.Client(timeout=5.0) as http:
            while not _card_answers(http, served.url):
                if process.poll() is not None:
                    raise AssertionError(
                        f"{peer.name} exited {process.returncode}:\n{served.output()}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{peer.name} served no agent card within {COLD_START}s:\n{served.output()}"
                    )
                time.sleep(POLL_SECONDS)
        yield served
    finally:
        process.kill()
        process.wait()

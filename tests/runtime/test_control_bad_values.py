"""Request values the control endpoint once met with a traceback (issue 23, item 10): each
gets an error reply naming what is wrong, nothing is steered, and the server keeps serving."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tests.control_lines import exchange

from mas.ctl.session.control import ControlServer
from mas.runtime.boundary.control import ControlContract, SteerMode, SteerReceipt

pytestmark = [pytest.mark.timeout(30), pytest.mark.integration]


class Recorder(ControlContract):
    """Records what reached it; the server under test is real."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def steer(self, session_id: str, text: str, mode: SteerMode) -> SteerReceipt:
        self.calls.append(("steer", session_id))
        raise AssertionError("a refused request must not steer")

    async def cancel_inflight(self, session_id: str) -> bool:
        self.calls.append(("cancel", session_id))
        return False


@pytest.fixture
def no_traceback(caplog: pytest.LogCaptureFixture) -> object:
    caplog.set_level(logging.DEBUG)
    yield None
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not tracebacks, [f"{r.name}: {r.getMessage()}" for r in tracebacks]


@pytest.mark.usefixtures("no_traceback")
@pytest.mark.parametrize(
    "token",
    ["ключ", "🔑" * 40, "\udcff", "é"],
    ids=["cyrillic", "emoji", "lone-surrogate", "latin-1"],
)
async def test_a_non_ascii_token_is_an_invalid_token(control_dir: Path, token: str) -> None:
    recorder = Recorder()
    async with ControlServer({"agent": recorder}) as server:
        request = {"op": "cancel", "agent": "agent", "session": "s", "token": token}
        line = json.dumps(request).encode() + b"\n"  # ensure_ascii: \\u escapes
        raw_utf8 = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        for sent in (line, raw_utf8 + b"\n"):
            first, hung_up = await exchange(server.address, sent, sent)
            assert json.loads(first) == {"ok": False, "error": "invalid or missing token"}
            assert hung_up == b""  # as for any wrong token
        assert recorder.calls == []
        good = {**request, "token": server.token}
        [ok] = await exchange(server.address, json.dumps(good).encode() + b"\n")
        assert json.loads(ok) == {"ok": True, "canceled": False}


@pytest.mark.usefixtures("no_traceback")
@pytest.mark.parametrize(
    ("timeout", "words"),
    [
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("1e999", "1e999 overflows a float"),
        ("1" + "0" * 400, "timeout " + "1" + "0" * 23 + "... is not accepted"),
        ("9" * 5000, "a number that cannot be read"),
        ("0", "timeout 0 is not accepted; a finite number of seconds above 0"),
        ("-3", "timeout -3 is not accepted"),
        ("true", "timeout True is not accepted"),
        ('"5"', "timeout '5' is not accepted"),
        ("[5]", "timeout [5] is not accepted"),
    ],
)
async def test_a_bad_follow_timeout_is_an_error_reply_before_anything_is_steered(
    control_dir: Path, timeout: str, words: str
) -> None:
    recorder = Recorder()
    async with ControlServer({"agent": recorder}) as server:
        fields = {"op": "steer", "agent": "agent", "session": "s", "text": "x", "mode": "wait"}
        body = json.dumps({**fields, "follow": True, "token": server.token})
        line = body[:-1].encode() + b', "timeout": ' + timeout.encode() + b"}\n"
        reply, again = await exchange(server.address, line, line)  # the connection stays open
        for answer in (reply, again):
            refused = json.loads(answer)
            assert refused["ok"] is False
            assert words in refused["error"], refused
        assert recorder.calls == []
        ping = json.dumps({"op": "ping", "token": server.token}).encode() + b"\n"
        [pong] = await exchange(server.address, ping)
        assert json.loads(pong)["ok"] is True


STEER_FOLLOW_YES = (
    b'{"op": "steer", "agent": "agent", "session": "s", "text": "x", "mode": "wait", '
    b'"follow": "yes", "token": "TOKEN"}'
)


@pytest.mark.usefixtures("no_traceback")
@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
        (b'{"op": "ping", "token": NaN}', "NaN is not a JSON number"),
        (STEER_FOLLOW_YES, "follow 'yes' is not accepted; true or false"),
    ],
    ids=["deep", "nan-token", "follow-string"],
)
async def test_other_bad_values_get_an_error_reply(
    control_dir: Path, line: bytes, words: str
) -> None:
    recorder = Recorder()
    async with ControlServer({"agent": recorder}) as server:
        line = line.replace(b"TOKEN", server.token.encode())
        [reply] = await exchange(server.address, line + b"\n")
        assert json.loads(reply)["ok"] is False
        assert words in json.loads(reply)["error"]
        assert recorder.calls == []

"""Property: whatever a client sends over JSON-RPC or HTTP+JSON, no 5xx and no traceback.

A real ``mas-ctl -vv serve`` process (the echo agent) takes generated requests: envelopes
with every kind of ``jsonrpc``/``id``/``method``/``params``, raw bytes, odd content types and
version headers, and HTTP+JSON paths with generated ids and bodies. Bounded: 200 examples
per transport, no shrinking-time surprises (``deadline=None`` but a per-request timeout).
Afterwards the server log holds no traceback and a good request is still answered.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.ports import free_port
from tests.security.served_process import ServedProcess, app_document, serve_process

pytestmark = [pytest.mark.timeout(150), pytest.mark.integration]

EXAMPLES = 200
METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/set",
    "agent/getAuthenticatedExtendedCard",
]
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
    database=None,
)

ascii_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),  # NaN and the infinities too: json.dumps writes them as NaN/Infinity
    st.text(max_size=20),
    st.sampled_from(["ROLE_USER", "ROLE_AGENT", "TASK_STATE_WORKING", "", "text", "x" * 200]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=15,
)
parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"text": st.text(max_size=30)}),
        st.fixed_dictionaries({"data": json_values}),
        st.fixed_dictionaries({"url": ascii_text, "mediaType": ascii_text}),
        st.dictionaries(st.sampled_from(["text", "raw", "url", "data", "metadata"]), json_values),
    ),
    max_size=3,
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", 3, None]), "parts": parts},
    optional={
        "messageId": st.one_of(st.uuids().map(str), ascii_text, st.integers()),
        "contextId": st.one_of(ascii_text, st.none()),
        "taskId": st.one_of(ascii_text, st.none()),
        "metadata": json_values,
    },
)
params = st.one_of(
    st.fixed_dictionaries({"message": messages}, optional={"configuration": json_values}),
    st.fixed_dictionaries({"id": ascii_text}, optional={"historyLength": st.integers(-5, 2**40)}),
    st.dictionaries(st.text(max_size=10), json_values, max_size=4),
    json_values,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2, None]),
        "id": st.one_of(
            st.integers(), ascii_text, st.none(), st.booleans(), st.floats(), json_values
        ),
        "method": st.one_of(st.sampled_from(METHODS), st.text(max_size=15), json_values),
        "params": params,
    },
)
bodies = st.one_of(
    envelopes.map(lambda e: json.dumps(e).encode()),
    envelopes.map(lambda e: json.dumps(e).encode()),
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"[]", b"[{}]", b"null", b"\xff\xfe", b"[" * 5000]),
)
versions = st.sampled_from([None, "1.0", "1.0", "0.3", "99.0", "", "abc", "1", "1.0.7"])
content_types = st.sampled_from(
    [None, "application/json", "application/json", "text/plain", "application/a2a+json", "x/y"]
)


def headers_of(version: str | None, content_type: str | None) -> dict[str, str]:
    out = {}
    if version is not None:
        out["A2A-Version"] = version
    if content_type is not None:
        out["Content-Type"] = content_type
    return out


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text
    assert 'File "' not in response.text


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProcess]:
    port = free_port()
    endpoint = {
        "url": f"http://127.0.0.1:{port}",
        "usage": "deploy",
        "a2a": {"max_body_bytes": 64 * 1024},
    }
    document = app_document({"echo": {"model": {"type": "echo"}}}, {"echo": endpoint})
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    with serve_process(document, "echo", tmp, "--no-control") as served:
        yield served


def base_url(served: ServedProcess) -> str:
    return served.ready.split("A2A ", 1)[1].split(" ", 1)[0]


def assert_healthy_afterwards(served: ServedProcess, client: httpx.Client) -> None:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "alive?"}]}
    good = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = client.post(base_url(served), json=good, headers={"A2A-Version": "1.0"})
    assert response.status_code == 200 and "alive?" in response.text, response.text
    assert served.process.poll() is None
    log = served.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:4000]
    assert "internal error" not in log.lower()
    assert "-32603" not in log


def test_json_rpc_fuzz(fuzzed: ServedProcess) -> None:
    with httpx.Client(base_url=base_url(fuzzed), timeout=15) as client:

        @FUZZ
        @given(body=bodies, version=versions, content_type=content_types)
        def one(body: bytes, version: str | None, content_type: str | None) -> None:
            check(client.post("/", content=body, headers=headers_of(version, content_type)))

        one()
        assert_healthy_afterwards(fuzzed, client)


ids = st.one_of(
    st.uuids().map(str),
    st.text(
        st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/?#%"),
        min_size=1,
        max_size=12,
    ),
)
rest_paths = st.one_of(
    st.sampled_from(["/message:send", "/message:stream", "/tasks", "/extendedAgentCard", "/card"]),
    ids.map(lambda i: f"/tasks/{i}"),
    ids.map(lambda i: f"/tasks/{i}:cancel"),
    ids.map(lambda i: f"/tasks/{i}:subscribe"),
    ids.map(lambda i: f"/tasks/{i}/pushNotificationConfigs"),
    st.tuples(ids, ids).map(lambda t: f"/tasks/{t[0]}/pushNotificationConfigs/{t[1]}"),
    st.sampled_from(["/v1/message:send", "/v1/tasks", "/v1/card", "/nowhere", ""]),
    ids.map(lambda i: f"/{i}/message:send"),
)


def test_http_json_fuzz(fuzzed: ServedProcess) -> None:
    with httpx.Client(base_url=base_url(fuzzed) + "/a2a/rest", timeout=15) as client:

        @FUZZ
        @given(
            method=st.sampled_from(["GET", "POST", "POST", "DELETE", "PUT"]),
            path=rest_paths,
            body=st.one_of(
                st.fixed_dictionaries({"message": messages}).map(lambda b: json.dumps(b).encode()),
                params.map(lambda p: json.dumps(p).encode()),
                bodies,
            ),
            version=st.sampled_from(["1.0", "1.0", "1.0", None, "0.3", "99.0"]),
            content_type=st.sampled_from(["application/json"] * 4 + [None, "text/plain"]),
            query=st.dictionaries(
                st.sampled_from(["historyLength", "pageSize", "contextId", "status", "x"]),
                ascii_text,
                max_size=2,
            ),
        )
        def one(
            *,
            method: str,
            path: str,
            body: bytes,
            version: str | None,
            content_type: str | None,
            query: dict[str, Any],
        ) -> None:
            content = body if method in ("POST", "PUT") else None
            response = client.request(
                method,
                path,
                content=content,
                params=query,
                headers=headers_of(version, content_type),
            )
            check(response)

        one()
        assert_healthy_afterwards(fuzzed, client)

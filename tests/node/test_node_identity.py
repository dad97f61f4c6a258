"""Workload identity on the node: real kubelet-projected tokens, checked by the researcher's
pod against the API server's own issuer.

Requests are sent from inside the concierge's pod (the image's Python), to the
researcher's Service, as JSON-RPC and HTTP+JSON: with the concierge's own projected token
(its declared delegator: admitted), with none (401), and with a token the API server's
TokenRequest API issued for another ServiceAccount of the namespace (403, naming it and
saying what the researcher admits). No NetworkPolicy enforcer runs here: the check alone
refuses.
"""

from __future__ import annotations

import json

import pytest

from mas.infra import identity

from .agency import NS, Desk, exec_python

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

# Inside a pod: one request to the researcher, its status and error printed as JSON.
SEND = """
import json, sys, urllib.request, urllib.error
url, binding, token_path = sys.argv[1], sys.argv[2], sys.argv[3]
message = {"role": "ROLE_USER", "messageId": "node-" + binding, "parts": [{"text": "who"}]}
if binding == "JSONRPC":
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
else:
    url, body = url + "/a2a/rest/message:send", {"message": message}
headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
if token_path != "-":
    headers["maslab-identity"] = open(token_path).read().strip()
request = urllib.request.Request(url, json.dumps(body).encode(), headers)
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        print(json.dumps({"status": answer.status, "error": json.load(answer).get("error")}))
except urllib.error.HTTPError as exc:
    print(json.dumps({"status": exc.code, "error": json.load(exc).get("error")}))
"""


def send(desk: Desk, binding: str, token_path: str) -> dict[str, object]:
    service = desk.core.read_namespaced_service(f"{desk.name}-researcher", NS)
    url = f"http://{service.spec.cluster_ip}:8402"
    answer: dict[str, object] = json.loads(
        exec_python(desk, "concierge", SEND, url, binding, token_path)
    )
    return answer


@pytest.fixture(scope="module")
def stranger_token(desk: Desk) -> str:
    """A token for our audience issued by the API server for another ServiceAccount of the
    namespace, written into the concierge's /tmp (the pod reads it as it reads its own)."""
    desk.core.create_namespaced_service_account(NS, {"metadata": {"name": "stranger"}})
    spec = {"audiences": [identity.AUDIENCE], "expirationSeconds": identity.TOKEN_EXPIRY_SECONDS}
    answer = desk.core.create_namespaced_service_account_token("stranger", NS, {"spec": spec})
    token = str(answer.status.token)
    write = "import sys; open('/tmp/stranger', 'w').write(sys.argv[1])"
    exec_python(desk, "concierge", write, token)
    return token


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_delegator_is_admitted_a_stranger_refused_403_and_no_token_401(
    desk: Desk, stranger_token: str, binding: str
) -> None:
    admitted = send(desk, binding, identity.TOKEN_PATH)
    assert admitted == {"status": 200, "error": None}, admitted

    missing = send(desk, binding, "-")
    assert missing["status"] == 401, missing

    refused = send(desk, binding, "/tmp/stranger")
    assert refused["status"] == 403, refused
    error = refused["error"]
    assert isinstance(error, dict)
    stranger = identity.subject(NS, "stranger")
    assert f"caller {stranger} is not admitted by agent 'researcher'" in str(error["message"])
    concierge = identity.subject(NS, f"{desk.name}-concierge")
    assert f"{concierge} (delegates_to of concierge)" in str(error["message"])
    assert stranger_token not in json.dumps(refused)

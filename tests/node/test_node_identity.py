"""Workload identity on the node: real kubelet-projected tokens, checked by the researcher's
pod against the API server's own issuer.

Requests are sent from inside the concierge's pod (the image's Python), to the
researcher's Service, as JSON-RPC and HTTP+JSON: with the concierge's own projected token
(its declared delegator: admitted), with none (401), and with a token the API server's
TokenRequest API issued for another ServiceAccount of the namespace (403, naming it and
saying what the researcher admits). No NetworkPolicy enforcer runs here: the check alone
refuses. The first refusal of each caller is one CallerDenied Warning Event on the
Application (what ``kubectl describe application`` lists), posted by the researcher's pod
with its own API token through the Application's events Role the operator binds it to.
"""

from __future__ import annotations

import json

import pytest

from mas.infra import identity

from .agency import NS, Desk, exec_python
from .support import eventually

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


def caller_denied(desk: Desk) -> dict[tuple[str, str], int]:
    """The CallerDenied Events on the Application, as kubectl describe finds them (by the
    object's kind, name and uid): how many per refused caller and reporting pod."""
    uid = desk.app()["metadata"]["uid"]
    selector = (
        f"involvedObject.kind=Application,involvedObject.name={desk.name},involvedObject.uid={uid}"
    )
    found: dict[tuple[str, str], int] = {}
    for event in desk.core.list_namespaced_event(NS, field_selector=selector).items:
        if event.reason == "CallerDenied" and "refused caller " in event.message:
            caller = event.message.split("refused caller ")[1].split(" ")[0]
            key = (caller, str(event.reporting_instance))
            found[key] = found.get(key, 0) + 1
    return found


def test_the_first_refusal_of_each_caller_is_one_warning_event(
    desk: Desk, stranger_token: str
) -> None:
    """Refusals of the stranger and of a tokenless caller, twice each on two bindings: one
    Event per caller from the researcher's pod (a pod replaced by an earlier test reported
    its own first refusals: one each too)."""
    for binding in ("JSONRPC", "HTTP+JSON"):
        for _ in range(2):
            assert send(desk, binding, "/tmp/stranger")["status"] == 403
            assert send(desk, binding, "-")["status"] == 401
    stranger = identity.subject(NS, "stranger")
    pods = {pod.metadata.name for pod in desk.pods("researcher")}

    def reported() -> dict[tuple[str, str], int] | None:
        found = caller_denied(desk)
        ours = {k: n for k, n in found.items() if k[1] in pods and k[0] in {stranger, "unknown"}}
        return found if {k[0] for k in ours} == {stranger, "unknown"} else None

    found = eventually(reported, "a CallerDenied Event for each refused caller", timeout=60)
    assert all(n == 1 for n in found.values()), found

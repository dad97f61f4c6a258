"""The first refusal of a caller is one Warning Event on the Application, on a real API server.

A real agent exposure on loopback checks its callers (tokens signed by keys the test holds,
as in test_a2a_identity_inbound) and posts its denial Events to the envtest API server as a
pod would: ``cluster_denial_events`` with the API server's address in the kubelet's
variables and a token volume holding the CA and an API-audience token of the agent's own
ServiceAccount, which is bound to the Role the operator builds (events create only).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import yaml
from a2a.types import a2a_pb2_grpc
from a2a_support import STEP, Served, eventually, serve_agent
from kubernetes import client as k8s
from test_a2a_identity_inbound import CONCIERGE, STRANGER, V1, grpc_request, rpc_send, signed
from tests.token_issuer import AUDIENCE, ISSUER, Issuer

from mas.infra import identity
from mas.infra.models import Application
from mas.runtime.identity.callers import CallerCheck
from mas.runtime.identity.cluster import cluster_denial_events
from mas.runtime.identity.denial_events import REASON, DenialEvents
from mas.runtime.identity.keys import OidcKeys
from mas.runtime.identity.verification import TokenVerifier
from mas_operator.eventroles import RULES, event_role_name

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(90)]

IDENTITY = identity.IDENTITY_HEADER
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agency.yaml"
UID = "0b7c1f7e-5c8e-4c4e-9d55-6d2f1e0a4a11"


def _application(namespace: str) -> Application:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["metadata"] = {"name": "desk", "namespace": namespace}
    return Application.model_validate(document)


def _token_volume(control_plane: Any, namespace: str, account: str, folder: Path) -> None:
    """As the kubelet projects it: the CA and an API-audience token of ``account``."""
    core = k8s.CoreV1Api(control_plane.api_client())
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    answer = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": identity.TOKEN_EXPIRY_SECONDS}}
    )
    folder.mkdir()
    (folder / identity.CA_FILE).write_bytes(Path(control_plane.ca_path).read_bytes())
    (folder / identity.API_TOKEN_FILE).write_text(str(answer.status.token))


def _bind_events_role(control_plane: Any, namespace: str, account: str) -> None:
    """The Role and RoleBinding the operator builds (mas_operator.eventroles)."""
    rbac = k8s.RbacAuthorizationV1Api(control_plane.api_client())
    name = event_role_name("desk")
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": RULES})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )


def _env(control_plane: Any) -> dict[str, str]:
    host, _, port = control_plane.server_url.removeprefix("https://").rpartition(":")
    return {
        identity.DENIAL_EVENTS_ENV: identity.DENIAL_EVENTS_ON,
        identity.APPLICATION_UID_ENV: UID,
        "KUBERNETES_SERVICE_HOST": host.strip("[]"),
        "KUBERNETES_SERVICE_PORT": port,
    }


@contextlib.asynccontextmanager
async def denying_agent(
    issuer: Issuer, denials: DenialEvents
) -> AsyncIterator[tuple[Served, Callable[[str], str]]]:
    admission = identity.Admission(
        "scripted", (identity.AdmittedCaller(CONCIERGE, "delegates_to of concierge"),)
    )
    verifier = TokenVerifier(ISSUER, AUDIENCE, OidcKeys(ISSUER, fetch=issuer.fetch))
    check = CallerCheck(admission, verifier, denials=denials)
    try:
        async with serve_agent(caller_check=check) as served:
            yield served, lambda subject: signed(issuer, subject)
    finally:
        await denials.aclose()


def _async(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def wrapped() -> bool:
        return check()

    return wrapped


def _failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "was not posted" in r.getMessage()]


def _caller_denied(control_plane: Any, namespace: str) -> list[k8s.CoreV1Event]:
    core = k8s.CoreV1Api(control_plane.api_client())
    # what kubectl describe application desk lists: the Events of that object
    selector = f"involvedObject.kind=Application,involvedObject.name=desk,involvedObject.uid={UID}"
    found = core.list_namespaced_event(namespace, field_selector=selector).items
    return [e for e in found if e.reason == REASON]


async def test_the_first_refusal_of_each_caller_is_one_warning_event(
    control_plane: Any, envtest_namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "a2a"
    _token_volume(control_plane, envtest_namespace, "desk-scripted", folder)
    _bind_events_role(control_plane, envtest_namespace, "desk-scripted")
    app = _application(envtest_namespace)
    denials = cluster_denial_events(_env(control_plane), app, "scripted", folder)
    assert denials is not None
    issuer = Issuer()
    async with denying_agent(issuer, denials) as (served, token):
        async with httpx.AsyncClient(base_url=served.url, timeout=STEP) as http:
            statuses = [
                (
                    await http.post(
                        "/", json=rpc_send(f"quick {n}"), headers={**V1, IDENTITY: token(STRANGER)}
                    )
                ).status_code
                for n in range(3)
            ]
            none = await http.post("/", json=rpc_send("quick none"), headers=V1)
            admitted = await http.post(
                "/", json=rpc_send("quick welcome"), headers={**V1, IDENTITY: token(CONCIERGE)}
            )
        async with grpc.aio.insecure_channel(f"127.0.0.1:{served.exposure.grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                    grpc_request("grpc stranger"),
                    metadata=(("a2a-version", "1.0"), (IDENTITY, token(STRANGER))),
                    timeout=STEP,
                )
        # the refusals are what they were without Events
        assert statuses == [403, 403, 403]
        assert none.status_code == 401
        assert admitted.status_code == 200, admitted.text
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # two callers refused (the stranger four times, an unknown one once): two Events,
        # posted in the order of the first refusals, so a duplicate of the stranger's
        # would be posted before the unknown caller's and seen here
        await eventually(_async(lambda: denials.posted == 2), what="two Events posted")
        events = _caller_denied(control_plane, envtest_namespace)
    assert len(events) == 2, [e.message for e in events]
    by_caller = {e.message.split("refused caller ")[1].split(" ")[0]: e for e in events}
    assert sorted(by_caller) == sorted([STRANGER, "unknown"]), [e.message for e in events]
    stranger = by_caller[STRANGER]
    assert stranger.type == "Warning"
    assert stranger.count == 1
    assert stranger.involved_object.api_version == "infra.maslab.io/v1"
    assert stranger.message.startswith(
        f"agent 'scripted' refused caller {STRANGER} (not_admitted); further refusals"
    )
    assert "is not admitted by agent 'scripted', which admits:" in stranger.message
    assert "(missing)" in by_caller["unknown"].message


async def test_without_the_role_the_refusal_stands_and_the_failure_is_logged_once(
    control_plane: Any,
    envtest_namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An account without the Role (an operator that may not create Roles, say): the API
    server answers 403, the agent logs it once and refuses callers as before."""
    folder = tmp_path / "a2a"
    _token_volume(control_plane, envtest_namespace, "desk-unbound", folder)
    denials = cluster_denial_events(
        _env(control_plane), _application(envtest_namespace), "scripted", folder
    )
    assert denials is not None
    caplog.set_level(logging.DEBUG, logger="mas.runtime.identity.denial_events")
    issuer = Issuer()
    async with denying_agent(issuer, denials) as (served, token):
        async with httpx.AsyncClient(base_url=served.url, timeout=STEP) as http:
            for caller in ("a", "b"):
                subject = f"system:serviceaccount:team-a:{caller}"
                answer = await http.post(
                    "/", json=rpc_send(f"quick {caller}"), headers={**V1, IDENTITY: token(subject)}
                )
                assert answer.status_code == 403
        await eventually(_async(lambda: len(_failures(caplog)) == 2), what="both posts to fail")
    warnings = [r for r in _failures(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "403" in warnings[0].getMessage()
    assert denials.posted == 0
    assert _caller_denied(control_plane, envtest_namespace) == []

"""Tokens from the real API server's TokenRequest API, verified against its own JWKS.

The verifier reads the API server's OIDC discovery document and JWKS through the API server
(its issuer's own host name is the in-cluster one, which a test cannot reach), over HTTPS
trusting the control plane's CA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from tests.envtest.controlplane import SERVICE_ACCOUNT_ISSUER

from mas.infra import identity
from mas.runtime.errors import TokenRejected
from mas.runtime.identity.cluster import cluster_verifier
from mas.runtime.identity.keys import DISCOVERY_PATH, OidcKeys, https_fetch
from mas.runtime.identity.verification import TokenVerifier

pytestmark = [pytest.mark.envtest, pytest.mark.timeout(60)]


def _token(core: k8s.CoreV1Api, ns: str, account: str, audiences: list[str] | None) -> str:
    core.create_namespaced_service_account(ns, {"metadata": {"name": account}})
    spec: dict[str, Any] = {"expirationSeconds": identity.TOKEN_EXPIRY_SECONDS}
    if audiences is not None:
        spec["audiences"] = audiences
    answer = core.create_namespaced_service_account_token(account, ns, {"spec": spec})
    return str(answer.status.token)


@pytest.fixture
def verifier(control_plane: Any, tmp_path: Path) -> TokenVerifier:
    credential = tmp_path / "token"
    credential.write_text(control_plane.admin_token)
    base = control_plane.server_url
    keys = OidcKeys(
        SERVICE_ACCOUNT_ISSUER,
        fetch=https_fetch(ca_file=control_plane.ca_path, token_file=credential),
        discovery_url=base + DISCOVERY_PATH,
        jwks_url=base + "/openid/v1/jwks",
    )
    return TokenVerifier(SERVICE_ACCOUNT_ISSUER, identity.AUDIENCE, keys)


async def test_a_token_request_for_our_audience_names_its_service_account(
    control_plane: Any, envtest_namespace: str, verifier: TokenVerifier
) -> None:
    core = k8s.CoreV1Api(control_plane.api_client())
    token = _token(core, envtest_namespace, "desk-concierge", [identity.AUDIENCE])
    who = await verifier.verify(token)
    assert who.subject == identity.subject(envtest_namespace, "desk-concierge")
    assert (who.namespace, who.service_account) == (envtest_namespace, "desk-concierge")
    other = _token(core, envtest_namespace, "stranger", [identity.AUDIENCE])
    assert (await verifier.verify(other)).service_account == "stranger"


async def test_an_api_token_replayed_to_an_agent_is_refused(
    control_plane: Any, envtest_namespace: str, verifier: TokenVerifier
) -> None:
    core = k8s.CoreV1Api(control_plane.api_client())
    token = _token(core, envtest_namespace, "desk-researcher", None)  # the API server's audience
    with pytest.raises(TokenRejected) as caught:
        await verifier.verify(token)
    assert caught.value.reason == "wrong_audience"


def test_the_api_server_refuses_an_agent_token(control_plane: Any, envtest_namespace: str) -> None:
    core = k8s.CoreV1Api(control_plane.api_client())
    token = _token(core, envtest_namespace, "desk-summarizer", [identity.AUDIENCE])
    as_agent = k8s.CoreV1Api(control_plane.api_client(token))
    with pytest.raises(ApiException) as caught:
        as_agent.list_namespaced_pod(envtest_namespace)
    assert caught.value.status == 401


async def test_an_agent_pods_verifier_learns_the_issuer_from_the_api_server(
    control_plane: Any, envtest_namespace: str, tmp_path: Path
) -> None:
    """As in a pod: the CA and a token of the agent's own bare ServiceAccount (no bindings)
    for the API server's audience in the token volume, the API server's address from the
    kubelet's variables; the issuer is the one the API server names."""
    core = k8s.CoreV1Api(control_plane.api_client())
    (tmp_path / identity.CA_FILE).write_bytes(Path(control_plane.ca_path).read_bytes())
    api_token = _token(core, envtest_namespace, "desk-researcher", None)
    (tmp_path / identity.API_TOKEN_FILE).write_text(api_token)
    host, _, port = control_plane.server_url.removeprefix("https://").rpartition(":")
    env = {
        identity.IDENTITY_ENV: identity.IDENTITY_KUBERNETES,
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
    }
    verifier = cluster_verifier(env, tmp_path)
    assert verifier is not None
    caller = _token(core, envtest_namespace, "desk-concierge", [identity.AUDIENCE])
    who = await verifier.verify(caller)
    assert who.subject == identity.subject(envtest_namespace, "desk-concierge")
    assert verifier.expected_issuer() == SERVICE_ACCOUNT_ISSUER
    with pytest.raises(TokenRejected) as caught:
        await verifier.verify(api_token)  # the API-audience token is no caller's identity
    assert caught.value.reason == "wrong_audience"

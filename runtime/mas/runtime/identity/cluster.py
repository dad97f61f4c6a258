"""The caller check of an agent in a pod: the cluster's issuer, read through the API server.

:func:`cluster_verifier` is on only when the operator asked for it (``MAS_A2A_IDENTITY`` is
``kubernetes``, :data:`mas.infra.identity.IDENTITY_ENV`); otherwise (a local run) it is
``None`` and the agent keeps today's behaviour: ``a2a.auth`` alone. On, it reads the issuer's
OIDC discovery document and JWKS from the API server (``KUBERNETES_SERVICE_HOST`` and
``_PORT``, which the kubelet always sets) over TLS with the cluster's CA, authenticated by
the pod's API-audience token, both from the A2A token volume
(:data:`~mas.infra.identity.CA_PATH`, :data:`~mas.infra.identity.API_TOKEN_PATH`); the
issuer is the one the API server names. :func:`cluster_denial_events` posts the first
refusal of each caller as a Warning Event on the Application through the same API server
and token, when the operator asked for it (``MAS_A2A_DENIAL_EVENTS``). A setting that
cannot work is a :class:`~mas.runtime.errors.HostError` naming the variable or file and
what is expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mas.infra import identity
from mas.infra.models import Application
from mas.infra.routes import Routes
from mas.runtime.errors import HostError
from mas.runtime.identity.callers import CallerCheck

if TYPE_CHECKING:  # PyJWT and httpx load only in a process that checks identities
    from mas.runtime.identity.denial_events import DenialEvents
    from mas.runtime.identity.verification import TokenVerifier

JWKS_PATH = "/openid/v1/jwks"


def api_server_url(env: Mapping[str, str]) -> str:
    """The API server's base URL as a pod reaches it."""
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port.isdigit():
        raise HostError(
            f"{identity.IDENTITY_ENV}={identity.IDENTITY_KUBERNETES} needs the API server's "
            f"address: KUBERNETES_SERVICE_HOST={host!r} and KUBERNETES_SERVICE_PORT={port!r} "
            "(set by the kubelet in every pod)"
        )
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def cluster_verifier(
    env: Mapping[str, str], token_dir: str | Path | None = None
) -> TokenVerifier | None:
    """The verifier of the cluster's agent tokens, or None when identities are not checked.

    ``token_dir`` defaults to the folder of ``$MAS_A2A_TOKEN_FILE`` when set (the token
    volume moved), else :data:`~mas.infra.identity.TOKEN_DIR`."""
    mode = env.get(identity.IDENTITY_ENV, "")
    if not mode:
        return None
    if mode != identity.IDENTITY_KUBERNETES:
        raise HostError(
            f"{identity.IDENTITY_ENV}={mode!r} is not a known identity mode; accepted: "
            f"{identity.IDENTITY_KUBERNETES!r} (set by the operator), or unset"
        )
    ca, token = _api_credentials(env, token_dir, f"{identity.IDENTITY_ENV}={mode}")
    base = api_server_url(env)
    from mas.runtime.identity.keys import DISCOVERY_PATH, OidcKeys, https_fetch
    from mas.runtime.identity.verification import TokenVerifier

    keys = OidcKeys(
        None,
        fetch=https_fetch(ca_file=ca, token_file=token),
        discovery_url=base + DISCOVERY_PATH,
        jwks_url=base + JWKS_PATH,
    )
    return TokenVerifier(None, identity.AUDIENCE, keys)


def _api_credentials(
    env: Mapping[str, str], token_dir: str | Path | None, setting: str
) -> tuple[Path, Path]:
    """The cluster's CA and the pod's API-audience token, which ``setting`` needs."""
    if token_dir is None:
        moved = env.get(identity.TOKEN_FILE_ENV)
        token_dir = Path(moved).parent if moved else identity.TOKEN_DIR
    folder = Path(token_dir)
    ca, token = folder / identity.CA_FILE, folder / identity.API_TOKEN_FILE
    for path in (ca, token):
        if not path.is_file():
            raise HostError(
                f"{setting}: {path} is missing (the operator projects it into the agent's "
                "A2A token volume)"
            )
    return ca, token


def cluster_denial_events(
    env: Mapping[str, str], app: Application, agent: str, token_dir: str | Path | None = None
) -> DenialEvents | None:
    """The poster of ``agent``'s denial Events (:mod:`.denial_events`) when the operator asked
    for them (:data:`~mas.infra.identity.DENIAL_EVENTS_ENV` is ``on``), else None."""
    mode = env.get(identity.DENIAL_EVENTS_ENV, "")
    if not mode:
        return None
    if mode != identity.DENIAL_EVENTS_ON:
        raise HostError(
            f"{identity.DENIAL_EVENTS_ENV}={mode[:100]!r} is not accepted; accepted: "
            f"{identity.DENIAL_EVENTS_ON!r} (set by the operator), or unset"
        )
    setting = f"{identity.DENIAL_EVENTS_ENV}={mode}"
    ca, token = _api_credentials(env, token_dir, setting)
    from mas.runtime.identity.denial_events import DenialEvents, Subject, api_server_post

    namespace = app.metadata.namespace or "default"
    subject = Subject(namespace, app.metadata.name, env.get(identity.APPLICATION_UID_ENV, ""))
    return DenialEvents(api_server_post(api_server_url(env), namespace, ca, token), subject, agent)


def console_principal(env: Mapping[str, str]) -> str | None:
    """The install's console subject the operator asks agents to admit
    (:data:`~mas.infra.identity.CONSOLE_ENV`), or None."""
    value = env.get(identity.CONSOLE_ENV, "")
    if not value:
        return None
    if identity.parse_subject(value) is None:
        raise HostError(
            f"{identity.CONSOLE_ENV}={value[:200]!r} is not a ServiceAccount subject; accepted: "
            "system:serviceaccount:NAMESPACE:NAME (set by the operator), or unset"
        )
    return value


def caller_check(
    app: Application,
    routes: Routes,
    agent: str,
    verifier: TokenVerifier,
    console: str | None = None,
    *,
    denials: DenialEvents | None = None,
) -> CallerCheck:
    """The caller check of ``agent`` in the Application's namespace (``console``: the
    install's console, admitted too; ``denials``: where its first refusal of each caller
    goes)."""
    namespace = app.metadata.namespace or "default"
    admission = identity.admission(app, routes, agent, namespace, console)
    return CallerCheck(admission, verifier, denials=denials)

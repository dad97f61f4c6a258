"""The workload identity of a deployed agent: its ServiceAccount and A2A token.

Both the operator (which creates the ServiceAccount and mounts the token) and the runtime
(which sends and checks it) read these rules, so they live here, pure:

- every deployed agent runs as the ServiceAccount ``<application>-<agent>`` (the name of its
  other children), unless ``spec.runtime.service_account`` names one account for every pod;
- that account has no RBAC bindings and no automounted API token: its only credential is a
  projected ServiceAccount token for :data:`AUDIENCE`, valid :data:`TOKEN_EXPIRY_SECONDS`,
  which the kubelet rotates in place at :data:`TOKEN_PATH`. The API server refuses a token
  of another audience, so this token never carries API permissions;
- a caller's identity is its ServiceAccount's subject, ``system:serviceaccount:NS:NAME``;
- an agent sends its token in the header :data:`IDENTITY_HEADER` (gRPC: the same metadata
  key) on every A2A call and MCP tool call to a target this Application deploys
  (:func:`carries_identity`), beside the endpoint's own headers (which may hold an
  ``Authorization`` of their own); an endpoint it only uses (``usage: use``) never gets it.
"""

from __future__ import annotations

from mas.infra.incluster import service_name
from mas.infra.models import Application

AUDIENCE = "maslab.io/a2a"
TOKEN_DIR = "/var/run/secrets/maslab.io/a2a"
TOKEN_FILE = "token"
TOKEN_PATH = f"{TOKEN_DIR}/{TOKEN_FILE}"
# The kubelet refreshes a projected token once 80% of its life has passed; 600 s is the
# shortest expiry the API server accepts.
TOKEN_EXPIRY_SECONDS = 600

SUBJECT_PREFIX = "system:serviceaccount:"
# Lowercase: HTTP header names are case-insensitive, gRPC metadata keys must be lowercase.
IDENTITY_HEADER = "maslab-identity"


def service_account_name(application: str, agent: str, override: str | None = None) -> str:
    """The ServiceAccount the pods of ``agent`` run as: ``override`` when the Application
    names one (``spec.runtime.service_account``), else the agent's own."""
    return override if override else service_name(application, agent)


def subject(namespace: str, account: str) -> str:
    """The token subject of ServiceAccount ``account`` in ``namespace``."""
    return f"{SUBJECT_PREFIX}{namespace}:{account}"


def parse_subject(text: str) -> tuple[str, str] | None:
    """``(namespace, account)`` of a ServiceAccount subject, or ``None`` for any other text."""
    if not text.startswith(SUBJECT_PREFIX):
        return None
    namespace, sep, account = text[len(SUBJECT_PREFIX) :].partition(":")
    if not sep or not namespace or not account or ":" in account:
        return None
    return namespace, account


def carries_identity(app: Application, endpoint_key: str) -> bool:
    """Whether calls to the endpoint ``endpoint_key`` (a delegation target or a tool server)
    carry the caller's token: only when this Application deploys that endpoint."""
    endpoint = app.spec.endpoints.get(endpoint_key)
    return endpoint is not None and endpoint.deployed

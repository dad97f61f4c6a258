"""The workload identity of a deployed agent: its ServiceAccount and A2A token.

Both the operator (which creates the ServiceAccount and mounts the token) and the runtime
(which sends and checks it) read these rules, so they live here, pure:

- every deployed agent runs as the ServiceAccount ``<application>-<agent>`` (the name of its
  other children), unless ``spec.runtime.service_account`` names one account for every pod;
- that account has no RBAC bindings and no automounted API token: its only credential is a
  projected ServiceAccount token for :data:`AUDIENCE`, valid :data:`TOKEN_EXPIRY_SECONDS`,
  which the kubelet rotates in place at :data:`TOKEN_PATH`. The API server refuses a token
  of another audience, so this token never carries API permissions;
- a caller's identity is its ServiceAccount's subject, ``system:serviceaccount:NS:NAME``.
"""

from __future__ import annotations

from mas.infra.incluster import service_name

AUDIENCE = "maslab.io/a2a"
TOKEN_DIR = "/var/run/secrets/maslab.io/a2a"
TOKEN_FILE = "token"
TOKEN_PATH = f"{TOKEN_DIR}/{TOKEN_FILE}"
# The kubelet refreshes a projected token once 80% of its life has passed; 600 s is the
# shortest expiry the API server accepts.
TOKEN_EXPIRY_SECONDS = 600

SUBJECT_PREFIX = "system:serviceaccount:"


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

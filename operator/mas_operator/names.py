"""Names, labels and annotations the operator puts on every child object.

Everything the operator writes lives under our own domain (``maslab.io``) or the standard
``app.kubernetes.io/*`` keys. Child names are DNS-1123 labels (a Service name must be one):
``<application>-<agent>``, shortened with a stable hash suffix when too long.
"""

from __future__ import annotations

import hashlib
import re

DOMAIN = "maslab.io"
FIELD_MANAGER = "mas-operator"
MANAGED_BY = "mas-operator"

LABEL_APPLICATION = f"{DOMAIN}/application"
LABEL_AGENT = f"{DOMAIN}/agent"

ANNOTATION_CONFIG_HASH = f"{DOMAIN}/config-hash"
ANNOTATION_SECRETS_HASH = f"{DOMAIN}/secrets-hash"
ANNOTATION_CARD_URL = f"{DOMAIN}/card-url"
ANNOTATION_URL = f"{DOMAIN}/url"
ANNOTATION_GENERATION = f"{DOMAIN}/application-generation"
# Set on an Application to any new value to run its conformance probes again.
ANNOTATION_CONFORMANCE_RUN = f"{DOMAIN}/conformance-run"
# On conformance Jobs and their pods: the agent probed (never maslab.io/agent, which
# Services and Deployments select the agent's own pods by).
LABEL_PROBED_AGENT = f"{DOMAIN}/conformance-agent"

CONFIG_FILE = "application.yaml"
CONFIG_DIR = "/etc/mas"
METRICS_PORT = 9464
DEFAULT_HTTP_PORT = 8080
DEFAULT_MCP_PORT = 8090  # an MCP door beside the agent's A2A endpoint, when it sets no url
RUNTIME_UID = 10001

PORT_HTTP = "a2a-http"
PORT_GRPC = "a2a-grpc"
PORT_METRICS = "metrics"
PORT_MCP = "mcp-http"

CARD_PATH = "/.well-known/agent-card.json"

_MAX_LABEL = 63
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str) -> str:
    """``text`` as a DNS-1123 label: lowercase, ``.`` to ``-``, at most 63 characters.

    A name that has to be shortened keeps a stable 8-character hash of the full text, so two
    long names never collide.
    """
    label = _NOT_DNS.sub("-", text.lower()).strip("-") or "x"
    if len(label) <= _MAX_LABEL:
        return label
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{label[: _MAX_LABEL - 9].rstrip('-')}-{digest}"


def child_name(application: str, agent: str) -> str:
    """The name of every child object of ``agent`` in ``application``."""
    return dns_label(f"{application}-{agent}")


def selector_labels(application: str, agent: str) -> dict[str, str]:
    """The immutable labels a Deployment selects its pods by."""
    return {LABEL_APPLICATION: dns_label(application), LABEL_AGENT: agent}


def application_selector(application: str) -> str:
    """The label selector of every child of ``application``."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{LABEL_APPLICATION}={dns_label(application)}"


def child_labels(application: str, agent: str) -> dict[str, str]:
    """Standard ``app.kubernetes.io/*`` labels plus the selector labels."""
    return {
        "app.kubernetes.io/name": "mas-agent",
        "app.kubernetes.io/instance": dns_label(application),
        "app.kubernetes.io/component": agent,
        "app.kubernetes.io/part-of": "maslab",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **selector_labels(application, agent),
    }

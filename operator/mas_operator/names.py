"""Names, labels and annotations the operator puts on every child object.

Everything the operator writes lives under our own domain (``maslab.io``) or the standard
``app.kubernetes.io/*`` keys. Child names are DNS-1123 labels (a Service name must be one):
``<application>-<agent>``, shortened with a stable hash suffix when too long.
"""

from __future__ import annotations

from mas.infra import incluster

DOMAIN = "maslab.io"
FIELD_MANAGER = "mas-operator"
MANAGED_BY = "mas-operator"

LABEL_APPLICATION = f"{DOMAIN}/application"
LABEL_AGENT = f"{DOMAIN}/agent"

ANNOTATION_CONFIG_HASH = f"{DOMAIN}/config-hash"
ANNOTATION_SECRETS_HASH = f"{DOMAIN}/secrets-hash"
ANNOTATION_CARD_URL = f"{DOMAIN}/card-url"
ANNOTATION_URL = f"{DOMAIN}/url"
ANNOTATION_METRICS_URL = f"{DOMAIN}/metrics-url"
ANNOTATION_GENERATION = f"{DOMAIN}/application-generation"
# Set on an Application to any new value to run its conformance probes again.
ANNOTATION_CONFORMANCE_RUN = f"{DOMAIN}/conformance-run"
DIFFBASE_KEY = "last-handled-configuration"  # kopf's diff base, in our domain
ANNOTATION_DIFFBASE = f"{DOMAIN}/{DIFFBASE_KEY}"
# kopf's own annotations on an Application (progress storage under our domain: one key per
# handler id, its touch key, and the marker it brands our prefix with on its first patch),
# which a reconcile never reads.
RECONCILE_HANDLER_ID = "reconcile"
KOPF_ANNOTATIONS = frozenset(
    {
        ANNOTATION_DIFFBASE,
        f"{DOMAIN}/{RECONCILE_HANDLER_ID}",
        f"{DOMAIN}/touch-dummy",
        f"{DOMAIN}/kopf-managed",
    }
)
# On conformance Jobs and their pods: the agent probed (never maslab.io/agent, which
# Services and Deployments select the agent's own pods by).
LABEL_PROBED_AGENT = f"{DOMAIN}/conformance-agent"

CONFIG_FILE = "application.yaml"
CONFIG_DIR = "/etc/mas"
METRICS_PORT = 9464
DEFAULT_HTTP_PORT = incluster.DEFAULT_SERVICE_PORT
DEFAULT_MCP_PORT = incluster.DEFAULT_MCP_PORT  # an MCP door beside the agent's A2A endpoint
RUNTIME_UID = 10001

PORT_HTTP = "a2a-http"
PORT_GRPC = "a2a-grpc"
PORT_METRICS = "metrics"
PORT_MCP = "mcp-http"

CARD_PATH = "/.well-known/agent-card.json"


# Child names are Service names, which the in-cluster URL model (mas.infra.incluster) owns.
dns_label = incluster.dns_label


def child_name(application: str, agent: str) -> str:
    """The name of every child object of ``agent`` in ``application`` (its Service's name)."""
    return incluster.service_name(application, agent)


def selector_labels(application: str, agent: str) -> dict[str, str]:
    """The immutable labels a Deployment selects its pods by."""
    return {LABEL_APPLICATION: dns_label(application), LABEL_AGENT: agent}


def application_selector(application: str) -> str:
    """The label selector of every child of ``application``."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{LABEL_APPLICATION}={dns_label(application)}"


def application_labels(application: str) -> dict[str, str]:
    """The labels of a child that belongs to the whole Application, not to one agent:
    standard ``app.kubernetes.io/*`` labels and the Application's (what
    :func:`application_selector` selects)."""
    return {
        "app.kubernetes.io/name": "mas-agent",
        "app.kubernetes.io/instance": dns_label(application),
        "app.kubernetes.io/part-of": "maslab",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_APPLICATION: dns_label(application),
    }


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

"""The workload identity of a deployed agent: its ServiceAccount and A2A token.

Both the operator (which creates the ServiceAccount and mounts the token) and the runtime
(which sends and checks it) read these rules, so they live here, pure:

- every deployed agent runs as the ServiceAccount ``<application>-<agent>`` (the name of its
  other children), unless ``spec.runtime.service_account`` names one account for every pod;
- that account has no automounted API token: the credential it sends is a projected
  ServiceAccount token for :data:`AUDIENCE`, valid :data:`TOKEN_EXPIRY_SECONDS`, which the
  kubelet rotates in place at :data:`TOKEN_PATH`. The API server refuses a token of another
  audience, so this token never carries API permissions. Its one RBAC binding (unless
  ``spec.runtime.denial_events`` is off) is a Role that may only create Events, used with
  the API-audience token that never leaves the pod (:data:`DENIAL_EVENTS_ENV`);
- a caller's identity is its ServiceAccount's subject, ``system:serviceaccount:NS:NAME``;
- an agent sends its token in the header :data:`IDENTITY_HEADER` (gRPC: the same metadata
  key) on every A2A call and MCP tool call to a target this Application deploys
  (:func:`carries_identity`), beside the endpoint's own headers (which may hold an
  ``Authorization`` of their own); an endpoint it only uses (``usage: use``) never gets it;
- an agent that checks identities admits (:func:`admission`): its own ServiceAccount (the
  operator's conformance probe of it runs as it), the pods that host one of its
  declared delegators (an agent whose ``delegates_to`` names it, in its own pod or as a
  private worker in another's), the principals of its doors' ``a2a.allow``, callers through
  an ``a2a.auth`` scheme, and, only with ``a2a.anonymous: true``, anyone. Each admitted
  principal keeps where it comes from, so a refusal can say what to change;
- the web console of the install (the chart's ``console`` component) calls agents as its own
  ServiceAccount; when the chart admits it, the operator names that subject in every agent
  pod's :data:`CONSOLE_ENV` and every agent admits it too (source :data:`CONSOLE_SOURCE`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mas.infra.incluster import service_name
from mas.infra.models import Application, Endpoint
from mas.infra.routes import Routes, doors_of

AUDIENCE = "maslab.io/a2a"
TOKEN_DIR = "/var/run/secrets/maslab.io/a2a"
TOKEN_FILE = "token"
TOKEN_PATH = f"{TOKEN_DIR}/{TOKEN_FILE}"
# Beside the A2A token, the same volume holds what the agent needs to read its issuer's keys
# through the API server: a token for the API server's own audience (the ServiceAccount has
# no RBAC bindings, so it reads no more than any ServiceAccount may: the issuer's discovery
# document and JWKS) and the cluster's CA (the kube-root-ca.crt ConfigMap).
API_TOKEN_FILE = "api-token"
API_TOKEN_PATH = f"{TOKEN_DIR}/{API_TOKEN_FILE}"
CA_FILE = "ca.crt"
CA_PATH = f"{TOKEN_DIR}/{CA_FILE}"
# Set by the operator in every agent pod: the agent checks its callers against the cluster's
# issuer (IDENTITY_KUBERNETES). Unset (a local run): no identity check, a2a.auth only.
IDENTITY_ENV = "MAS_A2A_IDENTITY"
# Where a process's own A2A token is read (default TOKEN_PATH); the conformance probe sends
# one only when this names it.
TOKEN_FILE_ENV = "MAS_A2A_TOKEN_FILE"
IDENTITY_KUBERNETES = "kubernetes"
# The kubelet refreshes a projected token once 80% of its life has passed; 600 s is the
# shortest expiry the API server accepts.
TOKEN_EXPIRY_SECONDS = 600

SUBJECT_PREFIX = "system:serviceaccount:"
NAMESPACE_GROUP_PREFIX = "system:serviceaccounts:"
# Set by the operator in every agent pod when the install's console is admitted by agents:
# the console's ServiceAccount subject (mas-operator run --console-principal).
CONSOLE_ENV = "MAS_A2A_CONSOLE"
# Set by the operator (``on``) when the agent may post the first refusal of each caller as a
# Warning Event on its Application (spec.runtime.denial_events): the operator then binds the
# agent's ServiceAccount to a Role that may only create Events. APPLICATION_UID_ENV names
# the Application's uid, so ``kubectl describe`` lists the Event.
DENIAL_EVENTS_ENV = "MAS_A2A_DENIAL_EVENTS"
DENIAL_EVENTS_ON = "on"
APPLICATION_UID_ENV = "MAS_APPLICATION_UID"
CONSOLE_SOURCE = "the console of this install: chart value console.admittedByAgents"
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


@dataclass(frozen=True)
class AdmittedCaller:
    """One principal an agent admits: a ServiceAccount subject or a namespace's group
    (``system:serviceaccounts:NS``), and where the rule comes from."""

    principal: str
    source: str

    def matches(self, subject: str) -> bool:
        """Whether the caller ``subject`` (a ServiceAccount subject) is this principal."""
        if self.principal.startswith(NAMESPACE_GROUP_PREFIX):
            parsed = parse_subject(subject)
            return parsed is not None and parsed[0] == self.principal.split(":", 2)[2]
        return subject == self.principal


@dataclass(frozen=True)
class Admission:
    """Who may call ``agent`` (see the module docstring)."""

    agent: str
    callers: tuple[AdmittedCaller, ...]
    anonymous: bool = False
    schemes: bool = False  # a2a.auth: external callers through its schemes

    def admitted(self, subject: str) -> AdmittedCaller | None:
        """The rule that admits ``subject``, or ``None``."""
        return next((c for c in self.callers if c.matches(subject)), None)

    def describe(self) -> str:
        """The admitted callers and their sources, for a refusal a person reads."""
        parts = [f"{c.principal} ({c.source})" for c in self.callers]
        if self.schemes:
            parts.append("callers with an a2a.auth credential (see the card's securitySchemes)")
        return "; ".join(parts) if parts else "no caller (no delegator, no a2a.allow)"


def admission(
    app: Application, routes: Routes, agent: str, namespace: str, console: str | None = None
) -> Admission:
    """The callers ``agent`` admits when it checks identities (module docstring);
    ``console``: the subject of the install's console, when agents admit it."""
    override = app.spec.runtime.service_account
    callers: dict[str, AdmittedCaller] = {}
    if agent in routes.runtimes:  # its conformance probe runs as it (in-process calls need none)
        own = subject(namespace, service_account_name(app.metadata.name, agent, override))
        callers[own] = AdmittedCaller(own, "its own ServiceAccount: its conformance probe")
    for root, hosted in routes.runtimes.items():
        if root == agent:
            continue  # its own pod calls it in process
        for delegator in hosted:
            if agent not in app.spec.agency.agents[delegator].spec.delegates_to:
                continue
            account = service_account_name(app.metadata.name, root, override)
            where = "" if delegator == root else f", hosted in the pod of {root}"
            source = f"delegates_to of {delegator}{where}"
            principal = subject(namespace, account)
            if principal not in callers:
                callers[principal] = AdmittedCaller(principal, source)
    anonymous = schemes = False
    for key, endpoint in doors_of(app.spec.endpoints, agent):
        for index, principal in enumerate(endpoint.a2a.allow):
            source = f"spec.endpoints.{key}.a2a.allow[{index}]"
            callers.setdefault(principal, AdmittedCaller(principal, source))
        anonymous = anonymous or endpoint.a2a.anonymous
        schemes = schemes or endpoint.a2a.auth is not None
    if console:
        callers.setdefault(console, AdmittedCaller(console, CONSOLE_SOURCE))
    return Admission(agent, tuple(callers.values()), anonymous=anonymous, schemes=schemes)


def endpoint_admission(agent: str, endpoint: Endpoint) -> Admission:
    """The callers one endpoint of ``agent`` admits by itself (a local run, where no cluster
    identity is checked): its ``a2a.allow``, its ``a2a.auth`` schemes, ``a2a.anonymous``."""
    callers = tuple(
        AdmittedCaller(principal, f"spec.endpoints.{agent}.a2a.allow[{index}]")
        for index, principal in enumerate(endpoint.a2a.allow)
    )
    return Admission(
        agent, callers, anonymous=endpoint.a2a.anonymous, schemes=endpoint.a2a.auth is not None
    )

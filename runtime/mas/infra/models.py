"""The typed model of the ``Application`` document (``infra.maslab.io/v1``).

One model serves ``kubectl apply`` and the local tools: ``apiVersion`` may be
``infra.maslab.io/v1`` or the short ``infra/v1``. Every model forbids unknown fields so a
typo is an error that names the field, never a silently ignored setting. The field
descriptions end up in the generated CRD (``crds/application.yaml``).

Rules that need more than one field of the document (the advertised url, port collisions,
usage versus agency membership, entry, plugin names) live in :mod:`mas.infra.validation`;
``delegates_to`` reachability lives in :mod:`mas.infra.routes`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

API_GROUP = "infra.maslab.io"
API_VERSION = "v1"
KIND = "Application"
PLURAL = "applications"
SHORT_NAME = "masapp"
ACCEPTED_API_VERSIONS = (f"{API_GROUP}/{API_VERSION}", f"infra/{API_VERSION}")

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_AGENTS = 200
MAX_LIST = 100

AgentId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN),
    Field(description="An agent id: a DNS-1123 label (lowercase letters, digits and '-')."),
]

HeaderName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"),
    Field(description="An HTTP header name (an RFC 9110 token)."),
]

Usage = Literal["use", "deploy", "use-and-deploy"]
DEPLOYED_USAGES: frozenset[str] = frozenset({"deploy", "use-and-deploy"})
USED_USAGES: frozenset[str] = frozenset({"use", "use-and-deploy"})


class Model(BaseModel):
    """Base of every document model: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


MAX_BUDGET_TOKENS = 10**12


class PeriodBudget(Model):
    """A cap on the tokens one agent uses in a fixed window of time."""

    tokens: int = Field(
        gt=0, le=MAX_BUDGET_TOKENS, description="Most tokens (input + output) per window."
    )
    seconds: int = Field(
        default=3600,
        gt=0,
        le=366 * 86400,
        description="The window's length; windows start at multiples of it since the epoch.",
    )


class TokenBudget(Model):
    """Caps on the tokens a model may use; a turn that passes one ends failed, saying which."""

    turn: int | None = Field(
        default=None,
        gt=0,
        le=MAX_BUDGET_TOKENS,
        description="Most tokens (input + output) of one turn: the agent's model calls and "
        "its delegates' turns.",
    )
    session: int | None = Field(
        default=None,
        gt=0,
        le=MAX_BUDGET_TOKENS,
        description="Most tokens of one session, counting every turn a delegation chain "
        "started in it reaches.",
    )
    period: PeriodBudget | None = Field(
        default=None, description="Most tokens of the agent per window of time (per replica)."
    )


class ModelSelector(Model):
    """An agent's model: a named model of spec.models (ref) or a plugin inline (type)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.type) != has(self.ref)",
                    "message": "set exactly one of type or ref",
                }
            ]
        }
    )

    type: str | None = Field(
        default=None, min_length=1, description="The model plugin name (registry category 'model')."
    )
    ref: str | None = Field(
        default=None, min_length=1, max_length=63, description="The name of a model in spec.models."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters passed to the plugin's constructor; with ref, merged over the "
        "named model's params.",
    )
    budget: TokenBudget | None = Field(
        default=None, description="Token caps of this agent (with ref: instead of the named one's)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> ModelSelector:
        if (self.type is None) == (self.ref is None):
            raise ValueError("set exactly one of type or ref")
        return self


class CommSelector(Model):
    """The MAS-wide in-process comm variant: ``type`` or ``protocol``, with optional params."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.type) != has(self.protocol)",
                    "message": "set exactly one of type or protocol",
                }
            ]
        }
    )

    type: str | None = Field(default=None, max_length=63, description="The agent_comm plugin name.")
    protocol: str | None = Field(
        default=None, max_length=63, description="The protocol whose agent_comm plugin to use."
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters passed to the plugin's constructor."
    )

    @property
    def name(self) -> str | None:
        """The registry name this selector asks for."""
        return self.type if self.type is not None else self.protocol


class Skill(Model):
    """One skill of an agent; each becomes an A2A AgentSkill on the card."""

    id: str = Field(min_length=1, max_length=128, description="Unique skill id within the agent.")
    name: str | None = Field(default=None, description="Human-readable name (defaults to the id).")
    description: str | None = Field(default=None, description="What the skill does.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_LIST, description="Keywords.")
    examples: list[str] = Field(
        default_factory=list, max_length=MAX_LIST, description="Example prompts for the skill."
    )


class Provider(Model):
    """The organization that provides an agent."""

    organization: str = Field(default="MAS Lab", description="Provider organization.")
    url: str | None = Field(default=None, description="Provider web site.")


class AgentMetadata(Model):
    """Manifest metadata of one agent."""

    name: str | None = Field(default=None, description="Display name (defaults to the agent id).")
    version: str = Field(default="0.1.0", description="Agent version published on its card.")
    description: str | None = Field(default=None, description="Short description.")


ToolName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$"),
    Field(description="A tool name as its server lists it (letters, digits, '_', '.', '-')."),
]


class ToolGrant(Model):
    """The tools an agent may use from one tool server (an endpoint with usage use)."""

    server: AgentId = Field(
        description="The endpoint id of the tool server (e.g. an endpoint with protocol mcp "
        "and usage use)."
    )
    names: list[ToolName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LIST,
        description="Only these tools of the server; absent: every tool it lists.",
    )


class AgentSpec(Model):
    """What an agent does, whom it may delegate to and which tools it may use."""

    description: str | None = Field(default=None, description="Description for the AgentCard.")
    skills: list[Skill] = Field(default_factory=list, max_length=MAX_LIST)
    provider: Provider | None = Field(default=None, description="Provider for the AgentCard.")
    delegates_to: list[AgentId] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Agent ids this agent may delegate to: local agents or endpoints with "
        "usage use or use-and-deploy.",
    )
    tools: list[ToolGrant] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Tool servers this agent may use (registry category 'tool_source', by "
        "the endpoint's protocol), optionally limited to some of their tools.",
    )
    instructions: str | None = Field(default=None, description="System instructions.")
    model: ModelSelector | None = Field(
        default=None,
        description="The model: a plugin inline (type) or a named model (ref); absent: "
        "spec.defaults.model, else the echo plugin.",
    )


class AgentManifest(Model):
    """One agent of the agency."""

    metadata: AgentMetadata = Field(default_factory=AgentMetadata)
    spec: AgentSpec = Field(default_factory=AgentSpec)


class Agency(Model):
    """The agents of the multi-agent system, keyed by agent id."""

    agents: dict[AgentId, AgentManifest] = Field(
        min_length=1, max_length=MAX_AGENTS, description="Agent manifests keyed by agent id."
    )
    entry: AgentId | None = Field(
        default=None,
        description="The entry agent id; required when the agency has more than one agent.",
    )

    def entry_agent(self) -> str | None:
        """The entry agent id: ``entry``, or the only agent of a one-agent agency."""
        if self.entry is not None:
            return self.entry
        if len(self.agents) == 1:
            return next(iter(self.agents))
        return None


class SecretKeyRef(Model):
    """A key of a Kubernetes Secret in the Application's namespace."""

    name: str = Field(min_length=1, max_length=253, description="Secret name.")
    key: str = Field(min_length=1, max_length=253, description="Key within the Secret.")


MODEL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class ModelKey(Model):
    """A model's API key, from a Secret key."""

    secret_key_ref: SecretKeyRef = Field(description="The Secret key holding the API key.")


class NamedModel(Model):
    """A model the platform team defines once and agents use by name (model: {ref: NAME})."""

    provider: str = Field(
        min_length=1, max_length=63, description="The model plugin (e.g. openai, anthropic)."
    )
    model: str = Field(
        min_length=1,
        max_length=256,
        description="The provider's model name (Azure OpenAI: the deployment's model).",
    )
    endpoint: str | None = Field(
        default=None,
        max_length=2048,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="The API root, e.g. https://api.openai.com/v1; absent: the provider's own.",
    )
    key: ModelKey | None = Field(
        default=None,
        description="The API key: {secret_key_ref: {name, key}} (the pods of the agents that "
        "use the model read it).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="More of the plugin's parameters (temperature, max_tokens, azure, ...).",
    )
    budget: TokenBudget | None = Field(default=None, description="Token caps of each agent.")


class HeaderValue(Model):
    """A header value: a literal ``value`` or a ``secret_key_ref``."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.value) != has(self.secret_key_ref)",
                    "message": "set exactly one of value or secret_key_ref",
                }
            ]
        }
    )

    value: str | None = Field(default=None, description="Literal header value.")
    secret_key_ref: SecretKeyRef | None = Field(
        default=None, description="Read the value from a Secret key."
    )


class A2ACapabilities(Model):
    """A2A capabilities advertised on the AgentCard (camelCase, as A2A spells them)."""

    streaming: bool = Field(default=True, description="Server-sent-event streaming.")
    pushNotifications: bool = Field(default=False, description="Push notifications.")
    extendedAgentCard: bool = Field(default=False, description="An authenticated extended card.")


DEFAULT_MEMORY_MAX_TASKS = 10_000
DEFAULT_MEMORY_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_MEMORY_TTL_SECONDS = 3600.0
DEFAULT_HISTORY_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_HISTORY_MAX_SESSION_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
DEFAULT_PUSH_MAX_CONFIGS_PER_TASK = 10
DEFAULT_PUSH_RECEIVER_CONNECTIONS = 4
DEFAULT_PUSH_RECEIVER_QUEUE_SIZE = 1024
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
DEFAULT_LIST_HISTORY_LENGTH = 10
DEFAULT_STREAM_BUFFER_EVENTS = 1024
DEFAULT_MAX_SUBSCRIPTIONS = 32
DEFAULT_STREAM_BUFFER_BYTES = 4 * 1024 * 1024
EnvName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=253, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"),
    Field(description="An environment variable name."),
]


OIDC_PRINCIPAL_PREFIX = "oidc:user:"
ISSUER_PATTERN = r"^(https://|http://(127\.0\.0\.1|localhost|\[::1\])[:/]).+"
OIDC_GROUP_PREFIX = "oidc:group:"
ClaimName = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_.:/-]*$"),
    Field(description="A JWT claim name."),
]


class OidcOptions(Model):
    """An OpenID Connect issuer whose tokens (``Authorization: Bearer <JWT>``) admit a caller."""

    issuer: str = Field(
        min_length=1,
        max_length=2048,
        description="The issuer URL, exactly as its tokens' iss names it; its discovery "
        "document is <issuer>/.well-known/openid-configuration. https, or http on loopback.",
        json_schema_extra={"pattern": ISSUER_PATTERN},
    )
    audiences: list[str] = Field(
        min_length=1,
        max_length=10,
        description="Accepted audiences: the token's aud must hold one of them (the client id "
        "the provider issued the token for).",
    )
    principal_claim: ClaimName = Field(
        default="sub",
        description="The claim naming the caller (e.g. sub, email, preferred_username); the "
        "caller is then 'oidc:user:<value>' in a2a.allow, refusals and traces.",
    )
    groups_claim: ClaimName = Field(
        default="groups", description="The claim listing the caller's groups."
    )
    required_groups: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="When set, a caller must be in at least one of these groups (else 403).",
    )

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, issuer: str) -> str:
        if not re.match(ISSUER_PATTERN, issuer):
            raise ValueError(
                f"issuer {issuer!r} is not an issuer URL; accepted: https://HOST[/PATH] "
                "(plain http only on loopback: 127.0.0.1, localhost, [::1])"
            )
        return issuer

    @field_validator("audiences")
    @classmethod
    def _audiences(cls, audiences: list[str]) -> list[str]:
        for index, audience in enumerate(audiences):
            if not audience.strip():
                raise ValueError(f"audiences[{index}] is empty; accepted: a client id or URI")
        return audiences


class AuthScheme(Model):
    """One accepted inbound credential: a bearer token, an API key in a header, or a token
    from an OpenID Connect issuer."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.type == 'oidc' ? (has(self.oidc) && !has(self.secret_key_ref)"
                    " && !has(self.value_env)) : has(self.secret_key_ref) != has(self.value_env)",
                    "message": "set exactly one of secret_key_ref or value_env (bearer, "
                    "api_key), or oidc alone (type oidc)",
                },
                {
                    "rule": "!has(self.oidc) || self.type == 'oidc'",
                    "message": "oidc is only for type oidc",
                },
                {
                    "rule": "!has(self.name) || self.type == 'api_key'",
                    "message": "name is only for type api_key (the header)",
                },
            ]
        }
    )

    type: Literal["bearer", "api_key", "oidc"] = Field(
        description="bearer: 'Authorization: Bearer <token>'; api_key: the key in header "
        "'name'; oidc: 'Authorization: Bearer <JWT>' from the issuer in 'oidc'."
    )
    name: HeaderName | None = Field(
        default=None, description="The header of an api_key scheme (default X-API-Key)."
    )
    secret_key_ref: SecretKeyRef | None = Field(
        default=None, description="Read the expected credential from a Secret key."
    )
    value_env: EnvName | None = Field(
        default=None, description="Read the expected credential from this environment variable."
    )
    oidc: OidcOptions | None = Field(
        default=None, description="The issuer of an oidc scheme and what its tokens must hold."
    )

    @model_validator(mode="after")
    def _one_source(self) -> AuthScheme:
        if self.type == "oidc":
            if self.oidc is None:
                raise ValueError(
                    "type oidc needs oidc: {issuer, audiences} (the OpenID Connect issuer)"
                )
            if self.secret_key_ref is not None or self.value_env is not None:
                raise ValueError(
                    "type oidc takes no secret_key_ref or value_env: tokens are verified "
                    "against the issuer's keys"
                )
        elif (self.secret_key_ref is None) == (self.value_env is None):
            raise ValueError("set exactly one of secret_key_ref or value_env")
        elif self.oidc is not None:
            raise ValueError(f"oidc is only for type oidc, not type {self.type!r}")
        if self.name is not None and self.type != "api_key":
            raise ValueError(f"name {self.name!r} is only for type api_key (the header)")
        return self


class A2AAuth(Model):
    """Inbound authentication: a request must present one of the schemes."""

    schemes: list[AuthScheme] = Field(min_length=1, max_length=10)


_NS = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SERVICE_ACCOUNT_PATTERN = (
    rf"^(system:serviceaccount:{_NS}:[a-z0-9]([-.a-z0-9]*[a-z0-9])?|system:serviceaccounts:{_NS})$"
)
CALLER_PATTERN = SERVICE_ACCOUNT_PATTERN[:-2] + r"|oidc:(user|group):\S+)$"

CallerPrincipal = Annotated[
    str,
    StringConstraints(min_length=1, max_length=330),
    Field(
        description="A ServiceAccount 'system:serviceaccount:NAMESPACE:NAME', all of a "
        "namespace's 'system:serviceaccounts:NAMESPACE', or a person or system from an oidc "
        "scheme of a2a.auth: 'oidc:user:PRINCIPAL' or 'oidc:group:GROUP'.",
        json_schema_extra={"pattern": CALLER_PATTERN},
    ),
]


class PushPolicy(Model):
    """Which push-notification URLs the server accepts and calls (SSRF screening)."""

    allow_private: bool = Field(
        default=False,
        description="Accept loopback, private, link-local and metadata addresses.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Hosts (names or addresses) accepted even when they resolve to a "
        "non-public address.",
    )
    allow_anonymous_create: bool = Field(
        default=False,
        description="Without a2a.auth, also accept CreateTaskPushNotificationConfig (a push "
        "config attached to an existing task by its id alone). Refused by default: the "
        "request cannot show the task's context. Configs given inline with SendMessage are "
        "always accepted.",
    )
    max_configs_per_task: int = Field(
        default=DEFAULT_PUSH_MAX_CONFIGS_PER_TASK,
        ge=1,
        le=1000,
        description="Most push-notification configs on one task (all principals together); "
        "one more is refused as invalid params naming this limit.",
    )
    receiver_connections: int = Field(
        default=DEFAULT_PUSH_RECEIVER_CONNECTIONS,
        ge=1,
        le=100,
        description="Most push POSTs in flight to one receiver (scheme://host:port); each "
        "receiver has its own connections, so a slow one delays no other.",
    )
    receiver_queue_size: int = Field(
        default=DEFAULT_PUSH_RECEIVER_QUEUE_SIZE,
        ge=1,
        le=1_000_000,
        description="Most push events waiting for one receiver across its configs; past it "
        "the oldest are dropped (maslab_a2a_push_dropped_total).",
    )


class ResponseBounds(Model):
    """How much one response, or one stream's unread events, may hold."""

    max_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="Most bytes of tasks in one ListTasks page (their serialized size); the "
        "page ends before the task that would pass it, with a nextPageToken (a page holds "
        "at least one task).",
    )
    list_history_length: int = Field(
        default=DEFAULT_LIST_HISTORY_LENGTH,
        ge=0,
        le=10_000,
        description="ListTasks without historyLength: the most recent messages kept in each "
        "task's history (GetTask gives the whole history).",
    )
    stream_buffer_events: int = Field(
        default=DEFAULT_STREAM_BUFFER_EVENTS,
        ge=1,
        le=1_000_000,
        description="Most events a stream subscriber may leave unread; past it the subscriber "
        "is dropped (its stream ends with an error), the task and other subscribers go on.",
    )
    max_subscriptions: int = Field(
        default=DEFAULT_MAX_SUBSCRIPTIONS,
        ge=1,
        le=100_000,
        description="Most SubscribeToTask streams open at once on the agent (every transport); "
        "one more is refused (UnsupportedOperationError). Each holds its own copy of its task "
        "while it lasts.",
    )
    stream_buffer_bytes: int = Field(
        default=DEFAULT_STREAM_BUFFER_BYTES,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="Most bytes of events a stream subscriber may leave unread (their "
        "serialized size); past it the subscriber is dropped.",
    )


class ConnectionLimits(Model):
    """The bounds of an agent's listeners (docs/security.md, Connection limits): how many
    connections they hold and how long a connection may go without progress."""

    max_open: int = Field(
        default=512,
        ge=1,
        le=65536,
        description="Open HTTP connections of one listener; past it a new one gets 503.",
    )
    max_open_per_client: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="Open HTTP connections from one address (an IPv6 /64); past it a new one "
        "gets 503, so no single client takes every slot. Default: half of max_open; "
        "max_open or more: no cap per client.",
    )
    head_timeout_seconds: float = Field(
        default=20.0,
        gt=0,
        le=3600,
        description="Time to send a request head (HTTP 408), or to open HTTP/2 (gRPC).",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Time to send a request body once its head is in (HTTP 408).",
    )
    send_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Time a response may wait for a client that reads nothing before the "
        "connection is aborted.",
    )
    idle_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Time an HTTP keep-alive connection may stay idle.",
    )
    grpc_max_open: int = Field(
        default=512,
        ge=1,
        le=65536,
        description="Open gRPC connections; past it a new one is closed at once.",
    )
    grpc_idle_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=24 * 3600,
        description="Time a gRPC connection may go without a call before it is closed "
        "(GOAWAY; clients reconnect on their next call).",
    )


SQL_URL_SCHEMES = ("sqlite+aiosqlite://", "postgresql+asyncpg://")
MEMORY_BOUNDS = (
    "max_tasks",
    "max_bytes",
    "ttl_seconds",
    "history_max_bytes",
    "history_max_session_bytes",
)


class TaskStoreOptions(Model):
    """Where an A2A endpoint keeps its tasks and push-notification configurations."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.type) || self.type != 'sql'"
                    " || (has(self.url) != has(self.url_secret_key_ref))",
                    "message": "type sql needs exactly one of url or url_secret_key_ref",
                },
                {
                    "rule": "(has(self.type) && self.type == 'sql')"
                    " || (!has(self.url) && !has(self.url_secret_key_ref)"
                    " && !has(self.push_config_key_secret_key_ref))",
                    "message": "url, url_secret_key_ref and push_config_key_secret_key_ref "
                    "need type sql",
                },
                {
                    "rule": "!has(self.type) || self.type != 'sql'"
                    " || (!has(self.max_tasks) && !has(self.max_bytes) && !has(self.ttl_seconds)"
                    " && !has(self.history_max_bytes) && !has(self.history_max_session_bytes))",
                    "message": "max_tasks, max_bytes, ttl_seconds, history_max_bytes and "
                    "history_max_session_bytes bound the memory store; they need type memory",
                },
            ]
        }
    )

    type: Literal["memory", "sql"] = Field(
        default="memory",
        description="memory: tasks live in the process and die with it; sql: a SQLite file "
        "or a PostgreSQL database (durable; PostgreSQL also serves several replicas).",
    )
    url: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="The database URL: sqlite+aiosqlite:///path/tasks.db or "
        "postgresql+asyncpg://user@host:5432/db (no password here: use url_secret_key_ref).",
    )
    url_secret_key_ref: SecretKeyRef | None = Field(
        default=None, description="Read the database URL from a Secret key instead of url."
    )
    push_config_key_secret_key_ref: SecretKeyRef | None = Field(
        default=None,
        description="A Fernet key (urlsafe base64 of 32 bytes) in a Secret: push-notification "
        "configurations (URLs, tokens) are encrypted at rest with it.",
    )

    max_tasks: int = Field(
        default=DEFAULT_MEMORY_MAX_TASKS,
        ge=1,
        le=10_000_000,
        description="memory only: most tasks kept; past it the oldest ended tasks are evicted "
        "(a task still running is never evicted).",
    )
    max_bytes: int = Field(
        default=DEFAULT_MEMORY_MAX_BYTES,
        ge=1024 * 1024,
        le=64 * 1024 * 1024 * 1024,
        description="memory only: most bytes of tasks kept (their serialized size); past it the "
        "oldest ended tasks are evicted.",
    )
    ttl_seconds: float = Field(
        default=DEFAULT_MEMORY_TTL_SECONDS,
        gt=0,
        le=30 * 24 * 3600,
        description="memory only: an ended task (or one waiting for input) untouched this long "
        "is evicted.",
    )
    history_max_bytes: int = Field(
        default=DEFAULT_HISTORY_MAX_BYTES,
        ge=1024 * 1024,
        le=64 * 1024 * 1024 * 1024,
        description="memory only: most bytes of conversation history the agent keeps; past it "
        "the least recently used idle conversations are evicted (one with a turn running "
        "never is).",
    )
    history_max_session_bytes: int = Field(
        default=DEFAULT_HISTORY_MAX_SESSION_BYTES,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="memory only: most bytes of history kept per conversation; past it its "
        "oldest messages are dropped.",
    )

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(SQL_URL_SCHEMES):
            raise ValueError("accepted: a URL starting with " + " or ".join(SQL_URL_SCHEMES))
        return url

    @model_validator(mode="after")
    def _fields_of_type(self) -> TaskStoreOptions:
        given = [
            name
            for name in ("url", "url_secret_key_ref", "push_config_key_secret_key_ref")
            if getattr(self, name) is not None
        ]
        if self.type == "memory" and given:
            raise ValueError(f"type 'memory' takes no {', '.join(given)}; accepted: type sql")
        bounds = [n for n in MEMORY_BOUNDS if n in self.model_fields_set]
        if self.type == "sql" and bounds:
            raise ValueError(
                f"type 'sql' takes no {', '.join(bounds)} (they bound the memory store); "
                "accepted: type memory"
            )
        if self.type == "sql" and (self.url is None) == (self.url_secret_key_ref is None):
            raise ValueError("type 'sql' needs exactly one of url or url_secret_key_ref")
        return self


class A2AOptions(Model):
    """A2A-specific options of an endpoint."""

    capabilities: A2ACapabilities = Field(default_factory=A2ACapabilities)
    task_store: TaskStoreOptions = Field(default_factory=TaskStoreOptions)
    grpc_port: int | None = Field(
        default=None, ge=1, le=65535, description="Port of the gRPC listener, when one is served."
    )
    compat_0_3: bool = Field(
        default=True,
        description="Also serve A2A 0.3 (method names, REST paths, gRPC service) and list the "
        "0.3 interfaces on the card; false gives a strict 1.0 card.",
    )
    grpc_url: str | None = Field(
        default=None,
        min_length=1,
        description="Advertised gRPC address (host:port); defaults to the url's host and "
        "grpc_port.",
    )
    max_body_bytes: int = Field(
        default=DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest request body (HTTP) or message (gRPC) accepted, in bytes.",
    )
    auth: A2AAuth | None = Field(
        default=None, description="Inbound authentication (the card stays public)."
    )
    allow: list[CallerPrincipal] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Callers admitted besides this agent's declared delegators (the agents "
        "whose delegates_to names it), when the agent checks workload identities: a "
        "ServiceAccount 'system:serviceaccount:NAMESPACE:NAME' or every ServiceAccount of a "
        "namespace 'system:serviceaccounts:NAMESPACE'. 'oidc:user:PRINCIPAL' and "
        "'oidc:group:GROUP' name callers of an oidc scheme of a2a.auth: once any is listed, "
        "only the OIDC callers listed (by principal or a group) are admitted.",
    )
    anonymous: bool = Field(
        default=False,
        description="Admit callers that present no identity and no a2a.auth credential "
        "(an agent open to anyone who reaches it); off by default once identities are checked.",
    )

    @field_validator("allow")
    @classmethod
    def _callers(cls, allow: list[str]) -> list[str]:
        for index, entry in enumerate(allow):
            if not re.match(CALLER_PATTERN, entry):
                raise ValueError(
                    f"allow[{index}] {entry!r} names no caller; accepted: "
                    "'system:serviceaccount:NAMESPACE:NAME' (one ServiceAccount), "
                    "'system:serviceaccounts:NAMESPACE' (every ServiceAccount of a namespace), "
                    "'oidc:user:PRINCIPAL' or 'oidc:group:GROUP' (from an oidc scheme of a2a.auth)"
                )
        return allow

    @model_validator(mode="after")
    def _oidc_allow_needs_scheme(self) -> A2AOptions:
        oidc = self.auth is not None and any(s.type == "oidc" for s in self.auth.schemes)
        for index, entry in enumerate(self.allow):
            if entry.startswith("oidc:") and not oidc:
                raise ValueError(
                    f"allow[{index}] {entry!r} names an OIDC caller, but a2a.auth has no "
                    "scheme of type oidc to verify one; add one, or remove the entry"
                )
        return self

    connections: ConnectionLimits = Field(default_factory=ConnectionLimits)
    push: PushPolicy = Field(default_factory=PushPolicy)
    responses: ResponseBounds = Field(default_factory=ResponseBounds)
    extended_skills: list[Skill] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Skills listed only on the extended card (GetExtendedAgentCard, served "
        "with capabilities.extendedAgentCard: true), after the public card's skills.",
    )
    fast_path: bool = Field(
        default=True,
        description="On by default: a quick blocking send and a streaming send of a new task "
        "skip the SDK's per-task machinery (same answers); false serves every request through "
        "the a2a-sdk's own handler, JSON-RPC dispatcher and gRPC servicer.",
    )


class Endpoint(Model):
    """The public protocol configuration of one agent, or a tool server, keyed by an id.

    The key is the agent id, except for a door served under a key of its own (``agent``
    names the agent it serves, e.g. an MCP door beside the agent's A2A endpoint) and for a
    tool server (``usage: use`` with a tool-source protocol such as ``mcp``).
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.url) || self.url.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]+/?$')"
                    " || (self.protocol == 'mcp' && has(self.usage) && self.usage == 'use')",
                    "message": "the advertised url cannot include a path prefix, query or fragment "
                    "(only an MCP tool server's url, usage use, names a path)",
                },
            ]
        }
    )

    protocol: str = Field(
        default="a2a",
        min_length=1,
        max_length=63,
        description="The protocol: selects the agent_comm plugin (a peer agent), the "
        "tool_source plugin (a tool server, e.g. mcp with usage use) or the agent_expose "
        "plugin (a deployed door, e.g. a2a or mcp with usage deploy).",
    )
    url: str | None = Field(
        default=None,
        max_length=2048,
        description="Advertised base URL (scheme://host:port, no path). For a deployed agent "
        "in a cluster it defaults to the agent's Service DNS name. A tool server's url "
        "(protocol mcp, usage use) is its endpoint, path included (e.g. http://host:8600/mcp).",
    )
    usage: Usage | None = Field(
        default=None,
        description="use: a client route; deploy: publicly served; use-and-deploy: both. "
        "Defaults to use-and-deploy with legacy expose: true, else use.",
    )
    expose: bool | None = Field(
        default=None,
        description="Legacy: expose: true reads as use-and-deploy when usage is absent.",
    )
    agent: AgentId | None = Field(
        default=None,
        description="The agent this deployed endpoint serves when its key is not the agent id "
        "(one agent with an A2A and an MCP door: the second endpoint names it here).",
    )
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict, max_length=50, description="Headers sent to the peer on every call."
    )
    timeout: float = Field(default=30.0, gt=0, le=3600, description="Call timeout in seconds.")
    a2a: A2AOptions = Field(default_factory=A2AOptions)

    def served_agent(self, key: str) -> str:
        """The agent a deployed endpoint keyed ``key`` serves: ``agent``, else the key."""
        return self.agent if self.agent is not None else key

    @property
    def effective_usage(self) -> Usage:
        """``usage``; legacy ``expose: true`` reads as ``use-and-deploy`` when it is absent."""
        if self.usage is not None:
            return self.usage
        if self.expose:
            return "use-and-deploy"
        return "use"

    @property
    def deployed(self) -> bool:
        """Whether this endpoint marks public availability (a listener is bound)."""
        return self.effective_usage in DEPLOYED_USAGES

    @property
    def used(self) -> bool:
        """Whether this endpoint is an outbound route for delegations."""
        return self.effective_usage in USED_USAGES


class Defaults(Model):
    """Defaults that apply when the Application omits a setting."""

    agent_comm: CommSelector | None = Field(
        default=None, description="The in-process comm variant when spec.agent_comm is absent."
    )
    model: ModelSelector | None = Field(
        default=None, description="The model of an agent that sets none (default: echo)."
    )


class ResourceRequirements(Model):
    """Container resources, as in a Kubernetes container spec."""

    requests: dict[str, str] = Field(
        default_factory=lambda: {"cpu": "100m", "memory": "128Mi", "ephemeral-storage": "64Mi"},
        description="What the scheduler reserves; the default is an idle agent pod with "
        "headroom (docs/performance.md, Agent pod footprint), and 64Mi of ephemeral storage "
        "for /tmp (an emptyDir of 64Mi at most) and the container's logs.",
    )
    limits: dict[str, str] = Field(
        default_factory=lambda: {"memory": "512Mi", "ephemeral-storage": "256Mi"},
        description="The default leaves room for the memory task store's default bounds "
        "(a2a.task_store.max_bytes, history_max_bytes) above the idle pod, and caps "
        "ephemeral storage at 256Mi.",
    )


class EnvVar(Model):
    """An environment variable for the runtime container."""

    name: str = Field(
        min_length=1, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", description="Variable name."
    )
    value: str | None = Field(default=None, description="Literal value.")
    secret_key_ref: SecretKeyRef | None = Field(
        default=None, description="Read the value from a Secret key instead of value."
    )


class NetworkPolicyOptions(Model):
    """NetworkPolicies derived from the delegation graph."""

    enabled: bool = Field(default=True, description="Create NetworkPolicies for the agent pods.")
    metrics_namespace: str | None = Field(
        default=None, description="Namespace allowed to scrape metrics (default: none)."
    )


class TracingSpec(Model):
    """OpenTelemetry traces of the agent pods, exported over OTLP/HTTP (off by default)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!self.enabled || has(self.endpoint)",
                    "message": "tracing.enabled needs tracing.endpoint (the OTLP/HTTP collector)",
                },
            ]
        }
    )

    enabled: bool = Field(
        default=False,
        description="Export traces: the pods get the standard OTEL_* environment variables.",
    )
    endpoint: str | None = Field(
        default=None,
        max_length=2048,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="OTLP/HTTP base URL of the collector, e.g. "
        "http://otel-collector.observability:4318 (OTEL_EXPORTER_OTLP_ENDPOINT).",
    )
    sampling_ratio: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Fraction of new traces kept (parentbased_traceidratio): a request that "
        "arrives traced keeps its caller's decision.",
    )

    @model_validator(mode="after")
    def _endpoint_when_enabled(self) -> TracingSpec:
        if self.enabled and self.endpoint is None:
            raise ValueError("tracing.enabled needs tracing.endpoint (the OTLP/HTTP collector)")
        return self


class RuntimeSpec(Model):
    """What the operator needs to run the agent pods."""

    image: str = Field(default="ghcr.io/maslab/maslab:0.1.0", description="Runtime image.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of the runtime container."
    )
    replicas: int = Field(default=1, ge=0, le=100, description="Replicas per deployed agent.")
    autoscaling: bool = Field(
        default=False,
        description="Leave replicas to an autoscaler (the operator stops setting it).",
    )
    node_loss_toleration_seconds: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="Seconds an agent pod stays on a node that stopped answering or is not "
        "ready before it is evicted and replaced elsewhere (tolerationSeconds of the "
        "node.kubernetes.io/unreachable and not-ready taints; Kubernetes' default is 300).",
    )
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    env: list[EnvVar] = Field(default_factory=list, max_length=MAX_LIST)
    service_account: str | None = Field(default=None, description="ServiceAccount of the pods.")
    denial_events: bool = Field(
        default=True,
        description="Post the first refusal of each caller by an agent as a Warning Event on "
        "the Application (CallerDenied). The operator then binds every agent's own "
        "ServiceAccount to the Application's one Role (<name>.events) that may only create "
        "Events; off: no Role, no Events. "
        "Not with service_account (the operator grants nothing to an account it did not "
        "create).",
    )
    network_policy: NetworkPolicyOptions = Field(default_factory=NetworkPolicyOptions)
    tracing: TracingSpec = Field(default_factory=TracingSpec)
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Log lines of the pods: text, or one JSON object per line (MAS_LOG_FORMAT).",
    )


class ConformanceSpec(Model):
    """Conformance Jobs: the operator probes every deployed agent's AgentCard on request."""

    enabled: bool = Field(
        default=False,
        description="Run mas-ctl conformance against every deployed agent once it is ready, "
        "and report the Conformant condition. Re-run on demand by setting the annotation "
        "maslab.io/conformance-run to a new value.",
    )
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=3600, description="Deadline of each single probe call, in seconds."
    )
    deadline_seconds: int = Field(
        default=300,
        ge=30,
        le=86400,
        description="activeDeadlineSeconds of each conformance Job: a probe still running "
        "after it fails.",
    )


class RoutesSpec(Model):
    """How the operator reports the Application's edges (``status.routes``)."""

    check_external: bool = Field(
        default=False,
        description="Check the AgentCard of every external A2A endpoint (usage use) a "
        "delegation reaches: the operator GETs <url>/.well-known/agent-card.json every "
        "check_interval_seconds, backing off after failures, and reports the edge Ready or "
        "Unreachable. Off: such edges stay Unknown.",
    )
    check_interval_seconds: float = Field(
        default=60.0,
        ge=1,
        le=86400,
        description="Seconds between checks of a card that answered. After a failure the "
        "next check comes after this, then twice as long after each further failure, up to "
        "16 times this (at most a day).",
    )
    check_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Deadline of one card check (connect and read), in seconds.",
    )


class ApplicationSpec(Model):
    """The multi-agent system and its public protocol endpoints."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.agency.entry) || self.agency.entry in self.agency.agents",
                    "message": "spec.agency.entry must be an agent of the agency",
                },
                {
                    "rule": "!has(self.endpoints) || self.endpoints.all(k, k in self.agency.agents"
                    " || (has(self.endpoints[k].agent) && self.endpoints[k].agent in"
                    " self.agency.agents)"
                    " || (has(self.endpoints[k].usage) ? self.endpoints[k].usage == 'use'"
                    " : !(has(self.endpoints[k].expose) && self.endpoints[k].expose)))",
                    "message": "an endpoint with usage deploy or use-and-deploy (or legacy "
                    "expose: true) must be keyed by an agent of the agency or name one in "
                    "agent; an external agent takes usage: use",
                },
            ]
        }
    )

    agency: Agency
    endpoints: dict[AgentId, Endpoint] = Field(
        default_factory=dict,
        max_length=MAX_AGENTS,
        description="Public protocol configuration keyed by the exact agent id.",
    )
    agent_comm: CommSelector | None = Field(
        default=None, description="The MAS-wide in-process comm variant."
    )
    models: dict[
        Annotated[str, StringConstraints(max_length=63, pattern=MODEL_NAME_PATTERN)], NamedModel
    ] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description="Named models agents use by ref (model: {ref: NAME}); an --infra-ref "
        "document may bring them.",
    )
    defaults: Defaults = Field(default_factory=Defaults)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    conformance: ConformanceSpec = Field(
        default_factory=ConformanceSpec,
        description="Probe the deployed agents' AgentCards with conformance Jobs (off by default).",
    )
    routes: RoutesSpec = Field(
        default_factory=RoutesSpec,
        description="How status.routes reports the edges (external card checks are opt-in).",
    )


class ObjectMeta(BaseModel):
    """The part of Kubernetes object metadata the product reads; the rest is kept as is."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The Application's name (a DNS-1123 subdomain).",
    )
    namespace: str | None = Field(
        default=None, description="Its namespace; the agents' objects are created there."
    )
    generation: int | None = Field(default=None, description="Set by the API server.")
    uid: str | None = Field(default=None, description="Set by the API server.")
    labels: dict[str, str] = Field(default_factory=dict, description="Kubernetes labels.")
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="Kubernetes annotations; maslab.io/conformance-run re-runs the "
        "conformance Jobs when it changes.",
    )


class Condition(Model):
    """A status condition, following the Kubernetes API conventions."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    observedGeneration: int | None = None
    lastTransitionTime: str | None = None


class AgentConformance(Model):
    """The verdict of the latest conformance probe of one deployed agent."""

    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    checked_at: str | None = Field(
        default=None, description="When the probe ran (from its result), RFC 3339."
    )


class AgentStatus(Model):
    """Observed state of one deployed agent."""

    ready: bool = False
    replicas: int = 0
    ready_replicas: int = 0
    url: str | None = None
    card_url: str | None = None
    metrics_url: str | None = Field(
        default=None,
        description="The runtime's /metrics through the agent's Service: one ready pod's "
        "counters per connection.",
    )
    conformant: AgentConformance | None = Field(
        default=None, description="Present when spec.conformance.enabled."
    )


RouteState = Literal["Ready", "Pending", "Unreachable", "Unknown"]


class RouteStatus(Model):
    """One edge of the Application: a delegates_to target or a tool server of an agent."""

    from_: str = Field(
        alias="from", description="The agent that delegates or calls the tool server."
    )
    to: str = Field(description="The target: an agent or endpoint id, or a tool server id.")
    via: str = Field(
        description="How the edge is carried: in-process (the target runs in the same pod), "
        "a2a, grpc (an in-cluster target serving gRPC, used once its channel is up), mcp "
        "(a tool server), or another agent_comm plugin's protocol.",
    )
    url: str | None = Field(
        default=None,
        description="The url the pods use: the target's Service url for a deployed agent of "
        "this Application, the configured url for an external endpoint; absent in-process.",
    )
    state: RouteState = Field(
        description="Ready; Pending (the in-cluster target, or the pods hosting an in-process "
        "edge, have no ready replica); Unreachable (the opt-in card check failed); Unknown "
        "(an external endpoint not checked, or not checked yet).",
    )
    reason: str = Field(description="CamelCase reason for the state.")
    message: str = Field(default="", description="What a person needs to know, or to do.")
    lastTransitionTime: str | None = Field(
        default=None, description="When state last changed, RFC 3339."
    )
    checkFailures: int | None = Field(
        default=None,
        description="Consecutive failed card checks (only while the check fails).",
    )
    nextCheckTime: str | None = Field(
        default=None,
        description="When the failing card check is tried again, RFC 3339 (backoff).",
    )


class ApplicationStatus(Model):
    """Observed state, recomputed from the world on every reconcile."""

    model_config = ConfigDict(extra="allow")

    observedGeneration: int | None = None
    phase: str | None = None
    agents_ready: str | None = None
    edges_ready: str | None = Field(
        default=None, description="Ready edges / edges (status.routes), e.g. 3/5."
    )
    conditions: list[Condition] = Field(default_factory=list)
    agents: dict[str, AgentStatus] = Field(default_factory=dict)
    routes: list[RouteStatus] = Field(
        default_factory=list,
        description="One entry per delegates_to edge and per tool-server edge, recomputed "
        "on every reconcile.",
    )


class Application(Model):
    """An ``Application``: one multi-agent system and how it is exposed."""

    apiVersion: Literal["infra.maslab.io/v1", "infra/v1"] = Field(
        description="infra.maslab.io/v1 (infra/v1 is accepted by the local tools)."
    )
    kind: Literal["Application"] = Field(description="The resource kind.")
    metadata: ObjectMeta
    spec: ApplicationSpec
    status: ApplicationStatus | None = None

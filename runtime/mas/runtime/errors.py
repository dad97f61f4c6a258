"""Errors of the agent runtime.

The tree::

    RuntimeFailure                 base of everything raised by mas.runtime
    ├── RegistryError              plugin registry problems
    │   ├── UnknownPlugin          no plugin of that name in the category (lists the known ones)
    │   ├── PluginLoadError        a plugin's code failed to import or is not callable
    │   └── PluginConfigError      the plugin refused its parameters
    ├── CommError                  an outbound send failed (becomes a tool error for the model)
    │   ├── PeerUnavailable        the peer cannot be reached (connection refused, DNS, closed)
    │   ├── PeerTimeout            no answer within the endpoint timeout
    │   └── PeerProtocolError      the peer answered something that is not the protocol
    ├── ModelError                 a model plugin failed during a generation (the turn ends failed)
    ├── MailboxError               the session turn mailbox refused a turn
    │   ├── MailboxFull            a session's queue (or the session table) is at its bound
    │   └── MailboxClosed          the mailbox is closed (the process is shutting down)
    ├── HistoryError               the conversation store cannot be read or written
    ├── HostError                  a runtime process cannot be built (unknown agent, missing env)
    ├── ControlError               the control endpoint: none advertised, bad token, refused request
    └── IdentityError              workload identity between agents (mas.runtime.identity)
        ├── TokenRejected          a caller's token is refused; ``reason`` says why
        └── KeysUnavailable        the issuer's discovery document or JWKS cannot be read
"""

from __future__ import annotations


class RuntimeFailure(Exception):
    """Base of the errors raised by ``mas.runtime``."""


class RegistryError(RuntimeFailure):
    """Base of the plugin registry's errors."""


class UnknownPlugin(RegistryError):
    """No plugin of that name in that category."""

    def __init__(self, category: str, name: str, known: list[str]) -> None:
        self.category, self.name, self.known = category, name, known
        super().__init__(
            f"no {category} plugin named {name!r}; known: {', '.join(known) or '(none)'}"
        )


class PluginLoadError(RegistryError):
    """A plugin's code could not be loaded; the message names the plugin and where it lives."""


class PluginConfigError(RegistryError):
    """A plugin refused the parameters it was given."""


class CommError(RuntimeFailure):
    """An outbound send failed; the message says which peer and why."""


class PeerUnavailable(CommError):
    """The peer cannot be reached."""


class PeerTimeout(CommError):
    """The peer did not answer within the timeout."""


class PeerProtocolError(CommError):
    """The peer's answer is not valid protocol."""


class ModelError(RuntimeFailure):
    """A model plugin failed during a generation; the turn ends ``failed`` with this message."""


class MailboxError(RuntimeFailure):
    """The session turn mailbox refused a turn."""


class MailboxFull(MailboxError):
    """A session's queue, or the number of sessions, is at its bound; retry later."""


class MailboxClosed(MailboxError):
    """The mailbox is closed; no turn is accepted any more."""


class HistoryError(RuntimeFailure):
    """The conversation store cannot be read or written; the message says which and why."""


class HostError(RuntimeFailure):
    """A runtime process cannot be built from the Application (the message says what to fix)."""


class ControlError(RuntimeFailure):
    """A control-endpoint problem: none advertised, a bad token, or a refused request."""


class IdentityError(RuntimeFailure):
    """Base of the errors of workload identity (:mod:`mas.runtime.identity`)."""


class TokenRejected(IdentityError):
    """A caller's token is refused: ``reason`` is one of :data:`TOKEN_REJECTIONS`."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


# Why a token is refused, as the 401 answer and the auth-denied metric name it.
TOKEN_REJECTIONS = (
    "malformed",
    "expired",
    "not_yet_valid",
    "wrong_audience",
    "wrong_issuer",
    "unknown_key",
    "bad_signature",
    "missing_claim",
)


class KeysUnavailable(IdentityError):
    """The issuer's keys cannot be read (not the caller's fault: retry later)."""

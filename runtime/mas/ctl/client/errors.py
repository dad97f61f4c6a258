"""The errors of ``mas-ctl``'s A2A client, each with the exit code it ends the command with.

::

    ClientError                 exit 1: the call failed (one line says what and what would work)
    ├── TargetError             exit 2: TARGET is no URL nor APP/AGENT
    ├── OptionError             exit 2: an option's value cannot be used (token file, header...)
    ├── AgentUnreachable        exit 1: connection refused, DNS, TLS, timeout
    ├── CardError               exit 1: the AgentCard is missing, not JSON, or not a card
    ├── TransportMissing        exit 1: the card offers none of the transports asked for
    ├── AuthRefused             exit 1: 401/403 (or gRPC UNAUTHENTICATED/PERMISSION_DENIED)
    └── UnknownTask             exit 1: the agent knows no task of that id

Every message is one line naming the thing (the URL, the option, the task id) and what would
work instead; no credential value ever appears in one.
"""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT_REQUIRED = 4
EXIT_INTERRUPTED = 130


class ClientError(Exception):
    """A client command failed; ``str(exc)`` is the one line to print."""

    exit_code = EXIT_FAILED


class TargetError(ClientError):
    """The TARGET argument is neither a URL nor ``APP/AGENT``."""

    exit_code = EXIT_USAGE


class OptionError(ClientError):
    """An option's value cannot be used."""

    exit_code = EXIT_USAGE


class AgentUnreachable(ClientError):
    """Nothing answered at the agent's address."""


class CardError(ClientError):
    """The AgentCard could not be read."""


class TransportMissing(ClientError):
    """The card offers none of the transports the client may use."""


class AuthRefused(ClientError):
    """The agent refused the credentials (or their absence)."""


class UnknownTask(ClientError):
    """The agent knows no task of the id given."""

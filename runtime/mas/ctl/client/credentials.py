"""The credentials a client command presents, from its options and the environment.

- ``-H 'Name: value'`` (repeatable): a header on every call (gRPC: call metadata, its name
  lowercased).
- ``--token-file PATH``: ``Authorization: Bearer <the file's content, stripped>``.
- ``--token-command CMD``: ``Authorization: Bearer <what CMD prints>``, run again when that
  token expires (:mod:`mas.ctl.client.token_command`), e.g. an OIDC provider's login tool.
- ``--cacert PATH``: the CA bundle (PEM) that https and gRPC over TLS trust instead of the
  system's.
- For a CI job, which has variables rather than files on a command line:
  ``MAS_CTL_TOKEN`` (a bearer token), ``MAS_CTL_TOKEN_FILE`` (a file holding one) and
  ``MAS_CTL_CACERT``. An option wins over a variable; any two of ``--token-file``,
  ``--token-command`` and an ``-H 'Authorization: ...'`` together are refused (one would
  silently lose).

Values are secrets: no error, log line or output ever shows one (an ``-H`` that cannot be
read is named by its position, not its text).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mas.ctl.client.errors import OptionError

if TYPE_CHECKING:
    from mas.ctl.client.token_command import TokenCommand

TOKEN_ENV = "MAS_CTL_TOKEN"
TOKEN_FILE_ENV = "MAS_CTL_TOKEN_FILE"
CACERT_ENV = "MAS_CTL_CACERT"
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")  # an RFC 9110 token


@dataclass(frozen=True)
class Credentials:
    """Headers for every call and the CA bundle for TLS (``None``: the system's)."""

    headers: Mapping[str, str] = field(default_factory=dict)
    cacert: Path | None = None
    token_command: TokenCommand | None = None  # the Authorization, when a command gives it

    def __repr__(self) -> str:  # never the values
        return (
            f"Credentials(headers={sorted(self.headers)}, cacert={self.cacert}, "
            f"token_command={self.token_command!r})"
        )

    @property
    def given(self) -> bool:
        """Whether any credential is presented."""
        return bool(self.headers) or self.token_command is not None

    def call_headers(self) -> dict[str, str]:
        """The headers of one call now (a token command's current token included)."""
        out = dict(self.headers)
        if self.token_command is not None:
            out["Authorization"] = f"Bearer {self.token_command.current()}"
        return out

    def ssl_context(self) -> ssl.SSLContext | bool:
        """What httpx verifies https with."""
        if self.cacert is None:
            return True
        try:
            return ssl.create_default_context(cafile=str(self.cacert))
        except (OSError, ssl.SSLError) as exc:
            raise OptionError(
                f"--cacert: {self.cacert} is not a readable PEM CA bundle ({_why(exc)}); "
                "accepted: a PEM file of CA certificates"
            ) from None

    def root_certificates(self) -> bytes | None:
        """What gRPC over TLS verifies with (``None``: the system's roots)."""
        if self.cacert is None:
            return None
        try:
            return self.cacert.read_bytes()
        except OSError as exc:
            raise OptionError(f"--cacert: cannot read {self.cacert} ({_why(exc)})") from None


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def parse_headers(values: Sequence[str]) -> dict[str, str]:
    """``-H 'Name: value'`` options as a mapping (a later one of the same name wins)."""
    headers: dict[str, str] = {}
    for index, text in enumerate(values, start=1):
        name, colon, value = text.partition(":")
        name, value = name.strip(), value.strip()
        where = f"-H #{index}"
        if not colon:
            raise OptionError(f"{where} has no ':'; accepted: -H 'Name: value'")
        if not _HEADER_NAME.match(name):
            raise OptionError(
                f"{where}: {name[:40]!r} is not a header name; accepted: letters, digits and "
                "!#$%&'*+.^_`|~- (e.g. X-API-Key)"
            )
        if not value or any(c in value for c in "\r\n\0"):
            raise OptionError(
                f"{where} ({name}): the value is empty or has a line break; accepted: "
                "-H 'Name: value' with a one-line value"
            )
        headers[name] = value
    return headers


def _token_from(path: Path, option: str) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionError(
            f"{option}: cannot read {path} ({_why(exc)}); accepted: a file holding the token"
        ) from None
    if not token or any(c in token for c in "\r\n\0"):
        raise OptionError(
            f"{option}: {path} is empty or holds more than one line; accepted: a file holding "
            "one bearer token"
        )
    return token


def resolve_credentials(
    headers: Sequence[str],
    token_file: str | None,
    cacert: str | None,
    environ: Mapping[str, str] | None = None,
    token_command: str | None = None,
) -> Credentials:
    """The credentials of one command (see the module docstring for the precedence)."""
    env = os.environ if environ is None else environ
    out = parse_headers(headers)
    authorization = next((n for n in out if n.lower() == "authorization"), None)
    ca = cacert if cacert is not None else env.get(CACERT_ENV) or None
    if token_command is not None:
        if token_file is not None or authorization is not None:
            given = "--token-file" if token_file is not None else "-H 'Authorization: ...'"
            raise OptionError(
                f"--token-command and {given} both set the Authorization header; give one of them"
            )
        from mas.ctl.client.token_command import TokenCommand

        return Credentials(out, Path(ca) if ca else None, TokenCommand(token_command))
    if token_file is not None:
        if authorization is not None:
            raise OptionError(
                "--token-file and -H 'Authorization: ...' both set the Authorization header; "
                "give one of them"
            )
        out["Authorization"] = f"Bearer {_token_from(Path(token_file), '--token-file')}"
    elif authorization is None:
        if env.get(TOKEN_FILE_ENV):
            token = _token_from(Path(env[TOKEN_FILE_ENV]), f"${TOKEN_FILE_ENV}")
            out["Authorization"] = f"Bearer {token}"
        elif env.get(TOKEN_ENV, "").strip():
            token = env[TOKEN_ENV].strip()
            if any(c in token for c in "\r\n\0"):
                raise OptionError(f"${TOKEN_ENV} has a line break; accepted: one bearer token")
            out["Authorization"] = f"Bearer {token}"
    return Credentials(out, Path(ca) if ca else None)

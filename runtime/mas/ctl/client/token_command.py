"""``--token-command CMD``: a bearer token printed by a command, run again when it expires.

Contract of :class:`TokenCommand`:

- the command line is split as a shell would (:func:`shlex.split`) and run without a shell;
  its standard output, stripped, is the token (one line). It runs at the first call and
  again once the token it gave is within ``margin`` seconds of its ``exp`` (read from the
  JWT's payload, unverified: the agent verifies it); a token that is not a JWT with an
  ``exp`` is kept for the whole command;
- a command that cannot run, exits non-zero, takes longer than ``timeout`` seconds or prints
  no single-line token is an :class:`~mas.ctl.client.errors.OptionError` naming the command's
  program and what went wrong; the token and the command's output are never shown;
- :class:`TokenAuth` puts ``Authorization: Bearer <token>`` on every HTTP request;
  :meth:`TokenCommand.current` gives it to gRPC calls as metadata.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import subprocess
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator

import httpx

from mas.ctl.client.errors import OptionError

DEFAULT_MARGIN = 30.0
DEFAULT_TIMEOUT = 60.0


class TokenCommand:
    """The token a command prints (see the module docstring)."""

    def __init__(
        self,
        command: str,
        *,
        margin: float = DEFAULT_MARGIN,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise OptionError(
                f"--token-command: cannot split the command line ({exc}); accepted: a command "
                "line as a shell would read it"
            ) from None
        if not self.argv:
            raise OptionError("--token-command is empty; accepted: a command printing a token")
        self.runs = 0
        self._margin, self._timeout, self._clock = margin, timeout, clock
        self._token: str | None = None
        self._expires_at: float | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the token
        return f"TokenCommand({self.argv[0]!r})"

    def current(self) -> str:
        """The token to send now, running the command when there is none or it expires."""
        with self._lock:
            if self._token is None or (
                self._expires_at is not None and self._clock() >= self._expires_at - self._margin
            ):
                self._token = self._run()
                self._expires_at = _expiry(self._token)
            return self._token

    def _run(self) -> str:
        program = self.argv[0]
        try:
            done = subprocess.run(  # the user's own command, without a shell
                self.argv, capture_output=True, timeout=self._timeout, check=False
            )
        except FileNotFoundError:
            raise OptionError(f"--token-command: {program!r} is not found") from None
        except subprocess.TimeoutExpired:
            raise OptionError(
                f"--token-command: {program!r} did not finish in {self._timeout:.0f} s"
            ) from None
        except OSError as exc:
            raise OptionError(f"--token-command: cannot run {program!r} ({exc.strerror})") from None
        self.runs += 1
        if done.returncode != 0:
            raise OptionError(
                f"--token-command: {program!r} exited with status {done.returncode}; "
                "accepted: a command that prints a token and exits 0"
            )
        token = done.stdout.decode("utf-8", "replace").strip()
        if not token or any(c in token for c in "\r\n\0"):
            raise OptionError(
                f"--token-command: {program!r} printed no token or more than one line; "
                "accepted: one bearer token on standard output"
            )
        return token


def _expiry(token: str) -> float | None:
    """The ``exp`` of a JWT's payload (unverified), else None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return float(exp)


class TokenAuth(httpx.Auth):
    """httpx auth: ``Authorization: Bearer`` from a :class:`TokenCommand` on each request."""

    def __init__(self, command: TokenCommand) -> None:
        self.command = command

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {self.command.current()}"
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers["Authorization"] = f"Bearer {self.command.current()}"
        yield request

"""The control endpoint: steer and cancel a serving process's sessions from another process.

:class:`ControlServer` listens on 127.0.0.1 (a free port) or on a Unix socket, never on
another address, and requires a random token. It advertises itself with one file per
hosted agent in the control directory, ``<agent>.<pid>.json`` (mode 0600, directory 0700):
``{"agent", "pid", "address", "token"}``, removed on close. The directory is
``$MAS_CONTROL_DIR``, else ``$XDG_STATE_HOME/maslab/control``, else
``~/.local/state/maslab/control``.

Wire protocol: one JSON object per line each way. A request carries ``token`` and ``op``:

- ``{"op": "ping"}`` -> ``{"ok": true, "pid", "agents"}``;
- ``{"op": "steer", "agent", "session", "text", "mode", "follow"?, "timeout"?}`` ->
  ``{"ok": true, "applied", "turn_id"}``, plus ``status``/``text``/``message`` of the
  steered turn when ``follow`` is true (waiting at most ``timeout`` seconds);
- ``{"op": "cancel", "agent", "session"}`` -> ``{"ok": true, "canceled": bool}``.

A bad request gets ``{"ok": false, "error": "..."}`` naming the field, the value and what
is accepted; a bad token closes the connection after the error. A request line is at most
``MAX_LINE`` bytes; a connection that sends no complete line for ``idle_timeout`` seconds
(default 30) is closed, so is one that reads none of a reply for as long (its buffered
output is then dropped: at most the transport's 64 KiB and one reply), and past
``max_connections`` open ones (default 32) a new one gets an error and is closed. The
server never crashes
on input. :class:`ControlClient` speaks the protocol; :func:`list_endpoints` reads the
directory and deletes the files of processes that are gone.

A request line is strict JSON (:func:`read_request`): ``NaN``, ``Infinity``, a number that
overflows a float, an integer past Python's digit limit and nesting too deep to parse each
get an error reply, and a token of any characters that is not this server's is refused as
an invalid token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mas.runtime.boundary.control import STEER_MODES, ControlContract
from mas.runtime.errors import ControlError

logger = logging.getLogger(__name__)

MAX_LINE = 64 * 1024
IDLE_TIMEOUT = 30.0
MAX_CONNECTIONS = 32
DEFAULT_FOLLOW_TIMEOUT = 300.0


def control_directory(env: Mapping[str, str] | None = None) -> Path:
    """Where control endpoints are advertised."""
    env = os.environ if env is None else env
    if env.get("MAS_CONTROL_DIR"):
        return Path(env["MAS_CONTROL_DIR"])
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "maslab" / "control"


@dataclass(frozen=True)
class ControlEndpoint:
    """One advertised endpoint (one file of the control directory)."""

    agent: str
    pid: int
    address: str
    token: str
    path: Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_endpoints(directory: Path | None = None) -> list[ControlEndpoint]:
    """Every live advertised endpoint, by agent; files of gone processes are deleted."""
    directory = directory or control_directory()
    out: list[ControlEndpoint] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            endpoint = ControlEndpoint(
                str(raw["agent"]), int(raw["pid"]), str(raw["address"]), str(raw["token"]), path
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring unreadable control file %s: %s", path, exc)
            continue
        if not _alive(endpoint.pid):
            logger.info("dropping stale control file %s (pid %d is gone)", path, endpoint.pid)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        out.append(endpoint)
    return sorted(out, key=lambda e: (e.agent, e.pid))


def _write_private(path: Path, content: str) -> None:
    """Write ``content`` to ``path`` with mode 0600, atomically."""
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, content.encode())
    finally:
        os.close(fd)
    os.replace(temporary, path)


class ControlServer:
    """Serves steer/cancel for ``mailboxes`` (agent id -> its control contract)."""

    def __init__(
        self,
        mailboxes: Mapping[str, ControlContract],
        *,
        directory: Path | None = None,
        unix_socket: Path | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if not mailboxes:
            raise ControlError("a control server needs at least one agent")
        self._mailboxes = dict(mailboxes)
        self._directory = directory
        self._unix_socket = unix_socket
        self._token = secrets.token_urlsafe(32)
        self._server: asyncio.Server | None = None
        self._files: list[Path] = []
        self._connections: set[asyncio.Task[Any]] = set()
        self._idle_timeout = idle_timeout
        self._max_connections = max_connections
        self.address = ""

    @property
    def token(self) -> str:
        """The token a client must send."""
        return self._token

    async def start(self) -> None:
        """Listen, then advertise one file per agent."""
        if self._unix_socket is not None:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self._unix_socket), limit=MAX_LINE
            )
            os.chmod(self._unix_socket, 0o600)
            self.address = f"unix://{self._unix_socket}"
        else:
            self._server = await asyncio.start_server(
                self._serve, host="127.0.0.1", port=0, limit=MAX_LINE
            )
            port = self._server.sockets[0].getsockname()[1]
            self.address = f"tcp://127.0.0.1:{port}"
        directory = self._directory or control_directory()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        pid = os.getpid()
        for agent in self._mailboxes:
            path = directory / f"{agent}.{pid}.json"
            record = {"agent": agent, "pid": pid, "address": self.address, "token": self._token}
            _write_private(path, json.dumps(record))
            self._files.append(path)
        logger.info("control endpoint %s for %s", self.address, ", ".join(self._mailboxes))

    async def __aenter__(self) -> ControlServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening and remove the advertised files."""
        for path in self._files:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._files.clear()
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        if self._unix_socket is not None:
            with contextlib.suppress(FileNotFoundError):
                self._unix_socket.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            if len(self._connections) > self._max_connections:
                await _send(
                    writer,
                    {"ok": False, "error": f"more than {self._max_connections} connections"},
                    self._idle_timeout,
                )
                return
            while True:
                try:
                    async with asyncio.timeout(self._idle_timeout):
                        line = await reader.readuntil(b"\n")
                except (asyncio.IncompleteReadError, TimeoutError):
                    return
                except asyncio.LimitOverrunError:
                    await _send(
                        writer,
                        {"ok": False, "error": f"request longer than {MAX_LINE} bytes"},
                        self._idle_timeout,
                    )
                    return
                reply, keep_open = await self._answer(line)
                await _send(writer, reply, self._idle_timeout)
                if not keep_open:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        except TimeoutError:  # a reply not read: drop what is buffered
            writer.transport.abort()
            return
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> tuple[dict[str, Any], bool]:
        try:
            request = read_request(line)
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}, True
        token = request.get("token")
        # compare_digest takes str only when it is ASCII: compare the UTF-8 bytes.
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self._token.encode()
        ):
            return {"ok": False, "error": "invalid or missing token"}, False
        try:
            return await self._dispatch(request), True
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}, True

    async def _dispatch(self, request: Mapping[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "agents": list(self._mailboxes)}
        if op not in ("steer", "cancel"):
            raise ControlError(f"op {op!r} is not accepted; accepted: ping, steer, cancel")
        agent = request.get("agent")
        mailbox = self._mailboxes.get(agent) if isinstance(agent, str) else None
        if mailbox is None:
            raise ControlError(
                f"agent {agent!r} is not served here; agents: {', '.join(self._mailboxes)}"
            )
        session = _text(request, "session")
        if op == "cancel":
            return {"ok": True, "canceled": await mailbox.cancel_inflight(session)}
        text = _text(request, "text")
        mode = request.get("mode")
        if mode not in STEER_MODES:
            raise ControlError(f"mode {mode!r} is not accepted; accepted: {', '.join(STEER_MODES)}")
        timeout = _follow_timeout(request)  # checked before the steer: a refusal changes nothing
        receipt = await mailbox.steer(session, text, mode)
        reply: dict[str, Any] = {"ok": True, "applied": receipt.applied, "turn_id": receipt.turn_id}
        if timeout is not None:
            try:
                ended = await asyncio.wait_for(asyncio.shield(receipt.result), timeout)
            except TimeoutError:
                raise ControlError(
                    f"the steered turn {receipt.turn_id!r} did not end within {timeout} s"
                ) from None
            reply.update(status=ended.status, text=ended.text, message=ended.message)
        return reply


def _follow_timeout(request: Mapping[str, Any]) -> float | None:
    """The seconds to wait for the steered turn's end; ``None`` without ``follow``."""
    follow = request.get("follow", False)
    if not isinstance(follow, bool):
        raise ControlError(f"follow {follow!r} is not accepted; true or false")
    if not follow:
        return None
    timeout = request.get("timeout", DEFAULT_FOLLOW_TIMEOUT)
    seconds = math.nan
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        with contextlib.suppress(OverflowError):  # an integer past a float's range
            seconds = float(timeout)
    if not 0 < seconds < math.inf:
        shown = repr(timeout) if len(repr(timeout)) <= 32 else f"{repr(timeout)[:24]}..."
        raise ControlError(f"timeout {shown} is not accepted; a finite number of seconds above 0")
    return seconds


def _refuse_constant(name: str) -> Any:
    raise ControlError(f"{name} is not a JSON number; send a finite number")


def read_request(line: bytes) -> dict[str, Any]:
    """The JSON object of one request line; :class:`ControlError` naming what is wrong.

    Strict JSON: ``NaN``/``Infinity`` and numbers that overflow a float are refused, as are
    integers past Python's digit limit and nesting too deep to parse.
    """
    try:
        request = json.loads(line, parse_constant=_refuse_constant, parse_float=_finite)
    except ControlError:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ControlError("the request is not a JSON object") from None
    except RecursionError:
        raise ControlError("the request is nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise ControlError(f"the request holds a number that cannot be read: {exc}") from None
    if not isinstance(request, dict):
        raise ControlError("the request is not a JSON object")
    return request


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ControlError(f"{text[:32]} overflows a float; send a finite number")
    return value


def _text(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value:
        raise ControlError(f"{key} {value!r} is not accepted; a non-empty string")
    return value


async def _send(
    writer: asyncio.StreamWriter, payload: Mapping[str, Any], timeout: float | None = None
) -> None:
    """Write one line; ``TimeoutError`` when the peer reads too little of it in ``timeout``."""
    writer.write(json.dumps(payload).encode() + b"\n")
    async with asyncio.timeout(timeout):
        await writer.drain()


class ControlClient:
    """Talks to one advertised control endpoint."""

    def __init__(self, endpoint: ControlEndpoint) -> None:
        self.endpoint = endpoint

    @classmethod
    def from_directory(
        cls, agent_id: str, *, directory: Path | None = None, pid: int | None = None
    ) -> ControlClient:
        """The client of the live endpoint serving ``agent_id`` (in process ``pid``)."""
        found = [
            e
            for e in list_endpoints(directory)
            if e.agent == agent_id and (pid is None or e.pid == pid)
        ]
        if not found and pid is not None:
            where = directory or control_directory()
            raise ControlError(
                f"--pid {pid}: no running process with that pid advertises a control endpoint "
                f"for agent {agent_id!r} in {where} (mas-ctl ps lists them)"
            )
        if not found:
            where = directory or control_directory()
            raise ControlError(
                f"no running process advertises a control endpoint for agent {agent_id!r} "
                f"in {where} (start it with mas-ctl serve, run-mas, chat or tui, without "
                "--no-control)"
            )
        if len(found) > 1:
            pids = ", ".join(str(e.pid) for e in found)
            raise ControlError(
                f"several processes serve agent {agent_id!r} (pids {pids}); choose one with --pid"
            )
        return cls(found[0])

    async def request(self, payload: Mapping[str, Any], *, timeout: float = 30.0) -> dict[str, Any]:
        """Send one request; a refused one raises :class:`ControlError` with its message."""
        address = self.endpoint.address
        try:
            async with asyncio.timeout(timeout):
                if address.startswith("unix://"):
                    reader, writer = await asyncio.open_unix_connection(address[len("unix://") :])
                else:
                    host, _, port = address.removeprefix("tcp://").rpartition(":")
                    reader, writer = await asyncio.open_connection(host, int(port))
                try:
                    await _send(writer, {**payload, "token": self.endpoint.token})
                    line = await reader.readline()
                finally:
                    writer.close()
                    with contextlib.suppress(ConnectionError):
                        await writer.wait_closed()
        except (OSError, ValueError) as exc:
            raise ControlError(
                f"the control endpoint of agent {self.endpoint.agent!r} at {address} does not "
                f"answer ({exc})"
            ) from None
        except TimeoutError:
            raise ControlError(f"the control endpoint at {address} timed out") from None
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise ControlError(f"the control endpoint at {address} answered garbage") from None
        if not isinstance(reply, dict) or not reply.get("ok"):
            error = reply.get("error") if isinstance(reply, dict) else reply
            raise ControlError(f"agent {self.endpoint.agent!r}: {error}")
        return reply

    async def steer(
        self,
        session: str,
        text: str,
        mode: str,
        *,
        follow: bool = False,
        timeout: float = DEFAULT_FOLLOW_TIMEOUT,
    ) -> dict[str, Any]:
        """Steer ``session``; with ``follow``, wait for the steered turn's end too."""
        payload = {
            "op": "steer",
            "agent": self.endpoint.agent,
            "session": session,
            "text": text,
            "mode": mode,
            "follow": follow,
            "timeout": timeout,
        }
        return await self.request(payload, timeout=timeout + 5 if follow else 30.0)

    async def cancel(self, session: str) -> bool:
        """``cancel_inflight`` on ``session``; whether a turn was running."""
        reply = await self.request(
            {"op": "cancel", "agent": self.endpoint.agent, "session": session}
        )
        return bool(reply.get("canceled"))

    async def ping(self) -> dict[str, Any]:
        """The serving process's pid and agents."""
        return await self.request({"op": "ping"})

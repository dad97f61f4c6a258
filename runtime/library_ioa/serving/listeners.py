"""The two listeners of an exposure: an HTTP app on uvicorn and a ``grpc.aio`` server.

:class:`HttpListener` binds its socket itself, so a port in use is a clear
:class:`ListenError` (uvicorn would log and ``sys.exit``), port 0 works, and the bound port
is known before the first request. It never installs signal handlers: the process that
hosts it (``mas-ctl serve``, a test) owns signals. Every HTTP listener (A2A with its
probes, metrics, a test's receiver) enforces its ``HttpLimits`` (``serving/http_guard.py``):
request-head size and count (431), head and body time (408), a response the client does
not read (send time), keep-alive idle time and open connections, in all and per client
(503). The gRPC listener enforces its ``GrpcLimits`` (``serving/grpc_guard.py``): open
connections, handshake and idle time. :func:`raise_open_file_limit` lets a serving process
use every file descriptor it is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
from collections.abc import Callable, Generator

import uvicorn
from starlette.types import ASGIApp

from library_ioa.errors import LibraryError
from library_ioa.serving.http_guard import (
    DEFAULT_HTTP_LIMITS,
    HttpLimits,
    uvicorn_options,
)

logger = logging.getLogger(__name__)

START_TIMEOUT = 15.0
OPEN_FILES_CEILING = 1024 * 1024  # the soft limit asked for when the hard one is unlimited


def raise_open_file_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; the soft limit before
    and after. A container's soft limit is often 1024 with a far higher hard one: the
    listeners' caps (512 HTTP + 512 gRPC per agent, and the outgoing connections) need
    more. Failing to raise it is logged, never fatal."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (OSError, ValueError) as exc:
            logger.warning("cannot raise the open-files limit from %d to %d: %s", soft, wanted, exc)
            return soft, soft
        logger.info("open-files limit raised from %d to %d", soft, wanted)
        return soft, wanted
    return soft, soft


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (the ``uvloop`` dependency), else ``None`` (asyncio's).

    For ``asyncio.Runner(loop_factory=...)`` in a process that serves; uvicorn picks
    httptools by itself when it is installed.
    """
    try:
        import uvloop
    except ImportError:
        logger.debug("uvloop is not installed; serving on asyncio's own event loop")
        return None
    return uvloop.new_event_loop


class ListenError(LibraryError, OSError):
    """A listener could not bind or start; the message names the address."""


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: the OS picks one)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {host}:{port}: unknown host ({exc})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


class HttpListener:
    """One ASGI app served by uvicorn on one socket."""

    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        *,
        graceful_timeout: float = 10.0,
        limits: HttpLimits = DEFAULT_HTTP_LIMITS,
    ) -> None:
        self.host = host
        self.limits = limits
        self.requested_port = port
        self._app = app
        self._graceful = graceful_timeout
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        if self._socket is None:
            raise RuntimeError("the listener is not started")
        return int(self._socket.getsockname()[1])

    @property
    def open_connections(self) -> int:
        """How many connections are open now (refused ones until they are closed)."""
        if self._server is None:
            return 0
        return len(self._server.server_state.connections)

    async def start(self) -> None:
        """Bind and serve; returns once uvicorn accepts connections."""
        self._socket = bind_socket(self.host, self.requested_port)
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=max(1, round(self._graceful)),
            **uvicorn_options(self.limits),
        )
        self._server = _QuietServer(config)
        self._task = asyncio.create_task(
            self._server.serve(sockets=[self._socket]), name=f"uvicorn:{self.host}:{self.port}"
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while not self._server.started:
            if self._task.done():
                await self._task
                raise ListenError(f"cannot serve on {self.host}:{self.port}: uvicorn stopped")
            if loop.time() > deadline:
                raise ListenError(f"cannot serve on {self.host}:{self.port}: start timed out")
            await asyncio.sleep(0.01)

    def stop_accepting(self) -> None:
        """No new connections; in-flight requests go on. uvicorn's graceful shutdown (and its
        clock) starts only at :meth:`aclose`, so a drain that ends the open streams first
        never races it into cancelling them."""
        if self._server is not None:
            for server in getattr(self._server, "servers", ()):
                server.close()

    async def aclose(self) -> None:
        """Stop and wait (bounded by the graceful timeout, then forced)."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self._graceful + 2)
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = None

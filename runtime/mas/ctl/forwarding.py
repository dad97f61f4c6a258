"""Local loopback listeners that carry each connection to a remote port over a stream of its own.

:class:`Forwarder` binds one listener on ``127.0.0.1`` (an ephemeral port) per remote port.
Each accepted connection asks ``open_stream(port)`` for a connected stream socket to that
remote port (a blocking call, run in a worker thread: for :mod:`mas.ctl.cluster` it opens a
port-forward stream through the API server, as ``kubectl port-forward`` does), then copies
bytes both ways until both have ended. A stream that cannot be opened closes the local
connection and logs one line; it never stops the listener.

Rules:

- one stream per connection: connections never share one, so one slow download does not
  hold up another request;
- :meth:`Forwarder.close` stops listening, cancels every connection still open and closes
  its sockets; it is idempotent;
- a stream is ended gracefully, never closed under the remote's feet: this side half-closes
  it, reads (and drops) whatever the remote still sends until the remote closes its end, and
  only then closes; after :data:`STREAM_GRACE` seconds it closes anyway. The remote end of a
  Kubernetes port-forward is the client library's proxy thread writing into a socket pair: a
  write after this end closed fails in that thread with a broken pipe (a traceback on the
  user's terminal), and it closes its end as soon as it reads this end's end of stream;
- nothing here knows about Kubernetes: ``open_stream`` is the whole contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
CHUNK = 64 * 1024
STREAM_GRACE = 3.0  # seconds a half-closed stream gets to close its end before this one does

# A connected stream socket to the remote ``port``; raises OSError (or anything) when it cannot.
OpenStream = Callable[[int], socket.socket]


class Forwarder:
    """Loopback listeners for remote ports; see the module docstring for the rules."""

    def __init__(self, open_stream: OpenStream, what: str) -> None:
        self._open = open_stream
        self._what = what  # names the remote side in log lines (e.g. "pod ns/name")
        self._servers: list[asyncio.Server] = []
        self._connections: dict[asyncio.Task[Any], asyncio.Task[None]] = {}  # handler: copying
        self._local: dict[int, int] = {}

    @property
    def local_ports(self) -> Mapping[int, int]:
        """Remote port -> the local port that reaches it."""
        return dict(self._local)

    async def start(self, ports: Sequence[int]) -> Mapping[int, int]:
        """Listen for each remote port in ``ports``; return remote port -> local port."""
        try:
            for port in dict.fromkeys(ports):
                server = await asyncio.start_server(self._acceptor(port), LOOPBACK, 0)
                self._servers.append(server)
                self._local[port] = server.sockets[0].getsockname()[1]
        except BaseException:
            await self.close()
            raise
        return self.local_ports

    async def close(self) -> None:
        """Stop listening and end every open connection."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        connections = dict(self._connections)
        for carrying in connections.values():
            carrying.cancel()
        if connections:  # the handlers end on their own once their copying is cancelled
            await asyncio.wait(connections)
        for server in servers:
            await server.wait_closed()

    def _acceptor(
        self, port: int
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept(port, reader, writer)

        return accept

    async def _accept(
        self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        # The copying runs in a task of its own, which close() cancels: the handler task
        # asyncio made for the connection ends normally (one that is cancelled has its
        # CancelledError logged by the streams' done callback as an error, on Python 3.11).
        handler = asyncio.current_task()
        assert handler is not None
        carrying = asyncio.create_task(self._carry(port, reader, writer))
        self._connections[handler] = carrying
        try:
            await asyncio.wait([carrying])
            if not carrying.cancelled() and carrying.exception() is not None:
                logger.warning(
                    "forwarding a connection to %s port %d failed: %s",
                    self._what,
                    port,
                    carrying.exception(),
                )
        finally:
            carrying.cancel()
            del self._connections[handler]
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _carry(
        self, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            stream = await asyncio.to_thread(self._open, port)
        except Exception as exc:
            logger.warning("cannot forward a connection to %s port %d: %s", self._what, port, exc)
            return
        try:
            remote_reader, remote_writer = await asyncio.open_connection(sock=stream)
        except BaseException:
            stream.close()
            raise
        try:
            await asyncio.gather(copy(reader, remote_writer), copy(remote_reader, writer))
        finally:
            await end_stream(remote_reader, remote_writer)


async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until end of stream, then half-close ``writer``.

    A reader that fails (its peer reset the connection) has ended; a writer that fails is gone,
    and is closed, which ends the other direction of its connection too.
    """
    while True:
        try:
            data = await reader.read(CHUNK)
        except (ConnectionError, OSError):
            data = b""
        try:
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
        except (ConnectionError, OSError):
            writer.close()
            return


async def end_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """End a remote stream: half-close it, drop what it still sends until it closes, close it."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        async with asyncio.timeout(STREAM_GRACE):
            while await reader.read(CHUNK):
                pass
    except (ConnectionError, OSError, TimeoutError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()

"""Running one client command: connect, run its body, turn every failure into one line.

:func:`run_client` is what each client command's handler calls: it reads the credentials,
opens the connection (:func:`~mas.ctl.client.connection.connect`) and runs ``body`` with it
on a fresh event loop. A :class:`~mas.ctl.client.errors.ClientError` from anywhere in that
becomes ``error: <its line>`` on stderr and its exit code.

:func:`interruptible` runs a coroutine until it ends or Ctrl-C (SIGINT) arrives; on Ctrl-C
the coroutine is cancelled and ``on_interrupt`` runs (``ask`` and ``chat`` send
``CancelTask`` there), and the command exits 130.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from mas.ctl.client.connection import Connection, connect
from mas.ctl.client.errors import EXIT_INTERRUPTED, ClientError
from mas.ctl.client.options import credentials_of

T = TypeVar("T")


class Interrupted(Exception):
    """Ctrl-C arrived while :func:`interruptible` ran its coroutine."""


def run_client(args: argparse.Namespace, body: Callable[[Connection], Awaitable[int]]) -> int:
    """Run ``body`` on a connection to ``args.target``; the command's exit code."""
    try:
        return asyncio.run(_connected(args, body))
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Interrupted:
        return EXIT_INTERRUPTED


async def _connected(args: argparse.Namespace, body: Callable[[Connection], Awaitable[int]]) -> int:
    credentials = credentials_of(args)
    async with connect(args, credentials) as conn:
        return await body(conn)


async def interruptible(
    work: Coroutine[Any, Any, T], on_interrupt: Callable[[], Awaitable[None]]
) -> T:
    """``work``'s result; on SIGINT, ``work`` is cancelled, ``on_interrupt`` awaited, and
    :class:`Interrupted` raised."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(work)
    hit = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, hit.set)
    waiter = loop.create_task(hit.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        waiter.cancel()
        finished = task.done()
        if not finished:
            task.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
    if finished:
        return task.result()
    await asyncio.gather(task, return_exceptions=True)
    await on_interrupt()
    raise Interrupted

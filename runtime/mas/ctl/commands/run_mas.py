"""``mas-ctl run-mas``: run a whole agency in this process, one turn or until a signal.

::

    mas-ctl run-mas -f app.yaml [-m TEXT] [--session S] [--no-control] [--listen HOST]
                    [--drain-timeout S] [--infra-ref FILE] [--override ...] [--bind ...]

The entry agent is always in-process; every hosted agent whose endpoint is deployed binds
its A2A listener here (no gRPC: only ``mas-ctl serve`` starts it); ``usage: use`` peers
(``--bind`` rows too) are client routes. What is up goes to stderr, one line each, ending
with a ``ready:`` line.

- With ``-m TEXT``: one turn on the entry agent; its text streams to stdout; delegations,
  steers and cancels are ``· `` lines on stderr. The turns still running when it ends (a
  steer ``wait`` queued meanwhile, A2A requests) get ``--drain-timeout`` seconds. Exit 0
  when the turn completed; 1 with one ``error:`` line when it failed, was canceled or asks
  for human input (there is no human: use ``mas-ctl chat``).
- Without ``-m``: serve until SIGINT or SIGTERM, then stop accepting, drain, exit 0.

SIGINT or SIGTERM during a ``-m`` turn interrupts it (exit 130).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from mas.ctl.documents import add_document_options, load_wired
from mas.ctl.session.modes import (
    SessionProcess,
    Signals,
    add_session_options,
    new_session_id,
    session_process,
)
from mas.ctl.session.transcript import ConsoleTranscript
from mas.infra.wiring import Wired
from mas.runtime.turns import TurnEnded

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "run-mas",
        help="run the whole agency in this process (one turn with -m, else until a signal)",
    )
    add_document_options(parser)
    parser.add_argument(
        "-m", "--message", metavar="TEXT", default=None, help="run one turn on the entry agent"
    )
    add_session_options(parser)
    parser.set_defaults(handler=handle)


def info(line: str) -> None:
    """One line on stderr."""
    print(line, file=sys.stderr, flush=True)


async def run(wired: Wired, args: argparse.Namespace) -> int:
    """Start the process, then one turn or serve until a signal."""
    process = session_process(wired, args)
    await process.start()
    try:
        transcript = ConsoleTranscript(sys.stdout, sys.stderr)
        process.hub.subscribe(transcript.activity)
        for line in process.describe():
            info(line)
        if args.message is None:
            return await _serve(process)
        return await _one_turn(process, transcript, args)
    finally:
        await process.aclose(drain=False)


async def _serve(process: SessionProcess) -> int:
    stop = asyncio.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    with Signals(on_signal):
        info("ready: serving until SIGINT or SIGTERM")
        await stop.wait()
    info(f"{signal.Signals(received[0]).name} received: stopping")
    if process.listeners is not None:
        process.listeners.stop_accepting()
    if not await process.drain(process.drain_timeout):
        info("warning: turns still running after --drain-timeout were canceled")
    return EXIT_OK


async def _one_turn(
    process: SessionProcess, transcript: ConsoleTranscript, args: argparse.Namespace
) -> int:
    session = args.session or new_session_id("run")
    interrupted: list[int] = []
    cancels: set[asyncio.Task[bool]] = set()

    def on_signal(signum: int) -> None:
        interrupted.append(signum)
        task = asyncio.get_running_loop().create_task(process.cancel(session))
        cancels.add(task)
        task.add_done_callback(cancels.discard)

    ended = TurnEnded("canceled", message="the turn did not end")
    with Signals(on_signal):
        info(f"ready: session {session} on {process.entry}")
        ticket = process.submit(session, args.message)
        transcript.begin(process.entry)
        async for event in ticket.events():
            transcript.event(event)
            if isinstance(event, TurnEnded):
                ended = event
        if not interrupted and not await process.drain(process.drain_timeout):
            info("warning: turns still running after --drain-timeout were canceled")
    if interrupted:
        info(f"interrupted: the turn of session {session} was canceled")
        return EXIT_INTERRUPTED
    return _exit_code(process.entry, session, ended)


def _exit_code(agent: str, session: str, ended: TurnEnded) -> int:
    if ended.status == "completed":
        return EXIT_OK
    if ended.status == "input_required":
        info(
            f"error: agent {agent!r} asks for human input in session {session}: "
            f"{ended.text!r}; run-mas -m has no human to answer (use mas-ctl chat)"
        )
    else:
        info(f"error: the turn of agent {agent!r} {ended.status}: {ended.message or ended.text}")
    return EXIT_FAILED


def handle(args: argparse.Namespace) -> int:
    """Wire the document, then run."""
    if args.message is not None and not args.message.strip():
        info("error: -m: the message is empty; accepted: any non-empty text")
        return 2
    wired = load_wired(args)
    return asyncio.run(run(wired, args))

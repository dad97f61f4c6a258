"""``mas-ctl chat``: talk to the entry agent on stdin/stdout while the agency serves.

::

    mas-ctl chat -f app.yaml [--session S] [--no-control] [--listen HOST]
                 [--drain-timeout S] [--infra-ref FILE] [--override ...] [--bind ...]
    mas-ctl chat TARGET [--context ID] [--save DIR] [connection and credential options]

With a TARGET instead of ``-f`` (an agent's URL, or ``APP/AGENT`` in a cluster) the chat
talks to that agent over A2A (:mod:`mas.ctl.client.remote_chat`); the rest of this
docstring is the local form.

The in-process entry agent owns the conversation: each line typed at ``you> `` is one turn
of the chat's session, and the agent's text streams on a ``<agent>> `` line as it arrives.
Meanwhile the deployed endpoints are bound in the background (the same hosting as
``run-mas``), so other clients can interrogate the agents over A2A, and ``mas-ctl steer`` /
``cancel`` reach the session over the control endpoint. ``· `` lines show which agent is
working (delegations as they start and end), steers and cancels.

When the agent asks for human input (``input_required``) the question is shown
(``<agent> asks: ...``), the prompt becomes ``answer> `` and the line typed there resumes
the session.

``Ctrl-C`` interrupts a running turn (``cancel_inflight``); at the prompt it ends the chat,
as do ``Ctrl-D``, ``/quit`` and SIGTERM. Lines typed while a turn runs are queued.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from mas.ctl.client.options import add_client_options, add_context_option, remote_form
from mas.ctl.documents import add_document_options, load_wired
from mas.ctl.session.modes import (
    SessionProcess,
    Signals,
    add_session_options,
    new_session_id,
    session_process,
)
from mas.ctl.session.stdin_lines import ANSWER_PROMPT, PROMPT, QUIT_WORDS, StdinLines, next_line
from mas.ctl.session.transcript import ConsoleTranscript
from mas.infra.wiring import Wired
from mas.runtime.turns import TurnEnded


def register(sub: Any) -> None:
    """Add the subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "chat",
        help="talk to the entry agent on stdin/stdout (deployed agents serve meanwhile), or "
        "to a served agent (TARGET)",
    )
    add_document_options(parser, required=False)
    add_session_options(parser)
    add_client_options(parser, optional_target=True)
    add_context_option(parser)
    parser.add_argument(
        "--save", type=Path, default=None, metavar="DIR", help="write file artifacts under DIR"
    )
    parser.set_defaults(handler=handle)


async def chat(wired: Wired, args: argparse.Namespace) -> int:
    """Run the conversation until end of input, ``/quit`` or a signal."""
    process = session_process(wired, args)
    await process.start()
    try:
        out = sys.stdout
        transcript = ConsoleTranscript(out, out, prefix_turns=True)
        process.hub.subscribe(transcript.activity)
        session = args.session or new_session_id("chat")
        for line in process.describe():
            transcript.note(line)
        transcript.note(
            f"chat with {process.entry}, session {session}; Ctrl-D or /quit ends, Ctrl-C "
            "interrupts a running turn"
        )
        return await _converse(process, transcript, session)
    finally:
        await process.aclose(drain=False)


async def _converse(process: SessionProcess, transcript: ConsoleTranscript, session: str) -> int:
    lines = StdinLines()
    stop = asyncio.Event()
    running: list[bool] = [False]
    cancels: set[asyncio.Task[bool]] = set()

    def on_signal(_: int) -> None:
        if running[0]:
            task = asyncio.get_running_loop().create_task(process.cancel(session))
            cancels.add(task)
            task.add_done_callback(cancels.discard)
        else:
            stop.set()

    prompt = PROMPT
    with Signals(on_signal):
        while not stop.is_set():
            transcript.idle_prompt = prompt
            sys.stdout.write(prompt)
            sys.stdout.flush()
            line = await next_line(lines, stop)
            if line is None or line.strip() in QUIT_WORDS:
                break
            if not line.strip():
                continue
            transcript.idle_prompt = None
            running[0] = True
            try:
                ended = await _turn(process, transcript, session, line)
            finally:
                running[0] = False
            if ended.status == "input_required":
                transcript.note(f"{process.entry} asks: {ended.text}")
                prompt = ANSWER_PROMPT
            else:
                prompt = PROMPT
    transcript.idle_prompt = None
    sys.stdout.write("\n")
    transcript.note("chat ended")
    return 0


async def _turn(
    process: SessionProcess, transcript: ConsoleTranscript, session: str, text: str
) -> TurnEnded:
    ticket = process.submit(session, text)
    transcript.begin(process.entry)
    ended = TurnEnded("canceled", message="the turn did not end")
    async for event in ticket.events():
        transcript.event(event)
        if isinstance(event, TurnEnded):
            ended = event
    return ended


def handle(args: argparse.Namespace) -> int:
    """Wire the document, then chat; with a TARGET, chat with that agent instead."""
    problem = remote_form(args, "chat")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.target is not None:
        from mas.ctl.client.remote_chat import remote_chat
        from mas.ctl.client.running import run_client

        return run_client(args, lambda conn: remote_chat(conn, args))
    wired = load_wired(args)
    return asyncio.run(chat(wired, args))

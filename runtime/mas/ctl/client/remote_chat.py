"""``mas-ctl chat TARGET``: today's chat, with an agent served anywhere.

The same console as the local chat (:class:`~mas.ctl.session.transcript.ConsoleTranscript`):
each line typed at ``you> `` is one turn in one A2A context, the agent's text streams on an
``<agent>> `` line, delegations and tool calls it reports show as ``· `` lines, artifacts as
``· artifact`` lines (files written under ``--save DIR``). A question (``input-required``)
makes the prompt ``answer> `` and the next line answers it. ``--context ID`` resumes a
conversation (a question it left open is asked again). ``Ctrl-C`` cancels the running turn
(``CancelTask``); at the prompt it ends the chat, as do ``Ctrl-D``, ``/quit`` and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from pathlib import Path

from mas.ctl.client.connection import Connection
from mas.ctl.client.conversation import RemoteConversation
from mas.ctl.client.errors import ClientError
from mas.ctl.client.output import one_line, save_file, terminal_text
from mas.ctl.client.turn_output import reported_line
from mas.ctl.session.modes import Signals
from mas.ctl.session.stdin_lines import ANSWER_PROMPT, PROMPT, QUIT_WORDS, StdinLines, next_line
from mas.ctl.session.transcript import ConsoleTranscript
from mas.runtime.turns import ArtifactEmitted, Delegated, TextDelta, TurnEnded, TurnEvent


async def remote_chat(conn: Connection, args: argparse.Namespace) -> int:
    """Converse until end of input, ``/quit`` or a signal."""
    talk = RemoteConversation(conn, args.context_id)
    name = one_line(conn.name, 60)
    out = sys.stdout
    transcript = ConsoleTranscript(out, out, prefix_turns=True)
    transcript.note(
        f"chat with {name} at {conn.url} ({conn.binding}), context {talk.context_id}; "
        "Ctrl-D or /quit ends, Ctrl-C cancels a running turn"
    )
    prompt = PROMPT
    if await talk.resume():
        transcript.note(f"{name} waits for an answer (task {talk.waiting})")
        prompt = ANSWER_PROMPT
    lines = StdinLines()
    stop = asyncio.Event()
    running: list[asyncio.Task[TurnEnded | None]] = []

    def on_signal(signum: int) -> None:
        if running and signum == signal.SIGINT:
            running[0].cancel()
        else:
            stop.set()

    with Signals(on_signal):
        while not stop.is_set():
            transcript.idle_prompt = prompt
            out.write(prompt)
            out.flush()
            line = await next_line(lines, stop)
            if line is None or line.strip() in QUIT_WORDS:
                break
            if not line.strip():
                continue
            transcript.idle_prompt = None
            turn = asyncio.get_running_loop().create_task(
                _turn(talk, transcript, line, args.save, name)
            )
            running.append(turn)
            try:
                ended = await asyncio.gather(turn, return_exceptions=True)
            finally:
                running.clear()
            result = ended[0]
            if isinstance(result, asyncio.CancelledError):
                await _canceled(talk, transcript)
                prompt = PROMPT
            elif isinstance(result, ClientError):
                transcript.end(TurnEnded("failed"))
                transcript.note(f"error: {result}")
                prompt = PROMPT
            elif isinstance(result, BaseException):
                raise result
            elif result is not None and result.status == "input_required":
                transcript.note(f"{name} asks: {one_line(result.text, 2000)}")
                prompt = ANSWER_PROMPT
            else:
                prompt = PROMPT
    transcript.idle_prompt = None
    out.write("\n")
    transcript.note(f"chat ended; resume with --context {talk.context_id}")
    return 0


async def _turn(
    talk: RemoteConversation,
    transcript: ConsoleTranscript,
    text: str,
    save: Path | None,
    name: str,
) -> TurnEnded | None:
    transcript.begin(name)
    ended: TurnEnded | None = None
    async for raw in talk.turn(text):
        event = escaped(raw)
        if isinstance(event, Delegated):
            transcript.note(reported_line(event))
        elif isinstance(event, ArtifactEmitted) and event.kind == "file":
            where = "not saved (use --save DIR)"
            if save is not None:
                where = f"saved to {save_file(save, event.name, event.content or b'')}"
            transcript.note(f"artifact {one_line(event.name, 100)} (file): {where}")
        else:
            transcript.event(event)
        if isinstance(event, TurnEnded):
            ended = event
    return ended


def escaped(event: TurnEvent) -> TurnEvent:
    """``event`` with every string the agent sent made safe for the terminal."""
    if isinstance(event, TextDelta):
        return TextDelta(terminal_text(event.text))
    if isinstance(event, TurnEnded):
        return TurnEnded(event.status, terminal_text(event.text), terminal_text(event.message))
    if isinstance(event, ArtifactEmitted):
        return dataclasses.replace(
            event,
            name=one_line(event.name, 100),
            text=terminal_text(event.text) if event.text is not None else None,
            url=one_line(event.url, 2000) if event.url is not None else None,
        )
    return event


async def _canceled(talk: RemoteConversation, transcript: ConsoleTranscript) -> None:
    transcript.end(TurnEnded("canceled", message="interrupted"))
    ids = talk.last
    outcomes = await talk.interrupt(ids) if ids is not None else []
    for task_id, outcome in outcomes:
        transcript.note(f"task {task_id}: {outcome}")

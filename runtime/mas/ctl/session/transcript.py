"""The console transcript of ``run-mas`` and ``chat``: the conversation as a person reads it.

A :class:`ConsoleTranscript` writes the entry agent's streamed text to ``answer`` as it
arrives, and everything else on ``info``, one line each, prefixed ``· ``:

- delegations: ``· concierge -> researcher: working on 'find sources on X'`` and
  ``· researcher -> concierge: done`` (or ``failed: <why>``);
- control-protocol steers and cancels: ``· steer preempt on concierge/S: 'left'
  (preempted: the prefix is kept, the rest replaced)``, ``· steer replace ...
  (replaced: the prefix above is discarded)``, ``· steer wait ... (queued after the
  current generation)``, the end of a steered turn with its text, and ``· cancel on
  concierge/S: the running turn was interrupted``;
- tool-server calls of every hosted agent: ``· summarizer -> text-tools/word_count: ok:
  <result>`` (or ``failed: <why>``), and ``· summarizer -> tools: failed: <why>`` when a
  server's tools could not be offered;
- the end of a turn that did not complete (``· turn failed: <message>``), and the final
  answer when it differs from the streamed text (after a ``replace`` steer).

``run-mas`` gives two streams (the answer on stdout, the rest on stderr); ``chat`` gives
one (the terminal), where the agent's text goes on a ``<agent>> `` line (written with
its first text) and an info line that arrives mid-line starts on a fresh line, after which
the agent's line resumes with the next text.
"""

from __future__ import annotations

from typing import TextIO

from mas.ctl.session.activity import (
    Activity,
    Canceled,
    DelegationFinished,
    DelegationStarted,
    Steered,
    SteeredTurnEnded,
    ToolUsed,
)
from mas.runtime.turns import ArtifactEmitted, TextDelta, TurnEnded, TurnEvent

_APPLIED = {
    "preempted": "preempted: the prefix is kept, the rest replaced",
    "replaced": "replaced: the prefix above is discarded",
    "queued": "queued after the current generation",
}


def activity_line(record: Activity) -> str:
    """One activity record as a line (without the ``· `` prefix)."""
    if isinstance(record, DelegationStarted):
        return f"{record.source} -> {record.target}: working on {record.message!r:.120}"
    if isinstance(record, DelegationFinished):
        outcome = "done" if record.ok else f"failed: {record.detail}"
        return f"{record.target} -> {record.source}: {outcome}"
    if isinstance(record, Steered):
        return (
            f"steer {record.mode} on {record.agent}/{record.session}: {record.text!r} "
            f"({_APPLIED.get(record.applied, record.applied)})"
        )
    if isinstance(record, SteeredTurnEnded):
        ended = record.ended
        tail = f": {ended.text}" if ended.text else ""
        if ended.message and ended.status != "completed":
            tail += f" ({ended.message})"
        return f"steered turn {record.turn_id} ({record.mode}) ended {ended.status}{tail}"
    if isinstance(record, ToolUsed):
        outcome = "ok" if record.ok else "failed"
        detail = " ".join(record.detail.split())
        return f"{record.agent} -> {record.target}: {outcome}: {detail:.200}"
    if isinstance(record, Canceled):
        what = "the running turn was interrupted" if record.interrupted else "no turn was running"
        return f"cancel on {record.agent}/{record.session}: {what}"
    raise TypeError(f"unknown activity record {record!r}")


class ConsoleTranscript:
    """Writes one process's conversation to ``answer`` and ``info`` (see the module doc)."""

    def __init__(self, answer: TextIO, info: TextIO, *, prefix_turns: bool = False) -> None:
        self.answer = answer
        self.info = info
        self._prefix_turns = prefix_turns
        self._speaker: str | None = None
        self._mid_line = False
        self._streamed: list[str] = []
        self._pending = ""  # the speaker's prefix, written before its next text
        self.idle_prompt: str | None = None  # chat: rewritten after a note between turns

    @property
    def _shared(self) -> bool:
        return self.answer is self.info

    def begin(self, agent: str) -> None:
        """A turn of ``agent`` starts streaming."""
        self._speaker = agent
        self._streamed.clear()
        self._pending = f"{agent}> " if self._prefix_turns else ""

    def event(self, event: TurnEvent) -> None:
        """One event of the turn being streamed."""
        if isinstance(event, TurnEnded):
            self.end(event)
            return
        if isinstance(event, ArtifactEmitted):
            what = event.text or event.url or (event.data and str(dict(event.data))) or ""
            self.note(f"artifact {event.name} ({event.kind}){': ' if what else ''}{what:.200}")
            return
        if isinstance(event, TextDelta) and event.text:
            self._streamed.append(event.text)
            if self._pending:
                self._write(self.answer, self._pending)
                self._pending = ""
            self._write(self.answer, event.text)

    def end(self, ended: TurnEnded) -> None:
        """The streamed turn ended."""
        if self._mid_line:
            self._newline(self.answer)
        self._speaker = None
        self._pending = ""
        if ended.status == "input_required":
            return
        if ended.status != "completed":
            self.note(f"turn {ended.status}: {ended.message or '(no message)'}")
        elif ended.text != "".join(self._streamed):
            self.note(f"final answer: {ended.text}")

    def activity(self, record: Activity) -> None:
        """An activity record (a hub listener)."""
        self.note(activity_line(record))

    def note(self, line: str) -> None:
        """One info line; on a shared stream, the agent's line resumes after it."""
        if self._shared and self._mid_line:
            self._newline(self.info)
        self.info.write(f"· {line}\n")
        self.info.flush()
        if self._shared and self._speaker is not None and self._prefix_turns:
            self._pending = f"{self._speaker}> "
        elif self._shared and self._speaker is None and self.idle_prompt:
            self._write(self.answer, self.idle_prompt)

    def _write(self, stream: TextIO, text: str) -> None:
        stream.write(text)
        stream.flush()
        if stream is self.answer:
            self._mid_line = not text.endswith("\n")

    def _newline(self, stream: TextIO) -> None:
        stream.write("\n")
        stream.flush()
        self._mid_line = False

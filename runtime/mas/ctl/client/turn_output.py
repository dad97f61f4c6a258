"""What ``mas-ctl ask`` prints of one turn: text to stdout as it arrives, the rest on stderr.

- the agent's text streams to ``out``; a reply that differs from what was streamed (the
  agent replaced its words) follows on a new line;
- delegations and tool calls it reports go to ``info``, one ``· `` line each
  (``· delegated to researcher: ok``, ``· tool text-tools/word_count: failed: ...``);
- artifacts: text printed, data shown as JSON, URLs printed, files written under
  ``--save DIR`` (:mod:`mas.ctl.client.output`);
- ``-o json``: nothing streams; one JSON object is printed when the turn ends:
  ``{"context_id", "task_id", "status", "text", "artifacts": [...], "reported": [...],
  "metadata": {...}}`` (``metadata``: the task's, e.g. ``maslab.tokens``, the turn's tokens;
  ``{}`` for an answer that is a bare message);
- the turn's tokens, when the task's metadata reports them (``maslab.tokens``), go to
  ``info`` as one line once it has ended (``· tokens: 120 in, 30 out``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from mas.ctl.client.output import (
    artifact_record,
    one_line,
    plain,
    save_file,
    show_artifact,
    terminal_text,
)
from mas.runtime.turns import ArtifactEmitted, Delegated, TextDelta, TurnEnded, TurnEvent

TOKENS_KEY = "maslab.tokens"  # the turn's tokens in the task's metadata (docs/models.md)


def reported_line(event: Delegated) -> str:
    """A delegation or tool call, as one line (without the ``· ``)."""
    outcome = "ok" if event.ok else "failed"
    detail = f": {one_line(event.detail)}" if event.detail else ""
    if event.kind == "tool":
        return f"tool {one_line(event.target, 100)}: {outcome}{detail}"
    return f"delegated to {one_line(event.target, 100)}: {outcome}{detail}"


class TurnOutput:
    """Renders one turn's events (see the module docstring)."""

    def __init__(self, out: TextIO, info: TextIO, *, as_json: bool, save: Path | None) -> None:
        self.out = out
        self.info = info
        self.as_json = as_json
        self.save = save
        self.streamed: list[str] = []
        self.artifacts: list[dict[str, Any]] = []
        self.reported: list[dict[str, Any]] = []
        self.ended: TurnEnded | None = None
        self._mid_line = False

    def event(self, event: TurnEvent) -> None:
        """One event of the turn."""
        if isinstance(event, TextDelta):
            self.streamed.append(event.text)
            if not self.as_json and event.text:
                self._write(terminal_text(event.text))
        elif isinstance(event, Delegated):
            self.reported.append(
                {"kind": event.kind, "target": event.target, "ok": event.ok, "detail": event.detail}
            )
            self._note(reported_line(event))
        elif isinstance(event, ArtifactEmitted):
            self._artifact(event)
        elif isinstance(event, TurnEnded):
            self.ended = event
            if not self.as_json:
                said = event.text if event.status in ("completed", "input_required") else ""
                if said and said != "".join(self.streamed):
                    self._newline()
                    self._write(terminal_text(said))
                self._newline()

    def _artifact(self, artifact: ArtifactEmitted) -> None:
        saved = None
        if artifact.kind == "file" and self.save is not None:
            saved = save_file(self.save, artifact.name, artifact.content or b"")
        if self.as_json:
            self.artifacts.append(artifact_record(artifact, saved))
            if artifact.kind == "file" and saved is None:
                self._note(
                    f"artifact {one_line(artifact.name, 100)} (file): not saved (use --save DIR)"
                )
            return
        self._newline()
        show_artifact(artifact, saved, self.out, self.info)

    def close(self) -> None:
        """End a line the text left open (a task shown while it still runs)."""
        self._newline()

    def tokens(self, metadata: dict[str, Any]) -> None:
        """The turn's tokens on ``info``, if the task's ``metadata`` reports them."""
        tokens = metadata.get(TOKENS_KEY)
        if self.as_json or not isinstance(tokens, dict):
            return
        counts = [tokens.get(kind) for kind in ("input", "output")]
        if all(isinstance(n, (int, float)) for n in counts):
            self._note(f"· tokens: {int(counts[0])} in, {int(counts[1])} out")  # type: ignore[arg-type]

    def summary(
        self, context_id: str, task_id: str | None, metadata: dict[str, Any] | None = None
    ) -> None:
        """``-o json``: the one object, once the turn has ended."""
        ended = self.ended or TurnEnded("failed", message="the turn did not end")
        record = {
            "context_id": context_id,
            "task_id": task_id,
            "status": ended.status,
            "text": ended.text or ended.message,
            "artifacts": self.artifacts,
            "reported": self.reported,
            "metadata": plain(metadata),
        }
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.out.flush()

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._mid_line = not text.endswith("\n")

    def _newline(self) -> None:
        if self._mid_line:
            self._write("\n")

    def _note(self, line: str) -> None:
        self.info.write(f"· {line}\n")
        self.info.flush()

"""How a client command shows what an agent sent: escaped for the terminal, files saved safely.

Everything an agent sends is data: its text may hold terminal escape sequences, its file
names may hold paths. :func:`terminal_text` escapes control characters (an agent cannot
move the cursor, recolour or retitle the terminal) and :func:`save_file` writes an
artifact's bytes under ``--save DIR`` with a name of our own making (the peer's name reduced
to ``[A-Za-z0-9._-]``, never a path, never over an existing file).
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from mas.runtime.turns import ArtifactEmitted

_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 100


def terminal_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with control characters (and bidi overrides) written as ``\\x..`` escapes;
    newlines and tabs kept when ``keep_newlines``."""
    if text.isprintable() and not (_BIDI & set(text)):
        return text
    out = []
    for char in text:
        if keep_newlines and char in "\n\t":
            out.append(char)
        elif char in _BIDI or unicodedata.category(char) in ("Cc", "Cs"):
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


def one_line(text: str, limit: int = 200) -> str:
    """A peer's string for one line of output: escaped, whitespace folded, at most ``limit``."""
    folded = terminal_text(" ".join(text.split()), keep_newlines=False)
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def safe_name(name: str) -> str:
    """A file name of our own for a peer's artifact name (never a path)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).lstrip(".")[:MAX_NAME]
    return cleaned if cleaned.strip("_") else "artifact"


def save_file(directory: Path, name: str, content: bytes) -> Path:
    """Write ``content`` as a new file in ``directory`` (``name``, then ``name-2``...)."""
    directory.mkdir(parents=True, exist_ok=True)
    stem, dot, suffix = safe_name(name).rpartition(".")
    if not dot or not stem:
        stem, suffix = safe_name(name), ""
    for index in range(1, 1000):
        label = stem if index == 1 else f"{stem}-{index}"
        path = directory / (f"{label}.{suffix}" if suffix else label)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        return path
    raise FileExistsError(f"{directory}: 999 files named like {safe_name(name)!r} already")


def artifact_record(artifact: ArtifactEmitted, saved: Path | None) -> dict[str, Any]:
    """One artifact as JSON (``-o json``): a file's bytes are not inlined, its path is."""
    record: dict[str, Any] = {"kind": artifact.kind, "name": artifact.name}
    if artifact.media_type:
        record["media_type"] = artifact.media_type
    if artifact.kind == "text":
        record["text"] = artifact.text or ""
    elif artifact.kind == "data":
        record["data"] = plain(artifact.data)
    elif artifact.kind == "url":
        record["url"] = artifact.url or ""
    else:
        record["size"] = len(artifact.content or b"")
        record["saved"] = str(saved) if saved else None
    return record


def show_artifact(artifact: ArtifactEmitted, saved: Path | None, out: TextIO, info: TextIO) -> None:
    """One artifact for a person: a line on ``info``, its content on ``out``."""
    name = one_line(artifact.name, 100)
    media = f", {one_line(artifact.media_type, 60)}" if artifact.media_type else ""
    if artifact.kind == "file":
        size = len(artifact.content or b"")
        where = f"saved to {saved}" if saved else "not saved (use --save DIR)"
        info.write(f"· artifact {name} (file, {size} bytes{media}): {where}\n")
        info.flush()
        return
    info.write(f"· artifact {name} ({artifact.kind}{media}):\n")
    info.flush()
    if artifact.kind == "text":
        body = terminal_text(artifact.text or "")
    elif artifact.kind == "data":
        body = terminal_text(json.dumps(plain(artifact.data), indent=2, ensure_ascii=False))
    else:
        body = one_line(artifact.url or "", 2000)
    out.write(body if body.endswith("\n") else body + "\n")
    out.flush()


def plain(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """``data`` as JSON values, a whole number as an int (protobuf carries every number as a
    double: ``1`` arrives as ``1.0``)."""
    return dict(_whole(dict(data or {})))


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value

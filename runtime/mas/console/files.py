"""A file artifact as an answer the browser saves, or shows when it is a plain image.

Bytes from an agent are never served as a type a browser would run: only PNG, JPEG, GIF and
WebP may be shown inline (``?inline=1``, for the ``<img>`` of the chat and the task page),
as their declared type; everything else, SVG included, is ``application/octet-stream`` with
``Content-Disposition: attachment``. The file name is the artifact's, reduced to its last
path segment and to letters, digits, ``.``, ``-`` and ``_`` (``file`` when nothing is left);
the console's CSP and ``nosniff`` apply to these answers as to every other.
"""

from __future__ import annotations

import re

from starlette.responses import Response

from mas.runtime.turns import ArtifactEmitted

INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def download_name(name: str) -> str:
    """A file name safe in a header and on a disk (see the module docstring)."""
    last = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", last).strip("._")[:100]
    return cleaned or "file"


def shows_inline(media_type: str | None) -> bool:
    return (media_type or "").split(";", 1)[0].strip().lower() in INLINE_IMAGES


def file_response(artifact: ArtifactEmitted, *, inline: bool) -> Response:
    """The artifact's bytes (see the module docstring)."""
    shown = inline and shows_inline(artifact.media_type)
    media = (artifact.media_type or "").split(";", 1)[0].strip().lower()
    disposition = "inline" if shown else "attachment"
    return Response(
        artifact.content or b"",
        media_type=media if shown else "application/octet-stream",
        headers={
            "content-disposition": f'{disposition}; filename="{download_name(artifact.name)}"',
            "cache-control": "no-store",
        },
    )

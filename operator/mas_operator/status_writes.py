"""The status our own last write left on each Application, for reconciles that start older.

A reconcile compares the status it would write with the status in the copy of the
Application it started from, and patches only a change (:mod:`mas_operator.noops`). A
reconcile queued behind another one of the same Application (a child's event marked it
dirty while the first was applying) starts from the copy it was given when it queued:
older than the first one's status write. Compared with that copy, the same status looks
new, and it was written a second time, with fresh ``lastTransitionTime`` stamps (at 1,000
Applications converging, 1,000 such writes).

So the operator remembers, per Application, the status its last write returned and the
``resourceVersion``\\ s known to be older than that write (the versions the writing
reconciles started from). A reconcile that starts from one of those versions compares
against the remembered status instead (:func:`known_status`); one that starts from any
other version (the echo of the write, a later edit by anyone, a status someone else
wrote) uses the copy as it is. A reconcile that fails forgets the memory (its error path
may have written a status of its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEEP_OLDER = 8  # versions remembered as older than the last write (a few queued reconciles)


@dataclass(frozen=True)
class WrittenStatus:
    """The status one of our writes left on an Application, and the versions before it."""

    status_json: str  # as JSON: under a third of its size as dicts; read only when stale
    version: str  # the Application's resourceVersion that write returned
    older: tuple[str, ...]  # resourceVersions known to precede it (newest last)


def version_of(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion"))


def known_status(body: Mapping[str, Any], last: WrittenStatus | None) -> dict[str, Any]:
    """``body`` (a shallow copy) with the status it has now, as far as the operator knows:
    the status of our last write when ``body`` is a version from before that write."""
    current = dict(body)
    if last is not None and version_of(body) in last.older:
        current["status"] = json.loads(last.status_json)
    return current


def after_write(
    read: Mapping[str, Any], written: Mapping[str, Any], last: WrittenStatus | None
) -> WrittenStatus:
    """What to remember after a reconcile that started from ``read`` wrote its status and
    the server returned ``written`` (the Application after the patch).

    Every version seen before a write is older than what the write returned: the one the
    reconcile started from, and (reconciles of one Application never overlap) those of
    the previous write.
    """
    seen = (*last.older, last.version) if last is not None else ()
    newest = version_of(written)
    older = [v for v in dict.fromkeys((*seen, version_of(read))) if v != newest]
    status = json.dumps(written.get("status") or {}, separators=(",", ":"))
    return WrittenStatus(status, newest, tuple(older[-KEEP_OLDER:]))

"""``TokenFile``: the caller's own projected token, as the kubelet last wrote it.

The kubelet rewrites a projected token well before it expires (an atomic swap of the
volume's data directory), so :meth:`TokenFile.current` checks the file's identity (inode,
size, modification time) at most once per ``check_interval`` seconds and reads it again
when it changed. A file that does not exist (outside a pod, or an agent not deployed by
the operator) gives ``None``: nothing is sent. A file that cannot be read after it was read
once keeps the last token (a rotation caught between the swap's two steps) until the next
check.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from mas.infra.identity import TOKEN_PATH

logger = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL = 5.0


class TokenFile:
    """The token at ``path`` (see the module docstring); share one per process."""

    def __init__(
        self,
        path: str | Path = TOKEN_PATH,
        *,
        check_interval: float = DEFAULT_CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._check_interval = check_interval
        self._clock = clock
        self._checked_at: float | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._token: str | None = None

    def current(self) -> str | None:
        """The token to send now, or None when there is none."""
        now = self._clock()
        if self._checked_at is not None and now - self._checked_at < self._check_interval:
            return self._token
        self._checked_at = now
        try:
            info = os.stat(self.path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            if stamp != self._stamp:
                token = self.path.read_text(encoding="utf-8").strip()
                self._stamp, self._token = stamp, token or None
        except FileNotFoundError:
            self._stamp, self._token = None, None
        except OSError as exc:
            logger.warning("cannot read the A2A identity token %s: %s", self.path, exc)
        return self._token

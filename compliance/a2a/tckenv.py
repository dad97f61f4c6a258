"""The TCK's own virtual environment, built from a checkout the user gives us.

The TCK is installed editable into ``<out>/tck-venv`` with pip, from the package index only
(no URL is fetched by us). A marker file remembers the checkout's commit, so a second run at the
same commit reuses the environment.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


class TckError(Exception):
    """The TCK checkout or its environment is unusable; the message says what to do."""


@dataclass(frozen=True)
class TckCheckout:
    """A TCK checkout: its path, commit and branch."""

    path: Path
    commit: str
    branch: str

    @classmethod
    def open(cls, path: Path) -> TckCheckout:
        """Check that ``path`` is a TCK checkout and read its commit."""
        path = path.resolve()
        if not (path / "run_tck.py").is_file() or not (path / "tests" / "compatibility").is_dir():
            raise TckError(
                f"--tck {str(path)!r}: not an A2A TCK checkout (expected run_tck.py and "
                "tests/compatibility/); clone the TCK and check out its 1.0-dev branch"
            )
        commit = _git(path, "rev-parse", "HEAD") or "unknown"
        branch = _git(path, "rev-parse", "--abbrev-ref", "HEAD") or "unknown"
        return cls(path, commit, branch)


def _git(path: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def ensure_venv(checkout: TckCheckout, root: Path) -> Path:
    """The Python of a virtual environment holding the TCK at ``checkout``'s commit."""
    python = root / "bin" / "python"
    marker = root / ".tck-commit"
    if python.exists() and marker.exists() and marker.read_text().strip() == checkout.commit:
        return python
    logger.warning("installing the TCK at %s into %s", checkout.commit[:12], root)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-e", str(checkout.path)],
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        raise TckError(
            f"pip could not install the TCK from {checkout.path} (exit {done.returncode})"
        )
    marker.write_text(checkout.commit + "\n")
    return python


if __name__ == "__main__":  # pragma: no cover - a manual helper
    print(ensure_venv(TckCheckout.open(Path(sys.argv[1])), Path(sys.argv[2])))

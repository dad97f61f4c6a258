"""Summarise a py-spy ``--format raw`` (folded stacks) profile: where the time goes.

Usage::

    py-spy record -p PID -d 10 -r 200 -f raw -o serve.folded
    python benchmarks/folded.py serve.folded [--top 30] [--match a2a/]

Prints the share of samples that include each function (inclusive) and the share spent in
the function itself (self), the top entries of each.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    """``func (path/to/module.py:12)`` -> ``module.py:func`` with the last path parts kept."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    parts = match["file"].split("/")
    short = "/".join(parts[-2:])
    return f"{short}:{match['func']}"


def summarise(
    path: Path, match: str | None
) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [frame_name(f) for f in stack.split(";")]
        for name in set(frames):
            if match is None or match in name:
                inclusive[name] += count
        if frames and (match is None or match in frames[-1]):
            own[frames[-1]] += count
    return total, inclusive, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default=None, help="only frames whose name contains this")
    args = parser.parse_args()
    total, inclusive, own = summarise(args.profile, args.match)
    print(f"{total} samples")
    print("inclusive:")
    for name, count in inclusive.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {name}")
    print("self:")
    for name, count in own.most_common(args.top):
        print(f"  {100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()

"""The deadline every tier gives a cold ``mas-ctl`` process to print its ready line.

Each wait it bounds is on something observable (the ready line, the first screen), so a
generous deadline costs nothing when the machine is quiet. CI runs on two shared cores with
other work beside it: at load 16-22 a cold interpreter importing the SDK took 10-11 s of wall
time for 2 s of CPU, and the former per-tier deadlines (30 s, 45 s) failed start-ups of the
durable, serve, security and bad-input tests in loaded full runs. It stays below the
suite's 120 s per-test timeout, so a process that never gets ready still fails with its log.
"""

from __future__ import annotations

COLD_START = 90.0

"""The cyclic garbage collector, paused while ``mas-ctl`` loads a command (docs/performance.md).

Loading ``serve`` creates a great many container objects (the a2a-sdk, SQLAlchemy, the
pydantic models, the protobuf descriptors), and the collector traverses them again and
again while they are created, to find few unreachable ones (the figures:
docs/performance.md, "Where the time goes"). So the console script pauses it (:func:`pause`)
before the command's modules are imported, and :func:`resume`, called once the command
line is parsed, moves everything loaded so far into the permanent generation
(:func:`gc.freeze`: never traversed again, and never freed: modules, classes and
descriptors live as long as the process anyway) and turns the collector back on before
the command runs. What the command allocates from then on is collected as usual.

Only the console script pauses: :func:`mas.ctl.cli.main` called in-process (the tests, a
program embedding it) leaves the collector alone, as :func:`resume` does nothing unless
:func:`pause` turned the collector off.
"""

from __future__ import annotations

import gc


class _State:
    paused = False  # pause() turned the collector off and resume() has not run yet


def pause() -> None:
    """Turn the cyclic collector off until :func:`resume`, unless it is off already."""
    if gc.isenabled():
        gc.disable()
        _State.paused = True


def resume() -> None:
    """After :func:`pause`: freeze what is loaded, then turn the collector back on."""
    if not _State.paused:
        return
    _State.paused = False
    gc.freeze()
    gc.enable()

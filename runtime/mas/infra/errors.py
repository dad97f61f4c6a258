"""Errors of the ``mas.infra`` layer.

Every error a user can cause names the field path, the bad value and what is accepted.
The tree::

    InfraError                  base of everything raised here
    ├── DocumentError           a file that cannot be read, is past a document limit
    │                           (mas.infra.guarded_yaml) or is not a YAML mapping (usage error)
    ├── OverrideError           a malformed --bind / --override / --infra-ref argument (usage error)
    ├── PluginNameError         an installed plugin entry point not named <category>.<name>
    └── ApplicationInvalid      the document parsed but breaks one or more rules (all listed)
        └── WiringError         one or more delegates_to targets resolve to nothing

``ApplicationInvalid.problems`` holds every :class:`Problem`, never only the first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def field_path(loc: Sequence[int | str]) -> str:
    """A dotted field path; a key that is not plain text is shown quoted, as ``[...]`` (so a
    key holding a newline or a dot cannot break the one line a problem is)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.match(part) and part != "[key]":
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True, order=True)
class Problem:
    """One broken rule: where (a dotted field path) and what is wrong."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


@dataclass(frozen=True, order=True)
class MissingTarget:
    """A ``delegates_to`` entry that resolves to no local agent and no usable endpoint."""

    source: str
    target: str
    index: int
    hint: str = ""

    @property
    def problem(self) -> Problem:
        message = (
            f"delegation target {self.target!r} of agent {self.source!r} is neither an agent of "
            "the agency nor an endpoint with usage use or use-and-deploy"
        )
        if self.hint:
            message = f"{message} ({self.hint})"
        return Problem(f"spec.agency.agents.{self.source}.spec.delegates_to[{self.index}]", message)


class InfraError(Exception):
    """Base of the errors raised by ``mas.infra``."""


class DocumentError(InfraError):
    """The input is not a readable YAML mapping."""


class OverrideError(InfraError):
    """A command-line edit of the document is malformed."""


class PluginNameError(InfraError):
    """An entry point of the plugin group is not named ``<category>.<name>``."""


class ApplicationInvalid(InfraError):
    """The document breaks one or more rules; ``problems`` lists every one."""

    def __init__(self, problems: Iterable[Problem], missing: Iterable[MissingTarget] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.missing: tuple[MissingTarget, ...] = tuple(sorted(missing))
        super().__init__(self.render())

    def render(self) -> str:
        """One line per problem, field path first."""
        return "\n".join(str(p) for p in self.problems)


class WiringError(ApplicationInvalid):
    """``delegates_to`` targets are missing; ``missing`` names each and its delegator."""

    def __init__(self, missing: Iterable[MissingTarget]) -> None:
        ordered = sorted(missing)
        super().__init__((m.problem for m in ordered), ordered)

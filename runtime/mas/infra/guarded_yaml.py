"""The one reader of YAML documents: a file, its bytes and its values, each within a limit.

Every document a command reads (``mas-ctl -f`` and ``--infra-ref``, the values of
``--override``, ``mas-operator render -f``) goes through :func:`read_document_text` and
:func:`load_yaml`, so a hostile document fails fast with one line naming the limit it
breaks, where it breaks it (line and column) and what is accepted:

- the file must be a regular file (a FIFO would block, ``/dev/zero`` never ends, a
  directory cannot be read): it is opened without blocking and checked before any read;
- at most :attr:`DocumentLimits.max_bytes` bytes (2 MiB, above the 1.5 MiB the
  Kubernetes API server stores for one object), read no further than one byte past it;
- collections nested at most :attr:`~DocumentLimits.max_depth` levels (64), checked as each
  one opens, before the composer recurses into it;
- at most :attr:`~DocumentLimits.max_values` values once aliases are expanded (100,000):
  an alias bomb (a billion laughs) is refused after its nodes are read, before anything
  is built from them; a recursive alias is refused too;
- integers that fit 64 bits (what a Kubernetes object holds; a 5,000-digit one would trip
  Python's conversion limit), and floats that are finite (JSON has no NaN or Infinity): a
  refused number is an invalid field, named by its path and line, as a schema error is;
- :attr:`~DocumentLimits.max_seconds` to read the whole stream (10 s), checked at each node.

Events come from libyaml when it is installed (its parser keeps no recursion and caps its
own nesting), else from PyYAML's Python parser; composition and construction are PyYAML's
safe ones with the checks above, so a document within the limits reads exactly as
``yaml.safe_load`` reads it.
Every other refusal is a :class:`~mas.infra.errors.DocumentError` (a usage error: exit 2).
"""

from __future__ import annotations

import math
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from mas.infra.errors import ApplicationInvalid, DocumentError, Problem, field_path

__all__ = ["DEFAULT_LIMITS", "INT64_MAX", "DocumentLimits", "load_yaml", "read_document_text"]

INT64_MAX = 2**63 - 1
_INT_CHARS = 24  # more characters than any 64-bit integer YAML writes (0b... is checked after)


@dataclass(frozen=True)
class DocumentLimits:
    """The limits of one document (module docstring)."""

    max_bytes: int = 2 * 1024 * 1024
    max_depth: int = 64
    max_values: int = 100_000
    max_seconds: float = 10.0


DEFAULT_LIMITS = DocumentLimits()

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_document_text(path: str | Path, limits: DocumentLimits = DEFAULT_LIMITS) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limits.max_bytes`` long."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise DocumentError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise DocumentError(
                f"{path}: is not a regular file ({kind}); give the path of a YAML file"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(limits.max_bytes + 1)
    except OSError as exc:
        raise DocumentError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limits.max_bytes:
        raise DocumentError(
            f"{path}: the file is larger than {limits.max_bytes:,} bytes, the size limit "
            "of a document"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{path}: is not UTF-8 text (byte {exc.start})") from None


def _where(node_or_event: Any) -> str:
    mark = node_or_event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _GuardedComposer(Composer):
    """PyYAML's composer, counting depth as each collection opens and checking the clock."""

    origin: str
    limits: DocumentLimits
    deadline: float
    depth: int
    root: Node | None
    # The event source's (``_Events``), typed loosely: libyaml's parser has no stubs.
    check_event: Any
    peek_event: Any

    def _refuse(self, at: Any, why: str) -> DocumentError:
        return DocumentError(f"{self.origin}: {_where(at)}: {why}")

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if time.monotonic() > self.deadline:
            raise self._refuse(
                self.peek_event(),
                f"reading the document took longer than {self.limits.max_seconds:g} s, "
                "the time limit of a document",
            )
        if self.check_event(AliasEvent) or not self.check_event(
            SequenceStartEvent, MappingStartEvent
        ):
            return super().compose_node(parent, index)
        if self.depth >= self.limits.max_depth:
            raise self._refuse(
                self.peek_event(),
                f"nested deeper than {self.limits.max_depth} levels, the depth limit of a document",
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_document(self) -> Node | None:
        node = super().compose_document()
        if node is not None:
            self._check_expansion(node)
        self.root = node
        return node

    def _check_expansion(self, root: Node) -> None:
        """Refuse more than ``max_values`` values with every alias expanded, or a cycle.

        A node an alias repeats is one object in the composed graph: each node's expanded
        size is computed once (iteratively), so a billion laughs costs its node count.
        """
        limit = self.limits.max_values
        sizes: dict[int, int] = {}
        open_nodes: set[int] = set()
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            key = id(node)
            if children_done:
                open_nodes.discard(key)
                size = sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
                if size > limit:
                    raise self._refuse(
                        node,
                        f"this value holds more than {limit:,} values once its aliases are "
                        "expanded, the limit of a document",
                    )
                continue
            if key in sizes:
                continue
            if key in open_nodes:
                raise self._refuse(node, "an alias refers to a collection that holds it")
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [item for pair in node.value for item in pair]
    return []


class _GuardedConstructor(SafeConstructor):
    """PyYAML's safe constructor; integers within 64 bits, floats finite.

    A refused number is a problem of its field: :class:`ApplicationInvalid` naming the
    field's path (and the line), like a schema error; a number that is the whole document
    (no field) is a :class:`DocumentError`.
    """

    origin: str
    root: Node | None

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if len(text) <= _INT_CHARS:
            value = int(super().construct_yaml_int(node))
            if -INT64_MAX - 1 <= value <= INT64_MAX:
                return value
        shown = text if len(text) <= 32 else f"{text[:24]}... ({len(text):,} characters)"
        raise self._refuse_value(
            node,
            f"the integer {shown} does not fit 64 bits; accepted: -{INT64_MAX + 1} to {INT64_MAX}",
        )

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = float(super().construct_yaml_float(node))
        if not math.isfinite(value):
            text = str(self.construct_scalar(node))[:32]
            raise self._refuse_value(
                node, f"{text} is not a finite number; a document holds JSON numbers"
            )
        return value

    def _refuse_value(self, node: Node, why: str) -> Exception:
        path = _path_to(self.root, node) if self.root is not None else ""
        if not path:
            return DocumentError(f"{self.origin}: {_where(node)}: {why}")
        return ApplicationInvalid([Problem(path, f"{why} ({self.origin}, {_where(node)})")])


def _path_to(root: Node, target: Node) -> str:
    """The field path (``spec.endpoints.a.timeout``) of ``target`` under ``root``; a mapping
    key's path is its mapping's. Only called for a refusal, so it may walk the document."""
    seen: set[int] = set()
    stack: list[tuple[Node, tuple[int | str, ...]]] = [(root, ())]
    while stack:
        node, loc = stack.pop()
        if node is target:
            return field_path(loc)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend((item, (*loc, i)) for i, item in enumerate(node.value))
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                if key is target:
                    return field_path(loc)
                name = str(key.value) if isinstance(key, ScalarNode) else "?"
                stack.append((value, (*loc, name)))
    return ""


_GuardedConstructor.yaml_constructors = {
    **SafeConstructor.yaml_constructors,
    "tag:yaml.org,2002:int": _GuardedConstructor.construct_yaml_int,
    "tag:yaml.org,2002:float": _GuardedConstructor.construct_yaml_float,
}


class _GuardedLoader(_GuardedComposer, _GuardedConstructor, Resolver):
    """Composition and construction guarded (module docstring); events from a subclass."""

    dispose: Any  # the event source's

    def __init__(self, text: str, origin: str, limits: DocumentLimits) -> None:
        self._start_events(text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.origin = origin
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.depth = 0
        self.root = None

    def _start_events(self, text: str) -> None:
        raise NotImplementedError


class _PyLoader(_GuardedLoader, Reader, Scanner, Parser):
    """Events from PyYAML's Python parser (no libyaml)."""

    def _start_events(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)


_Loader: type[_GuardedLoader] = _PyLoader
try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    pass
else:

    class _CLoader(_GuardedLoader, CParser):
        """Events from libyaml's parser."""

        def _start_events(self, text: str) -> None:
            CParser.__init__(self, text)

    _Loader = _CLoader


def load_yaml(
    text: str, origin: str = "<input>", limits: DocumentLimits = DEFAULT_LIMITS
) -> list[Any]:
    """Every document of the YAML stream ``text``, each read within ``limits``.

    Raises :class:`DocumentError` for a broken limit and ``yaml.YAMLError`` for bad syntax.
    """
    if len(text) > limits.max_bytes:  # text that came from elsewhere than a file
        raise DocumentError(
            f"{origin}: longer than {limits.max_bytes:,} characters, the size limit of a document"
        )
    loader = _Loader(text, origin, limits)
    try:
        documents = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            documents.append(loader.get_data())
        return documents
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" not in str(exc.problem):
            raise
        # libyaml's own cap (1,000 flow levels), met while it scans ahead of the composer
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        raise DocumentError(
            f"{origin}: line {line}: nested deeper than {limits.max_depth} levels, the depth "
            "limit of a document"
        ) from None
    finally:
        loader.dispose()

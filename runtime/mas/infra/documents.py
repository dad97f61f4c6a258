"""Reading Application documents and the command-line edits of them.

Merge order (documented in the README and tested): the base document, then each
``--infra-ref`` file in the order given (mappings merge key by key, anything else replaces),
then every ``--override`` and ``--bind`` in command-line order. Validation runs once, on the
merged result: ``--bind`` is only a shortcut for ``usage: use`` overrides, never a second
exposure path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mas.infra.errors import ApplicationInvalid, DocumentError, OverrideError
from mas.infra.guarded_yaml import load_yaml, read_document_text

INFRA_REF_KEYS = ("endpoints", "agent_comm", "models", "defaults", "runtime")
_SEGMENT = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_-]*)|\[([^\[\]]+)\]")
_BIND_SCHEMES = {"a2a": "http", "a2as": "https"}


@dataclass(frozen=True)
class Override:
    """One edit: set the value at ``path`` (keys from the document root)."""

    path: tuple[str, ...]
    value: Any
    text: str


def read_yaml_file(path: str | Path) -> dict[str, Any]:
    """The single YAML mapping in the regular file ``path``, read within the document
    limits (:mod:`mas.infra.guarded_yaml`); :class:`DocumentError` otherwise."""
    return parse_yaml_text(read_document_text(path), str(path))


def parse_yaml_text(text: str, origin: str = "<input>") -> dict[str, Any]:
    """The single YAML mapping in ``text``, read within the document limits."""
    try:
        docs = [d for d in load_yaml(text, origin) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise DocumentError(f"{origin}: is not valid YAML{where}: {problem}") from None
    if len(docs) != 1:
        raise DocumentError(f"{origin}: expected one YAML document, found {len(docs)}")
    if not isinstance(docs[0], dict):
        raise DocumentError(
            f"{origin}: expected a mapping (an Application), found {type(docs[0]).__name__}"
        )
    return docs[0]


def merge(base: Any, overlay: Any) -> Any:
    """``overlay`` over ``base``: mappings merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = dict(base)
        for key, value in overlay.items():
            out[key] = merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(overlay)


def merge_infra_ref(
    document: Mapping[str, Any], ref: Mapping[str, Any], origin: str
) -> dict[str, Any]:
    """Merge an infra document (endpoints, agent_comm, models, defaults, runtime) over
    ``document``."""
    spec = ref.get("spec")
    if not isinstance(spec, dict):
        raise DocumentError(f"{origin}: an infra document needs a 'spec' mapping")
    extra = sorted(set(spec) - set(INFRA_REF_KEYS))
    if extra:
        raise DocumentError(
            f"{origin}: spec.{extra[0]} cannot come from an infra document; accepted: "
            + ", ".join(f"spec.{k}" for k in INFRA_REF_KEYS)
        )
    return dict(merge(dict(document), {"spec": spec}))


def parse_override(text: str) -> Override:
    """``infra:PATH=VALUE``; PATH is dotted keys with ``[key]`` for any key, VALUE is YAML."""
    target, sep, raw = text.partition("=")
    if not sep:
        raise OverrideError(f"--override {text!r}: expected infra:PATH=VALUE")
    doc, colon, path_text = target.partition(":")
    if not colon or doc != "infra":
        raise OverrideError(
            f"--override {text!r}: the path must start with 'infra:' "
            "(for example infra:spec.endpoints[writer].url=http://127.0.0.1:8001)"
        )
    path: list[str] = []
    pos = 0
    while pos < len(path_text):
        match = _SEGMENT.match(path_text, pos)
        if match is None or (pos == 0 and path_text.startswith(".")):
            raise OverrideError(
                f"--override {text!r}: cannot read the path at {path_text[pos:]!r}; use "
                "dotted keys and [key] for keys with dots"
            )
        path.append(match.group(1) or match.group(2))
        pos = match.end()
    if not path:
        raise OverrideError(f"--override {text!r}: the path is empty")
    try:
        values = load_yaml(raw, f"--override {target}") if raw.strip() else [""]
    except yaml.YAMLError:
        values = [raw]
    except (DocumentError, ApplicationInvalid) as exc:
        raise OverrideError(str(exc)) from None  # each names the --override
    # As yaml.safe_load: no document is None; several are not YAML (the text itself).
    value = values[0] if len(values) == 1 else (raw if values else None)
    return Override(tuple(path), value, text)


def bind_overrides(text: str) -> list[Override]:
    """``--bind NAME=a2a://host:port``: the ``usage: use`` row it is a shortcut for."""
    name, sep, address = text.partition("=")
    scheme, colon, rest = address.partition("://")
    if sep and name and colon and rest and scheme in ("http", "https"):
        raise OverrideError(
            f"--bind {text!r}: the scheme is {scheme!r}; --bind takes NAME=a2a://host:port "
            f"(a2as:// for https), or set the url with --override "
            f"infra:spec.endpoints[{name}].url={address}"
        )
    if not sep or not name or not colon or scheme not in _BIND_SCHEMES or not rest:
        raise OverrideError(
            f"--bind {text!r}: expected NAME=a2a://host:port (a2as://host:port for https)"
        )
    url = f"{_BIND_SCHEMES[scheme]}://{rest}"
    protocol = "a2a"
    return [
        parse_override(f"infra:spec.endpoints[{name}].protocol={protocol}"),
        Override(("spec", "endpoints", name, "url"), url, f"--bind {text}"),
        parse_override(f"infra:spec.endpoints[{name}].usage=use"),
    ]


def apply_overrides(document: Mapping[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    """A copy of ``document`` with every override set, creating mappings on the way."""
    out: dict[str, Any] = copy.deepcopy(dict(document))
    for item in overrides:
        node: Any = out
        for depth, key in enumerate(item.path[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                where = ".".join(item.path[: depth + 1])
                raise OverrideError(f"--override {item.text!r}: {where} is not a mapping")
            node = child
        node[item.path[-1]] = item.value
    return out


def load_document(
    path: str | Path,
    *,
    infra_refs: Iterable[str | Path] = (),
    overrides: Iterable[str] = (),
    binds: Iterable[str] = (),
    edits: Iterable[Override] | None = None,
) -> dict[str, Any]:
    """The merged document: base, infra refs, then edits (``edits`` keeps CLI order)."""
    document = read_yaml_file(path)
    for ref in infra_refs:
        document = merge_infra_ref(document, read_yaml_file(ref), str(ref))
    if edits is None:
        edits = [parse_override(o) for o in overrides]
        for b in binds:
            edits.extend(bind_overrides(b))
    return apply_overrides(document, edits)

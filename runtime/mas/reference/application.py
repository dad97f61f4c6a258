"""Generate ``docs/reference/application.md``: every field of the ``Application`` document.

``python -m mas.reference.application`` prints the page; ``--check FILE`` exits 1 when
``FILE`` differs from a fresh one (``make reference`` regenerates it).

The page is read off the pydantic models of :mod:`mas.infra.models`: their JSON schema gives
each field's type and bounds, the models give what is required and each default, the field
descriptions and class docstrings give the prose, and each model's ``x-kubernetes-validations``
give the rules that tie its fields together. It starts with every field by its path
(``spec.agency.agents.<id>.spec.delegates_to``), then one section per model in the order
the document reaches them. Rules across the whole document live in
:mod:`mas.infra.validation` and :mod:`mas.infra.routes`; the page points there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from mas.infra.generated_files import run
from mas.infra.models import Application
from mas.reference.markdown import anchor, cell, code

ROOT = "Application"
REGENERATE = "make reference"

# The placeholder a map key stands for in a path, by the key's own description.
KEY_NAMES = {"An agent id": "<id>", "An HTTP header name": "<header>"}


@dataclass
class Shape:
    """How one schema node reads on the page, and where the walk goes from it."""

    type: str
    allowed: list[str] = field(default_factory=list)
    # (path suffix, model name) for every model this node holds
    nested: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Row:
    """One field of one model."""

    name: str
    shape: Shape
    required: bool
    default: str
    description: str


@dataclass
class Section:
    """One model: its prose, its fields, its rules and the paths where the document has it."""

    name: str
    description: str
    rows: list[Row]
    rules: list[str]
    paths: list[str] = field(default_factory=list)


def _prose(text: str) -> str:
    """Docstring or description text as Markdown: reST ``code`` becomes `code`."""
    return text.replace("``", "`")


def _clause(text: str) -> str:
    """A type's own description as a clause in a list: lowercase start, no final stop."""
    text = cell(_prose(text)).rstrip(".")
    return text[:1].lower() + text[1:]


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n", 1)[0].split())


def _size(value: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= factor and value % factor == 0:
            return f"{value // factor} {unit}"
    return f"{value} bytes"


def _number(value: Any, name: str) -> str:
    text = code(str(value))
    if "bytes" in name and isinstance(value, int) and value >= 1024:
        text += f" ({_size(value)})"
    return text


def _range(node: dict[str, Any], name: str) -> str | None:
    low = high = None
    if "minimum" in node:
        low = ("≥", node["minimum"])
    if "exclusiveMinimum" in node:
        low = (">", node["exclusiveMinimum"])
    if "maximum" in node:
        high = ("≤", node["maximum"])
    if "exclusiveMaximum" in node:
        high = ("<", node["exclusiveMaximum"])
    if low and high and low[0] == "≥" and high[0] == "≤":
        return f"{_number(low[1], name)} to {_number(high[1], name)}"
    parts = [f"{bound[0]} {_number(bound[1], name)}" for bound in (low, high) if bound]
    return ", ".join(parts) or None


def _count(node: dict[str, Any], low: str, high: str, unit: str, units: str) -> str | None:
    least, most = node.get(low), node.get(high)
    if least is not None and most is not None:
        return f"{least} to {most} {units}"
    if most is not None:
        return f"at most {most} {unit if most == 1 else units}"
    if least is not None:
        return f"at least {least} {unit if least == 1 else units}"
    return None


def _key_name(names: dict[str, Any]) -> str:
    described = str(names.get("description", ""))
    for prefix, placeholder in KEY_NAMES.items():
        if described.startswith(prefix):
            return placeholder
    return "<key>"


def describe(node: dict[str, Any], name: str, top: bool = True) -> Shape:
    """The shape of schema ``node`` (of the field ``name``); ``top``: the field's own node."""
    if "$ref" in node:
        model = node["$ref"].rsplit("/", 1)[-1]
        return Shape(f"[{model}](#{anchor(model)})", nested=[("", model)])
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        shapes = [describe(o, name, top=False) for o in options]
        return Shape(
            " or ".join(s.type for s in shapes),
            [a for s in shapes for a in s.allowed],
            [n for s in shapes for n in s.nested],
        )
    allowed: list[str] = []
    if not top and node.get("description"):
        allowed.append(_clause(node["description"]))
    if "enum" in node:
        allowed.append("one of " + ", ".join(code(str(v)) for v in node["enum"]))
    if "const" in node:
        allowed.append("exactly " + code(str(node["const"])))
    kind = node.get("type")
    if kind == "array":
        item = describe(node.get("items", {}), name, top=False)
        count = _count(node, "minItems", "maxItems", "item", "items")
        allowed += [count] if count else []
        allowed += [f"each: {'; '.join(item.allowed)}"] if item.allowed else []
        nested = [(f"[]{suffix}", model) for suffix, model in item.nested]
        return Shape(f"list of {item.type}", allowed, nested)
    if kind == "object" and "properties" not in node:
        names = dict(node.get("propertyNames", {}))
        value_node: Any = node.get("additionalProperties", True)
        for pattern, sub in node.get("patternProperties", {}).items():
            names["pattern"], value_node = pattern, sub
        if value_node is True:
            return Shape("map (free-form)", allowed)
        key = _key_name(names)
        value = describe(value_node, name, top=False)
        count = _count(node, "minProperties", "maxProperties", "entry", "entries")
        allowed += [count] if count else []
        if names:
            key_rules = [_clause(names["description"])] if "description" in names else []
            if "pattern" in names:
                key_rules.append("matching " + code(names["pattern"]))
            length = _count(names, "minLength", "maxLength", "character", "characters")
            key_rules += [length] if length else []
            allowed.append(f"keys ({code(key)}): " + "; ".join(key_rules))
        allowed += [f"each value: {'; '.join(value.allowed)}"] if value.allowed else []
        nested = [(f".{key}{suffix}", model) for suffix, model in value.nested]
        return Shape(f"map of {code(key)} to {value.type}", allowed, nested)
    words = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}
    bounds = _range(node, name)
    length = _count(node, "minLength", "maxLength", "character", "characters")
    allowed += [b for b in (bounds, length) if b]
    if "pattern" in node:
        allowed.append("matching " + code(node["pattern"]))
    return Shape(words.get(str(kind), str(kind)), allowed)


def _flow(value: Any) -> str:
    """``value`` as one line of YAML."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _default(info: FieldInfo, name: str) -> str:
    value = info.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "unset"
    if value == "":
        return '`""`'
    if isinstance(value, BaseModel):
        changed = value.model_dump(mode="json", exclude_defaults=True)
        return code(_flow(changed)) if changed else "its fields' defaults"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return code(_flow(value))
    return _number(value, name)


def model_classes(root: type[BaseModel] = Application) -> dict[str, type[BaseModel]]:
    """Every model the document reaches, by class name (the JSON schema's definition names)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation.__name__ not in found:
                found[annotation.__name__] = annotation
                for info in annotation.model_fields.values():
                    visit(info.annotation)
            return
        for arg in get_args(annotation):
            visit(arg)

    visit(root)
    return found


def _rules(definition: dict[str, Any]) -> list[str]:
    return [cell(_prose(r["message"])) for r in definition.get("x-kubernetes-validations", [])]


def build(root: type[BaseModel] = Application) -> list[Section]:
    """The sections of the page, in the order the document reaches each model."""
    schema = root.model_json_schema(mode="validation")
    definitions: dict[str, dict[str, Any]] = {**schema.get("$defs", {}), root.__name__: schema}
    classes = model_classes(root)
    sections: dict[str, Section] = {}

    def section(name: str) -> Section:
        definition, model = definitions[name], classes[name]
        rows = []
        # the schema names a field by its alias (status.routes[].from is from_ in Python)
        by_key = {info.alias or name: info for name, info in model.model_fields.items()}
        for field_name, node in definition.get("properties", {}).items():
            info = by_key[field_name]
            shape = describe(node, field_name)
            text = node.get("description") or next(
                (_first_paragraph(definitions[m].get("description", "")) for _, m in shape.nested),
                "",
            )
            required = info.is_required()
            rows.append(
                Row(
                    field_name,
                    shape,
                    required,
                    "—" if required else _default(info, field_name),
                    cell(_prose(text)),
                )
            )
        description = _prose(str(definition.get("description", "")))
        if definition.get("additionalProperties") is True:
            description += "\n\nFields not listed here are kept as they are."
        return Section(name, description, rows, _rules(definition))

    def walk(name: str, path: str) -> None:
        if name not in sections:
            sections[name] = section(name)
        sections[name].paths.append(path)
        for row in sections[name].rows:
            for suffix, model in row.shape.nested:
                walk(model, _join(path, row.name) + suffix)

    walk(root.__name__, "")
    return list(sections.values())


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def field_paths(sections: Sequence[Section]) -> Iterator[tuple[str, Section, Row]]:
    """Every field of the document by its full path, in document order."""
    by_name = {s.name: s for s in sections}

    def under(section: Section, path: str) -> Iterator[tuple[str, Section, Row]]:
        for row in section.rows:
            here = _join(path, row.name)
            yield here, section, row
            for suffix, model in row.shape.nested:
                yield from under(by_name[model], here + suffix)

    yield from under(sections[0], "")


HEADER = """\
<!-- Generated by `python -m mas.reference.application` from runtime/mas/infra/models.py.
     Do not edit by hand: run `make reference`; CI fails when this file drifts. -->

# Application reference

Every field of the `Application` document (`apiVersion: infra.maslab.io/v1`, `kind:
Application`), read off the pydantic models in `runtime/mas/infra/models.py`, which also
generate the CRD (`crds/application.yaml`). A field that is not listed is an error that
names it: every model but `metadata` and `status` refuses unknown fields.

In a path, `<id>` stands for an agent id (or an endpoint id), `<header>` for an HTTP header
name, `<key>` for any other map key, and `[]` for each item of a list. Rules that tie
several parts of the document together (the entry agent, the advertised url, port
collisions, which endpoints `delegates_to` may name, plugin names) are checked by
`mas-ctl validate` and the operator: see `runtime/mas/infra/validation.py` and
`runtime/mas/infra/routes.py`, and the project README's rules.
"""


def render() -> str:
    """The page, exactly as committed."""
    sections = build()
    out = [HEADER, "## Every field by its path\n", "| path | type | default |", "|---|---|---|"]
    for path, section, row in field_paths(sections):
        link = f"[{code(path)}](#{anchor(section.name)})"
        default = "required" if row.required else row.default
        out.append(f"| {link} | {row.shape.type} | {default} |")
    for section in sections:
        out += ["", f"## {section.name}", "", section.description, ""]
        paths = ", ".join(code(p) if p else "the document itself" for p in section.paths)
        out += [f"At: {paths}", ""]
        out += [
            "| field | type | required | default | allowed | description |",
            "|---|---|---|---|---|---|",
        ]
        for row in section.rows:
            allowed = "; ".join(row.shape.allowed) or "—"
            required = "yes" if row.required else "no"
            cells = [code(row.name), row.shape.type, required, row.default, allowed]
            out.append("| " + " | ".join([*cells, row.description or "—"]) + " |")
        if section.rules:
            out += ["", "Rules:", ""] + [f"- {rule}" for rule in section.rules]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or check a committed copy."""
    return run(render, REGENERATE, argv, "python -m mas.reference.application")


if __name__ == "__main__":
    sys.exit(main())

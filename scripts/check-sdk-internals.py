"""Fail when a private a2a-sdk name is used outside ``server/sdk_internals.py``.

Usage: ``.venv/bin/python scripts/check-sdk-internals.py`` (``scripts/check`` runs it).
Reads ``runtime/`` and ``operator/`` with ``ast`` (nothing of ours is imported but the
adapter, for its declared overrides) and the installed SDK, and reports ``file:line`` for:

1. an import of a private name or module from ``a2a`` (``from a2a.x import _y``,
   ``import a2a._x``);
2. a private attribute read on a name imported from ``a2a`` (``DefaultRequestHandler._x``,
   ``grpc_module._map_grpc_error``), or a ``getattr`` of such a name by string;
3. in a class deriving from an SDK class (directly or through our own classes), a
   ``self._x`` / ``cls._x`` / ``super()._x`` or a definition ``_x`` where ``_x`` is a
   private name of that SDK class (its class attributes and the ``self._x`` its source
   uses): reading the SDK's state, or overriding or shadowing its private methods; only the
   overrides declared in ``sdk_internals.OVERRIDES`` (and their ``super()`` call) pass;
4. ``other._x`` on any other object where ``_x`` is private to the SDK and no class of
   ours defines it (our own ``self._lock`` and the like are ours, not the SDK's).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (ROOT / "runtime", ROOT / "operator")
ADAPTER = ROOT / "runtime/library_ioa/plugins/a2a/server/sdk_internals.py"
OURS = ("mas", "library_ioa", "mas_operator")


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_name(path: Path) -> str:
    for source in SOURCES:
        if path.is_relative_to(source):
            parts = path.relative_to(source).with_suffix("").parts
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def module_path(name: str) -> Path | None:
    for source in SOURCES:
        base = source.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def sdk_private_names() -> set[str]:
    """Every private name the installed SDK defines: defs, classes, assignments, self._x."""
    spec = importlib.util.find_spec("a2a")
    assert spec is not None and spec.submodule_search_locations, "a2a-sdk is not installed"
    names: set[str] = set()
    for path in Path(spec.submodule_search_locations[0]).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if private(name)}


def class_private_names(cls: type) -> set[str]:
    """An SDK class's private names: its MRO's class attributes and the self._x they use."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("a2a"):
            continue
        names |= {name for name in vars(klass) if private(name)}
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.Attribute)
                and private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in {"self", "cls"}
            ):
                names.add(node.attr)
    return names


@dataclass
class Module:
    path: Path
    name: str
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)


class Checker:
    def __init__(self, overrides: set[tuple[str, str, str]]) -> None:
        self.overrides = overrides
        self.sdk_names = sdk_private_names()
        self.modules: dict[str, Module] = {}
        self.sdk_of: dict[tuple[str, str], set[str] | None] = {}
        self.problems: list[tuple[str, int, str]] = []  # (file, line, what)

    def load(self, path: Path, text: str | None = None) -> Module:
        """The module at ``path`` (``text``: its source, instead of the file's)."""
        name = module_name(path)
        if name not in self.modules:
            source = path.read_text(encoding="utf-8") if text is None else text
            tree = ast.parse(source, str(path))
            module = Module(path, name, tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        local = alias.asname or alias.name.split(".")[0]
                        module.imports[local] = alias.name if alias.asname else local
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    for alias in node.names:
                        module.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif isinstance(node, ast.ClassDef):
                    module.classes.setdefault(node.name, node)
            self.modules[name] = module
        return self.modules[name]

    def report(self, module: Module, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.append((str(module.path.relative_to(ROOT)), line, what))

    def origin(self, module: Module, expr: ast.expr) -> str | None:
        """The dotted origin of a base-class expression, from this module's imports."""
        if isinstance(expr, ast.Name):
            if expr.id in module.classes:
                return f"{module.name}.{expr.id}"
            return module.imports.get(expr.id)
        if isinstance(expr, ast.Attribute):
            inner = self.origin(module, expr.value)
            return f"{inner}.{expr.attr}" if inner else None
        return None

    def sdk_names_of(self, dotted: str) -> set[str] | None:
        """The SDK private names a class inherits (``None``: not derived from the SDK)."""
        owner, _, name = dotted.rpartition(".")
        key = (owner, name)
        if key in self.sdk_of:
            return self.sdk_of[key]
        self.sdk_of[key] = None  # a cycle is not an SDK class
        found: set[str] | None = None
        if owner.split(".")[0] == "a2a":
            cls = getattr(importlib.import_module(owner), name, None)
            if isinstance(cls, type):
                found = class_private_names(cls)
        elif owner in self.modules or (
            owner.split(".")[0] in OURS and (path := module_path(owner)) is not None
        ):
            module = self.modules.get(owner) or self.load(path)
            node = module.classes.get(name)
            if node is not None:
                for base in node.bases:
                    origin = self.origin(module, base)
                    inherited = self.sdk_names_of(origin) if origin else None
                    if inherited is not None:
                        found = (found or set()) | inherited
        self.sdk_of[key] = found
        return found

    def ours_define(self) -> set[str]:
        """Private names our classes not derived from the SDK define on themselves."""
        names: set[str] = set()
        for module in self.modules.values():
            for node in ast.walk(module.tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                if self.sdk_names_of(f"{module.name}.{node.name}") is not None:
                    continue
                for inner in ast.walk(node):
                    if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(inner.name)
                    elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Store):
                        names.add(inner.attr)
                    elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                        names.add(inner.id)
        return {name for name in names if private(name)}

    def check(self, module: Module, ours: set[str]) -> None:
        a2a_bound = {k for k, v in module.imports.items() if v.split(".")[0] == "a2a"}
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.split(".")[0] == "a2a":
                    if any(private(part) for part in node.module.split(".")):
                        self.report(module, node, f"imports the private module {node.module}")
                    for alias in node.names:
                        if private(alias.name):
                            self.report(module, node, f"imports {node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "a2a" and any(private(part) for part in parts):
                        self.report(module, node, f"imports the private module {alias.name}")
            elif isinstance(node, ast.Attribute) and private(node.attr):
                value = node.value
                if isinstance(value, ast.Name) and value.id in a2a_bound:
                    self.report(module, node, f"reads {value.id}.{node.attr} of a2a")
                elif not self.on_self(value) and node.attr in self.sdk_names - ours:
                    self.report(module, node, f"reads the SDK's private {node.attr}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "setattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and node.args[1].value in self.sdk_names - ours
            ):
                what = f"{node.func.id} of the SDK's private {node.args[1].value}"
                self.report(module, node, what)
            elif isinstance(node, ast.ClassDef):
                self.check_class(module, node)

    @staticmethod
    def on_self(value: ast.expr) -> bool:
        if isinstance(value, ast.Name):
            return value.id in {"self", "cls"}
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "super"
        )

    def check_class(self, module: Module, cls: ast.ClassDef) -> None:
        inherited = self.sdk_names_of(f"{module.name}.{cls.name}")
        if not inherited:
            return
        declared = {name for m, c, name in self.overrides if (m, c) == (module.name, cls.name)}
        for item in cls.body:
            defined = None
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                defined = item.name
            elif isinstance(item, ast.Assign | ast.AnnAssign):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                defined = next((n for n in names if n in inherited), None)
            if defined in inherited and defined not in declared:
                self.report(
                    module, item, f"{cls.name} overrides or shadows the SDK's private {defined}"
                )
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in inherited
                and self.on_self(node.value)
                and not (isinstance(node.value, ast.Call) and node.attr in declared)
            ):
                self.report(module, node, f"{cls.name} uses the SDK's private {node.attr}")


def problems(extra: dict[Path, str] | None = None) -> tuple[int, list[str]]:
    """The modules read and each use found, as ``file:line: what``, in file and line order;
    ``extra``: more modules (path under a source root: source text) to read as well."""
    for source in reversed(SOURCES):
        if str(source) not in sys.path:
            sys.path.insert(0, str(source))
    from library_ioa.plugins.a2a.server import sdk_internals

    checker = Checker(set(sdk_internals.OVERRIDES))
    paths = sorted(p for source in SOURCES for p in source.rglob("*.py") if p != ADAPTER)
    modules = [checker.load(path) for path in paths]
    modules += [checker.load(path, text) for path, text in (extra or {}).items()]
    ours = checker.ours_define()
    for module in modules:
        checker.check(module, ours)
    return len(modules), [f"{f}:{line}: {what}" for f, line, what in sorted(set(checker.problems))]


def main() -> int:
    count, found = problems()
    for problem in found:
        print(problem)
    if found:
        print(
            f"{len(found)} private a2a-sdk name(s) used outside "
            f"{ADAPTER.relative_to(ROOT)}: reach them through it (its docstring says how)."
        )
        return 1
    print(f"sdk internals: {count} modules, no private a2a-sdk name outside the adapter")
    return 0


if __name__ == "__main__":
    sys.exit(main())

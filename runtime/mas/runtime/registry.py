"""The plugin registry: contracts' implementations selected by category and name.

Categories used by the product:

- ``agent_comm``: the low-level outbound send (``local``: in-process bus; ``a2a``: a2a-sdk
  client). An endpoint's ``protocol`` selects the implementation.
- ``agent_expose``: ingress adapters (``a2a``: the A2A server; ``mcp``: the agent as an MCP
  server).
- ``model``: model plugins (``echo``, ``scripted``, ``openai``, ``anthropic``).
- ``tool_source``: tool servers an agent's ``spec.tools`` names (``mcp``: an MCP server
  over streamable HTTP); an endpoint with usage ``use`` and this protocol is a tool server.

Built-in plugins are named by ``"module:attribute"`` and imported on first use, so listing
names never imports a plugin. Third-party plugins come from the entry-point group
``mas.plugins``, each entry named ``<category>.<name>`` (for example
``agent_comm.nats = my_pkg.comm:NatsAgentComm``). A plugin that fails to load raises
:class:`~mas.runtime.errors.PluginLoadError` naming it; nothing is skipped silently.

Thread safety: registration happens at start-up; lookups afterwards are read-only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from mas.infra.errors import PluginNameError
from mas.infra.plugins import BUILTINS, CATEGORIES, ENTRY_POINT_GROUP, entry_point_key
from mas.infra.validation import KnownPlugins
from mas.runtime.errors import PluginConfigError, PluginLoadError, UnknownPlugin

Factory = Callable[..., Any]


@dataclass
class _Entry:
    category: str
    name: str
    origin: str
    target: str | Factory
    loaded: Factory | None = None
    entry_point: metadata.EntryPoint | None = None


@dataclass(frozen=True)
class PluginInfo:
    """One registered plugin as ``mas-ctl plugins`` lists it."""

    category: str
    name: str
    distribution: str
    target: str


def _target_text(entry: _Entry) -> str:
    return entry.target if isinstance(entry.target, str) else repr(entry.target)


def _distribution(entry: _Entry) -> str:
    """The installed distribution that provides the plugin, or how it was registered."""
    if entry.entry_point is not None:
        dist = getattr(entry.entry_point, "dist", None)
        return getattr(dist, "name", None) or "unknown distribution"
    if not isinstance(entry.target, str):
        return f"({entry.origin})"
    top = entry.target.partition(":")[0].partition(".")[0]
    names = metadata.packages_distributions().get(top)
    return ", ".join(sorted(set(names))) if names else f"({entry.origin}, not installed)"


def _import_target(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


class Registry:
    """Plugins by category and name."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, _Entry]] = {c: {} for c in CATEGORIES}

    def register(
        self, category: str, name: str, target: str | Factory, *, origin: str = "code"
    ) -> None:
        """Add (or replace) a plugin: a factory, or ``"module:attribute"`` imported lazily."""
        self._entries.setdefault(category, {})[name] = _Entry(category, name, origin, target)

    def categories(self) -> tuple[str, ...]:
        """Every category that has at least one plugin, plus the product's own."""
        return tuple(self._entries)

    def names(self, category: str) -> list[str]:
        """The plugin names of ``category``, sorted; no plugin is imported."""
        return sorted(self._entries.get(category, {}))

    def known_plugins(self) -> KnownPlugins:
        """The names the document validation accepts."""
        return KnownPlugins(
            agent_comm=self.names("agent_comm"),
            agent_expose=self.names("agent_expose"),
            model=self.names("model"),
            tool_source=self.names("tool_source"),
        )

    def get(self, category: str, name: str) -> Factory:
        """The plugin's factory (class or callable), loading it on first use."""
        entry = self._entries.get(category, {}).get(name)
        if entry is None:
            raise UnknownPlugin(category, name, self.names(category))
        if entry.loaded is None:
            entry.loaded = self._load(entry)
        return entry.loaded

    def create(
        self, category: str, name: str, params: Mapping[str, Any] | None = None, **context: Any
    ) -> Any:
        """A new plugin instance: ``factory(**params, **context)``.

        ``params`` come from the document (so a refusal is the user's to fix and becomes a
        :class:`PluginConfigError` naming the plugin); ``context`` is what the runtime adds.
        """
        factory = self.get(category, name)
        try:
            return factory(**dict(params or {}), **context)
        except TypeError as exc:
            raise PluginConfigError(
                f"{category} plugin {name!r} refused its parameters "
                f"{sorted((params or {}).keys())}: {exc}"
            ) from exc
        except ValueError as exc:
            raise PluginConfigError(f"{category} plugin {name!r}: {exc}") from exc

    def load_all(self) -> None:
        """Load every plugin now; the first failure raises (``mas-ctl plugins --check``
        loads each one and reports every failure instead)."""
        for category in self._entries:
            for name in self.names(category):
                self.get(category, name)

    def describe(self) -> list[PluginInfo]:
        """Every plugin by category then name, with where it comes from; none is imported."""
        return [
            PluginInfo(entry.category, entry.name, _distribution(entry), _target_text(entry))
            for category in self._entries
            for entry in sorted(self._entries[category].values(), key=lambda e: e.name)
        ]

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Register every entry point of ``group``; a malformed name is an error naming it."""
        for ep in metadata.entry_points(group=group):
            try:
                category, name = entry_point_key(ep.name, ep.value, group)
            except PluginNameError as exc:
                raise PluginLoadError(str(exc)) from exc
            dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown distribution"
            entry = _Entry(category, name, f"entry point of {dist}", ep.value, entry_point=ep)
            self._entries.setdefault(category, {})[name] = entry

    @staticmethod
    def _load(entry: _Entry) -> Factory:
        where = entry.target if isinstance(entry.target, str) else repr(entry.target)
        try:
            if entry.entry_point is not None:
                loaded = entry.entry_point.load()
            elif isinstance(entry.target, str):
                loaded = _import_target(entry.target)
            else:
                loaded = entry.target
        except Exception as exc:
            raise PluginLoadError(
                f"{entry.category} plugin {entry.name!r} ({entry.origin}, {where}) failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
        if not callable(loaded):
            raise PluginLoadError(
                f"{entry.category} plugin {entry.name!r} ({entry.origin}, {where}) is not callable"
            )
        return loaded  # type: ignore[no-any-return]


def builtin_registry() -> Registry:
    """A registry with the built-in plugins only."""
    registry = Registry()
    for category, plugins in BUILTINS.items():
        for name, target in plugins.items():
            registry.register(category, name, target, origin="built-in")
    return registry


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The process-wide registry: built-ins plus the ``mas.plugins`` entry points."""
    global _DEFAULT  # noqa: PLW0603
    if _DEFAULT is None:
        registry = builtin_registry()
        registry.load_entry_points()
        _DEFAULT = registry
    return _DEFAULT

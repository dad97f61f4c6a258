"""Errors of the agent runtime.

The tree::

    RuntimeFailure                 base of everything raised by mas.runtime
    ├── RegistryError              plugin registry problems
    │   ├── UnknownPlugin          no plugin of that name in the category (lists the known ones)
    │   ├── PluginLoadError        a plugin's code failed to import or is not callable
    │   └── PluginConfigError      the plugin refused its parameters
    └── (the runtime issue adds delegation, comm and mailbox errors here)
"""

from __future__ import annotations


class RuntimeFailure(Exception):
    """Base of the errors raised by ``mas.runtime``."""


class RegistryError(RuntimeFailure):
    """Base of the plugin registry's errors."""


class UnknownPlugin(RegistryError):
    """No plugin of that name in that category."""

    def __init__(self, category: str, name: str, known: list[str]) -> None:
        self.category, self.name, self.known = category, name, known
        super().__init__(
            f"no {category} plugin named {name!r}; known: {', '.join(known) or '(none)'}"
        )


class PluginLoadError(RegistryError):
    """A plugin's code could not be loaded; the message names the plugin and where it lives."""


class PluginConfigError(RegistryError):
    """A plugin refused the parameters it was given."""

"""One error base for library_ioa: every exception class derives from ``LibraryError``, the
public ones keep the standard-library base their callers catch, and the tree in
``library_ioa.errors`` names each public one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import a2a.client  # noqa: F401  # first: see library_ioa.plugins.a2a.__init__

import library_ioa
from library_ioa import errors
from library_ioa.errors import LibraryError


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a library_ioa module, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(library_ioa.__path__, "library_ioa."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_library_exception_derives_from_the_base() -> None:
    classes = exception_classes()
    assert "library_ioa.serving.listeners.ListenError" in classes  # the walk found them
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, LibraryError))
    assert outside == []


def test_public_errors_keep_the_base_their_callers_catch() -> None:
    classes = exception_classes()
    assert issubclass(classes["library_ioa.plugins.a2a.agentcard.AgentCardError"], ValueError)
    assert issubclass(classes["library_ioa.serving.auth.AuthConfigError"], ValueError)
    assert issubclass(classes["library_ioa.serving.listeners.ListenError"], OSError)
    store_error = classes["library_ioa.plugins.a2a.server.stores.task_stores.TaskStoreError"]
    assert issubclass(store_error, OSError)


def test_the_tree_names_every_public_error() -> None:
    tree = errors.__doc__ or ""
    public = {cls.__name__ for cls in exception_classes().values() if cls is not LibraryError}
    missing = sorted(name for name in public if not name.startswith("_") and name not in tree)
    assert missing == []

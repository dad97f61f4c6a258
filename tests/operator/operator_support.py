"""Helpers of the operator tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes.client import ApiException

from mas_operator.runner import OperatorHandle, OperatorOptions, run_operator

REPO = Path(__file__).resolve().parent.parent.parent
CRD_FILE = REPO / "crds" / "application.yaml"
GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"
T = TypeVar("T")
CRD_FILE = REPO / "crds" / "application.yaml"
GROUP, VERSION, PLURAL = "infra.maslab.io", "v1", "applications"


def eventually(
    check: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "the condition",
) -> T:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except AssertionError as exc:
            last = exc
        except ApiException as exc:  # not there yet
            if exc.status != 404:
                raise
            last = f"404 {exc.reason}"
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


def crd_document() -> dict[str, Any]:
    """The committed CRD (``crds/application.yaml``, generated from the models)."""
    return dict(yaml.safe_load(CRD_FILE.read_text()))


class RunningOperator:
    """``run_operator`` in a thread of its own, as ``mas-operator run`` would run it."""

    def __init__(self, options: OperatorOptions) -> None:
        self.options = options
        self.handle = OperatorHandle()
        self.error: BaseException | None = None
        self.result: bool | None = None
        self._thread = threading.Thread(target=self._main, name="mas-operator", daemon=True)

    def _main(self) -> None:
        async def go() -> bool:
            self.handle.stop_event = asyncio.Event()
            return await run_operator(self.options, self.handle)

        try:
            self.result = asyncio.run(go())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self, wait_leading: bool = True) -> RunningOperator:
        self._thread.start()
        if wait_leading:
            eventually(lambda: self.handle.leading or self.error, 30, what="the operator to lead")
            if self.error:
                raise self.error
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self.handle.stop()
        self._thread.join(timeout)
        if self._thread.is_alive():
            pytest.fail(f"the operator did not stop within {timeout:.0f}s")
        if self.error is not None:
            raise self.error

"""Which A2A path the tests serve by default: ``MAS_A2A_FAST_PATH=0`` turns the fast path off.

CI runs the A2A, durable, auth, push and client tests a second time with ``MAS_A2A_FAST_PATH=0``
(``.ci/run``), so that the a2a-sdk's own path stays correct on its own. Every helper that
builds an endpoint or an Application for these tests passes its ``a2a`` options through
:func:`fast_path_options` (or a whole document through :func:`fast_path_document`), which
then adds ``fast_path: false``; with the variable unset (or ``1``) nothing is added and the
endpoint's default (on) holds. The differential tests, which serve both paths side by side
on purpose (``fast_send=True`` and ``fast_send=False``), do not follow the variable.

A test that cannot pass on the SDK's path alone is skipped under the variable with
``pytest.mark.skipif(not FAST_PATH, reason=...)``, the reason naming what fails and why.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

FAST_PATH = os.environ.get("MAS_A2A_FAST_PATH", "1").strip() not in {"0", "false", "off", "no"}


def fast_path_options(a2a: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An endpoint's ``a2a`` options, with ``fast_path: false`` under ``MAS_A2A_FAST_PATH=0``
    (unless they name ``fast_path`` themselves)."""
    options = dict(a2a or {})
    if not FAST_PATH:
        options.setdefault("fast_path", False)
    return options


def fast_path_document(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (an Application) with every A2A endpoint's options through
    :func:`fast_path_options`; the document itself is left as it was."""
    result = copy.deepcopy(dict(document))
    if FAST_PATH:
        return result
    for endpoint in (result.get("spec", {}).get("endpoints") or {}).values():
        if isinstance(endpoint, dict) and endpoint.get("protocol", "a2a") == "a2a":
            endpoint["a2a"] = fast_path_options(endpoint.get("a2a"))
    return result

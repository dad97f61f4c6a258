"""How Secret-backed values reach a runtime pod without ever being copied into a document.

The operator maps each ``secret_key_ref`` to an environment variable of the pod through
``valueFrom.secretKeyRef``; the runtime reads the same variable. Both sides derive the name
here, so the convention has one home.
"""

from __future__ import annotations

import hashlib
import re

from mas.infra.models import SecretKeyRef

_UNSAFE = re.compile(r"[^A-Z0-9]+")


def secret_env_name(ref: SecretKeyRef) -> str:
    """``MAS_SECRET_<NAME>_<KEY>_<hash>``: stable, a valid env name, distinct per (name, key)."""
    digest = hashlib.sha256(f"{ref.name}\0{ref.key}".encode()).hexdigest()[:8].upper()
    stem = _UNSAFE.sub("_", f"{ref.name}_{ref.key}".upper()).strip("_")[:60]
    return f"MAS_SECRET_{stem}_{digest}"

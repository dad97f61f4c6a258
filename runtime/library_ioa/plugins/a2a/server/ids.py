"""The ids the server makes up: random UUIDs as text, as the SDK makes them.

The SDK's ``UUIDGenerator`` and the fast handler's ids are ``str(uuid.uuid4())``, which builds
a ``uuid.UUID`` object only to print it (what that costs: docs/performance.md, "Where the
time goes"). :func:`random_uuid` writes the same text straight from the same 16 random bytes
(``os.urandom``), with the version (4) and variant (RFC 4122) bits set as ``uuid.UUID``
sets them; :func:`uuid4_text` is that layout for given bytes, which
``tests/unit/test_a2a_ids.py`` compares with ``uuid.UUID(bytes=..., version=4)``.
"""

from __future__ import annotations

import os

__all__ = ["random_uuid", "uuid4_text"]


def uuid4_text(raw: bytes) -> str:
    """``str(uuid.UUID(bytes=raw, version=4))`` for 16 bytes ``raw``."""
    if len(raw) != 16:
        raise ValueError(f"a UUID takes 16 bytes, not {len(raw)}")
    value = bytearray(raw)
    value[6] = value[6] & 0x0F | 0x40  # the version nibble: 4
    value[8] = value[8] & 0x3F | 0x80  # the variant's two top bits: 0b10 (RFC 4122)
    digits = value.hex()
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))


def random_uuid() -> str:
    """A new random (version 4) UUID as text: ``str(uuid.uuid4())``, cheaper."""
    return uuid4_text(os.urandom(16))

"""The server's random ids are the text of version 4 UUIDs, as ``str(uuid.uuid4())``."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from library_ioa.plugins.a2a.server.ids import random_uuid, uuid4_text


@given(st.binary(min_size=16, max_size=16))
def test_the_text_is_uuids_for_the_same_bytes(raw: bytes) -> None:
    assert uuid4_text(raw) == str(uuid.UUID(bytes=raw, version=4))


def test_a_random_id_is_a_version_4_uuid_and_new_each_time() -> None:
    ids = [random_uuid() for _ in range(200)]
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("size", [0, 15, 17])
def test_other_lengths_are_refused(size: int) -> None:
    with pytest.raises(ValueError, match=f"16 bytes, not {size}"):
        uuid4_text(b"\0" * size)

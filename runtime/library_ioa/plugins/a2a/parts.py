"""Mapping between the runtime's turn types and A2A parts, artifacts and messages.

Used both ways: the executor turns :class:`~mas.runtime.turns.ArtifactEmitted` into A2A
artifact parts, and :class:`~library_ioa.plugins.a2a.agent_comm.A2AAgentComm` turns a
peer's A2A artifacts back into ``ArtifactEmitted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from a2a.types import Artifact, Message, Part
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from mas.runtime.turns import (
    CALLER_CALL_ID,
    CORRELATION_ID,
    DELEGATION_DEPTH,
    ORIGIN_PRINCIPAL,
    ArtifactEmitted,
    origin_principal,
)

MAS_METADATA_KEYS = (CALLER_CALL_ID, CORRELATION_ID, DELEGATION_DEPTH)


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A protobuf Struct as plain JSON-like Python values."""
    return dict(MessageToDict(struct))


def dict_to_struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    """Plain JSON-like values as a protobuf Struct."""
    return ParseDict(dict(values), struct_pb2.Struct())


def data_part(data: Mapping[str, Any], media_type: str = "application/json") -> Part:
    """A structured-data part."""
    return Part(data=ParseDict(dict(data), struct_pb2.Value()), media_type=media_type)


def text_of(parts: Iterable[Part]) -> str:
    """The text parts joined (no separator: streamed chunks concatenate)."""
    return "".join(part.text for part in parts if part.WhichOneof("content") == "text")


def data_of(parts: Iterable[Part]) -> dict[str, Any] | None:
    """The first structured-data part that is a JSON object, if any."""
    for part in parts:
        if part.WhichOneof("content") == "data":
            value = MessageToDict(part.data)
            if isinstance(value, dict):
                return value
    return None


def mas_metadata(message: Message, principal: str = "") -> dict[str, Any]:
    """The ``mas.*`` keys of a message's metadata; a float depth becomes an int.

    ``mas.origin_principal`` is the claim of the message only when the request came from an
    agent (``principal``, its verified ServiceAccount), else ``principal`` itself
    (:func:`mas.runtime.turns.origin_principal`); absent when both are empty."""
    metadata = struct_to_dict(message.metadata) if message.HasField("metadata") else {}
    out = {key: metadata[key] for key in MAS_METADATA_KEYS if key in metadata}
    origin = origin_principal(metadata.get(ORIGIN_PRINCIPAL), principal)
    if origin:
        out[ORIGIN_PRINCIPAL] = origin
    depth = out.get(DELEGATION_DEPTH)
    if isinstance(depth, float) and depth.is_integer():
        out[DELEGATION_DEPTH] = int(depth)
    return out


def artifact_parts(artifact: ArtifactEmitted) -> list[Part]:
    """The A2A parts of one runtime artifact."""
    media = artifact.media_type or ""
    if artifact.kind == "text":
        return [Part(text=artifact.text or "", media_type=media or "text/plain")]
    if artifact.kind == "data":
        return [data_part(artifact.data or {}, media or "application/json")]
    if artifact.kind == "file":
        return [
            Part(
                raw=artifact.content or b"",
                media_type=media or "application/octet-stream",
                filename=artifact.name,
            )
        ]
    return [Part(url=artifact.url or "", media_type=media, filename=artifact.name)]


def artifact_from_a2a(artifact: Artifact) -> ArtifactEmitted:
    """A peer's A2A artifact as a runtime artifact (its first part decides the kind)."""
    name = artifact.name or artifact.artifact_id
    aid = artifact.artifact_id or None
    parts = list(artifact.parts)
    kinds = {part.WhichOneof("content") for part in parts}
    first = parts[0] if parts else Part(text="")
    media = first.media_type or None
    if kinds <= {"text"}:
        return ArtifactEmitted("text", name, text=text_of(parts), media_type=media, artifact_id=aid)
    kind = first.WhichOneof("content")
    if kind == "data":
        return ArtifactEmitted("data", name, data=data_of(parts), media_type=media, artifact_id=aid)
    if kind == "raw":
        return ArtifactEmitted(
            "file", first.filename or name, content=first.raw, media_type=media, artifact_id=aid
        )
    if kind == "url":
        return ArtifactEmitted(
            "url", first.filename or name, url=first.url, media_type=media, artifact_id=aid
        )
    return ArtifactEmitted("text", name, text=text_of(parts), media_type=media, artifact_id=aid)

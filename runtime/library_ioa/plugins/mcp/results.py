"""An MCP ``CallToolResult`` as what the model reads and the artifacts of the turn.

Rules (written against ``mcp`` 2.3):

- text blocks are the model's text, joined by blank lines;
- structured content is given to the model as JSON (after the text, or alone), since a
  chat model reads text; it is not an artifact. Structured content that only repeats the
  text is not repeated: the text is its JSON serialization (as the MCP spec asks servers
  to send), or it is ``{"result": value}`` with the text being that value (how the SDKs
  wrap a plain return value);
- images, audio and binary embedded resources become ``file`` artifacts with their media
  type (the model reads a line naming each); a text embedded resource is both model text
  and a ``text`` artifact; a resource link becomes a ``url`` artifact;
- artifacts are named ``<tool>-<n>`` (n from 1, in block order).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from mas.runtime.boundary.tools import ToolOutcome
from mas.runtime.turns import ArtifactEmitted


def outcome_of(tool: str, result: CallToolResult) -> ToolOutcome:
    """The :class:`ToolOutcome` of one MCP tool result (see the module docstring)."""
    lines: list[str] = []
    artifacts: list[ArtifactEmitted] = []

    def name() -> str:
        return f"{tool}-{len(artifacts) + 1}"

    for block in result.content:
        if isinstance(block, TextContent):
            lines.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            artifact = ArtifactEmitted(
                "file", name(), content=_decoded(block.data), media_type=block.mime_type
            )
            artifacts.append(artifact)
            lines.append(f"[{block.type} {block.mime_type} returned as artifact {artifact.name}]")
        elif isinstance(block, EmbeddedResource):
            lines.append(_resource(block, name(), artifacts))
        elif isinstance(block, ResourceLink):
            artifact = ArtifactEmitted(
                "url", name(), url=str(block.uri), media_type=block.mime_type
            )
            artifacts.append(artifact)
            lines.append(f"[resource link {block.uri} returned as artifact {artifact.name}]")
    structured = result.structured_content
    if structured is not None and not _repeats(structured, lines):
        lines.append("structured content (JSON): " + _json(structured))
    text = "\n\n".join(lines) if lines else "(the tool returned no content)"
    return ToolOutcome(not result.is_error, text, tuple(artifacts))


def _resource(block: EmbeddedResource, name: str, artifacts: list[ArtifactEmitted]) -> str:
    resource = block.resource
    uri = str(resource.uri)
    if isinstance(resource, BlobResourceContents):
        artifacts.append(
            ArtifactEmitted(
                "file", name, content=_decoded(resource.blob), media_type=resource.mime_type
            )
        )
        return f"[resource {uri} returned as artifact {name}]"
    artifacts.append(
        ArtifactEmitted("text", name, text=resource.text, media_type=resource.mime_type)
    )
    return f"[resource {uri}]\n{resource.text}"


def _repeats(structured: Any, lines: list[str]) -> bool:
    """Whether ``structured`` says nothing the text blocks do not already say."""
    values = [structured]
    if isinstance(structured, dict) and list(structured) == ["result"]:
        values.append(structured["result"])
    for line in lines:
        if line in (str(v) for v in values):
            return True
        try:
            if json.loads(line) in values:
                return True
        except ValueError:
            continue
    return False


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode()


def _json(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 20_000 else text[:19_997] + "..."

"""MCP tool results as model text and artifacts (pure: built results, no server)."""

from __future__ import annotations

import base64

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ResourceLink,
    TextContent,
)

from library_ioa.plugins.mcp.results import outcome_of


def test_structured_content_that_adds_to_the_text_is_given_as_json() -> None:
    result = CallToolResult(
        content=[TextContent(text="3 matches")], structured_content={"matches": [1, 2, 3]}
    )
    outcome = outcome_of("find", result)
    assert outcome.text == '3 matches\n\nstructured content (JSON): {"matches": [1, 2, 3]}'
    assert outcome.ok and outcome.artifacts == ()


def test_structured_content_repeating_its_json_text_is_not_repeated() -> None:
    result = CallToolResult(
        content=[TextContent(text='{"matches": 3}')], structured_content={"matches": 3}
    )
    assert outcome_of("find", result).text == '{"matches": 3}'


def test_audio_blobs_and_links_are_artifacts_named_by_tool_and_order() -> None:
    blob = base64.b64encode(b"%PDF").decode()
    result = CallToolResult(
        content=[
            AudioContent(data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///a.pdf", mime_type="application/pdf", blob=blob
                )
            ),
            ResourceLink(name="spec", uri="https://example.org/spec", mime_type="text/html"),
        ],
        is_error=False,
    )
    outcome = outcome_of("fetch", result)
    got = [(a.kind, a.name, a.content, a.url, a.media_type) for a in outcome.artifacts]
    assert got == [
        ("file", "fetch-1", b"RIFF", None, "audio/wav"),
        ("file", "fetch-2", b"%PDF", None, "application/pdf"),
        ("url", "fetch-3", None, "https://example.org/spec", "text/html"),
    ]
    assert outcome.text.splitlines()[0] == "[audio audio/wav returned as artifact fetch-1]"


def test_an_error_result_without_content_still_says_something() -> None:
    outcome = outcome_of("x", CallToolResult(content=[], is_error=True))
    assert (outcome.ok, outcome.text) == (False, "(the tool returned no content)")

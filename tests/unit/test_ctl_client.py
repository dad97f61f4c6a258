"""The pure parts of mas-ctl's A2A client: credentials, TARGET forms, terminal-safe output and
file names, how a task's events fold into what a person sees, the global options after
the command, and which transport a card's JSON leads to before the SDK's client is loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a2a.types import (
    Artifact,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from library_ioa.plugins.a2a.parts import dict_to_struct
from mas.ctl.cli import build_parser
from mas.ctl.client.connection import choose_interface, grpc_wanted, parse_card
from mas.ctl.client.credentials import resolve_credentials
from mas.ctl.client.errors import OptionError, TargetError, TransportMissing
from mas.ctl.client.exchange import TaskFold, TurnIds
from mas.ctl.client.output import safe_name, save_file, terminal_text
from mas.ctl.client.targets import is_cluster_target, parse_url_target
from mas.ctl.client.turn_output import reported_line
from mas.runtime.turns import Delegated, TextDelta

SECRET = "do-not-show-me"


def test_token_file_header_and_environment_precedence(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"  {SECRET}\n")
    made = resolve_credentials(["X-Trace: on"], str(token), None, environ={})
    assert dict(made.headers) == {"X-Trace": "on", "Authorization": f"Bearer {SECRET}"}
    assert SECRET not in repr(made)

    from_env = resolve_credentials([], None, None, environ={"MAS_CTL_TOKEN": SECRET})
    assert from_env.headers == {"Authorization": f"Bearer {SECRET}"}
    env_file = {"MAS_CTL_TOKEN_FILE": str(token), "MAS_CTL_TOKEN": "other"}
    assert resolve_credentials([], None, None, environ=env_file).headers == {
        "Authorization": f"Bearer {SECRET}"
    }
    header_wins = resolve_credentials(
        ["authorization: Basic abc"], None, None, environ={"MAS_CTL_TOKEN": SECRET}
    )
    assert header_wins.headers == {"authorization": "Basic abc"}
    ca = resolve_credentials([], None, None, environ={"MAS_CTL_CACERT": "/ca.pem"})
    assert ca.cacert == Path("/ca.pem")


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([SECRET], "-H #1 has no ':'; accepted: -H 'Name: value'"),
        (["ok: 1", f"bad name: {SECRET}"], "-H #2: 'bad name' is not a header name"),
        (["X-Empty:  "], "-H #1 (X-Empty): the value is empty or has a line break"),
    ],
)
def test_a_bad_header_is_named_by_position_never_by_value(headers: list[str], message: str) -> None:
    with pytest.raises(OptionError) as caught:
        resolve_credentials(headers, None, None, environ={})
    assert str(caught.value).startswith(message)
    assert SECRET not in str(caught.value)


def test_an_empty_or_two_line_token_file_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(f"{SECRET}\nsecond line\n")
    with pytest.raises(OptionError, match="is empty or holds more than one line") as caught:
        resolve_credentials([], str(token), None, environ={})
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("target", "base"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("https://agents.example/desk/", "https://agents.example/desk"),
    ],
)
def test_url_targets(target: str, base: str) -> None:
    assert parse_url_target(target).base_url == base
    assert parse_url_target(target).rewrite("http://in-cluster:8080") == "http://in-cluster:8080"


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("ftp://host/x", "scheme 'ftp' is not served"),
        ("http://", "has no host and port to connect to"),
        ("http://host:0", "has no host and port to connect to"),
        ("http://host:99999", "is not a valid URL"),
        ("http://host/?q=1", "a query or fragment is not accepted"),
    ],
)
def test_bad_url_targets_say_what_is_accepted(target: str, why: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_url_target(target)
    assert why in str(caught.value)
    assert str(caught.value).endswith(
        "accepted: a URL (http://host:port[/path] or https://...) or APP/AGENT"
    )


def test_a_password_in_a_url_target_is_refused_without_echoing_it() -> None:
    with pytest.raises(TargetError) as caught:
        parse_url_target(f"https://me:{SECRET}@host:99999/x")
    assert str(caught.value) == (
        "TARGET: a user:password@ in the URL is not accepted (the URL shows in messages); "
        "give credentials with -H 'Name: value' or --token-file PATH"
    )


def test_cluster_targets_are_two_dns_labels() -> None:
    assert is_cluster_target("research-desk/concierge")
    assert not is_cluster_target("Research/concierge")
    assert not is_cluster_target("a/b/c")
    assert not is_cluster_target("localhost:8080")


def test_terminal_text_escapes_controls_and_bidi_but_keeps_lines() -> None:
    assert terminal_text("plain\ttext\n") == "plain\ttext\n"
    assert terminal_text("\x1b[2Jred\x07") == "\\x1b[2Jred\\x07"
    assert terminal_text("a\u202eb") == "a\\u202eb"
    assert terminal_text("a\nb", keep_newlines=False) == "a\\nb"


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\x\\report.pdf", "report.pdf"),
        ("..", "artifact"),
        (".bashrc", "bashrc"),
        ("a b;rm -rf.txt", "a_b_rm_-rf.txt"),
        ("", "artifact"),
    ],
)
def test_safe_names_are_never_paths(name: str, safe: str) -> None:
    assert safe_name(name) == safe


def test_save_file_never_overwrites(tmp_path: Path) -> None:
    first = save_file(tmp_path, "../r.bin", b"1")
    second = save_file(tmp_path, "r.bin", b"2")
    assert (first.name, second.name) == ("r.bin", "r-2.bin")
    assert first.read_bytes() == b"1" and second.read_bytes() == b"2"


def _artifact(artifact_id: str, name: str, text: str, *, append: bool) -> StreamResponse:
    update = TaskArtifactUpdateEvent(
        task_id="t",
        context_id="c",
        artifact=Artifact(artifact_id=artifact_id, name=name, parts=[Part(text=text)]),
        append=append,
    )
    return StreamResponse(artifact_update=update)


def test_fold_streams_our_response_at_once_and_others_from_their_first_append() -> None:
    fold, ids = TaskFold(), TurnIds("c")
    working = TaskStatus(state=TaskState.TASK_STATE_WORKING)
    assert fold.fold(StreamResponse(task=Task(id="t", context_id="c", status=working)), ids) == []
    assert ids.task_id == "t"
    assert fold.fold(_artifact("r", "response", "one ", append=False), ids) == [TextDelta("one ")]
    assert fold.fold(_artifact("x", "result", "a ", append=False), ids) == []
    assert fold.fold(_artifact("x", "result", "b", append=True), ids) == [TextDelta("a b")]
    assert fold.fold(_artifact("x", "result", "c", append=True), ids) == [TextDelta("c")]
    assert fold.fold(_artifact("n", "notes", "whole", append=False), ids) == []
    assert [list(a.parts) for a in fold.task.artifacts if a.artifact_id == "x"] == [
        [Part(text="a "), Part(text="b"), Part(text="c")]
    ]
    assert fold.streamed == ["one ", "a b", "c"]


def test_fold_reports_delegations_and_ends_on_a_final_state() -> None:
    fold, ids = TaskFold(), TurnIds("c")
    reported = {"target": "researcher", "call_id": "k", "ok": True, "detail": "found", "kind": "x"}
    update = TaskStatusUpdateEvent(
        task_id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
        metadata=dict_to_struct({"mas.delegated": reported}),
    )
    assert fold.fold(StreamResponse(status_update=update), ids) == [
        Delegated("researcher", "k", True, "found", "delegate")
    ]
    assert not fold.ended
    done = TaskStatusUpdateEvent(
        task_id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    )
    fold.fold(StreamResponse(status_update=done), ids)
    assert fold.ended


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "--log-format", "json", "validate", "-f", "x.yaml"],
        ["validate", "-f", "x.yaml", "-v", "--log-format", "json"],
        ["validate", "-v", "-f", "x.yaml", "--log-format=json"],
    ],
)
def test_global_options_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser(argv).parse_args(argv)
    assert args.verbose + args.verbose_after == 1
    assert (args.log_format_after or args.log_format) == "json"


def test_verbosity_counts_on_both_sides() -> None:
    argv = ["-v", "ask", "http://h:1", "-m", "x", "-vv"]
    args = build_parser(argv).parse_args(argv)
    assert args.verbose + args.verbose_after == 3


def _snapshot(*chunks: str) -> StreamResponse:
    artifact = Artifact(
        artifact_id="r", name="response", parts=[Part(text=chunk) for chunk in chunks]
    )
    working = TaskStatus(state=TaskState.TASK_STATE_WORKING)
    return StreamResponse(task=Task(id="t", context_id="c", status=working, artifacts=[artifact]))


def test_a_snapshot_catches_up_and_chunks_it_already_holds_are_not_added_again() -> None:
    fold, ids = TaskFold(), TurnIds("c")
    assert fold.fold(_snapshot("one "), ids) == [TextDelta("one ")]  # GetTask, mid-stream
    # The subscription's snapshot holds two more chunks, then re-sends the last of them.
    assert fold.fold(_snapshot("one ", "two ", "three"), ids) == [TextDelta("two three")]
    assert fold.fold(_artifact("r", "response", "three", append=True), ids) == []
    assert fold.fold(_artifact("r", "response", " four", append=True), ids) == [TextDelta(" four")]
    assert "".join(fold.streamed) == "one two three four"


def test_after_a_snapshot_a_new_chunk_that_repeats_no_held_part_is_added() -> None:
    fold, ids = TaskFold(), TurnIds("c")
    fold.fold(_snapshot("la "), ids)
    fold.fold(_snapshot("la ", "di "), ids)
    assert fold.fold(_artifact("r", "response", "da", append=True), ids) == [TextDelta("da")]
    assert fold.fold(_artifact("r", "response", " di ", append=True), ids) == [TextDelta(" di ")]
    assert "".join(fold.streamed) == "la di da di "


def test_reported_delegations_and_tool_calls_as_lines() -> None:
    assert reported_line(Delegated("researcher", "k", True, "found\nit")) == (
        "delegated to researcher: ok: found it"
    )
    tool = Delegated("text-tools/word_count", "k", False, "\x1b[31mboom", kind="tool")
    assert reported_line(tool) == "tool text-tools/word_count: failed: \\x1b[31mboom"


def _listing(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {
        "supportedInterfaces": [
            {"protocolBinding": binding, "url": url, "protocolVersion": "1.0"}
            for binding, url in pairs
        ]
    }


GRPC_AT = ("GRPC", "127.0.0.1:9")
JSONRPC_AT = ("JSONRPC", "http://h")
REST_AT = ("HTTP+JSON", "http://h/rest")
# Cards' JSON as served, in the 1.0 form and in the 0.3 one (which the SDK maps).
CARDS: dict[str, dict[str, Any]] = {
    "jsonrpc-first": _listing(JSONRPC_AT, GRPC_AT),
    "grpc-first": _listing(GRPC_AT, JSONRPC_AT),
    "grpc-only": _listing(GRPC_AT),
    "grpc-without-url": _listing(("GRPC", ""), REST_AT),
    "unknown-then-grpc": _listing(("SLIMRPC", "x"), GRPC_AT),
    "nothing-usable": _listing(("SLIMRPC", "x")),
    "0.3-default": {"url": "http://h", "additionalInterfaces": [{"transport": "GRPC", "url": "g"}]},
    "0.3-grpc-preferred": {"url": "g:1", "preferredTransport": "GRPC"},
    "0.3-rest-preferred": {
        "url": "http://h/rest",
        "preferredTransport": "HTTP+JSON",
        "additionalInterfaces": [{"transport": "GRPC", "url": "g"}],
    },
    "both-forms": {"url": "g:1", "preferredTransport": "GRPC", **_listing(JSONRPC_AT)},
}


@pytest.mark.parametrize("name", sorted(CARDS))
@pytest.mark.parametrize("transport", [None, "jsonrpc", "rest", "grpc"])
def test_grpc_is_wanted_exactly_when_the_parsed_card_leads_to_it(
    name: str, transport: str | None
) -> None:
    """The client is loaded from the card's JSON before the SDK parses it: without gRPC only
    when the interface chosen on the parsed card is not gRPC."""
    body = CARDS[name]
    wanted = grpc_wanted(body, transport)
    card = parse_card(json.loads(json.dumps(body)), "http://h/card")
    try:
        chosen = choose_interface(card, "http://h", transport).protocol_binding
    except TransportMissing:
        chosen = None
    assert wanted == (chosen == "GRPC" or transport == "grpc")


def test_a_card_of_neither_shape_loads_grpc_in_case() -> None:
    assert grpc_wanted({"supportedInterfaces": "GRPC"}, None)
    assert grpc_wanted({"url": "h", "additionalInterfaces": ["GRPC"]}, None)
    assert not grpc_wanted({"supportedInterfaces": "GRPC"}, "jsonrpc")


def test_the_tokens_key_ask_reads_is_the_one_the_runtime_writes() -> None:
    from mas.ctl.client.turn_output import TOKENS_KEY
    from mas.runtime.tokens import TOKENS_METADATA_KEY

    assert TOKENS_KEY == TOKENS_METADATA_KEY

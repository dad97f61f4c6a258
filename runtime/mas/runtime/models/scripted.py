"""``scripted``: deterministic rules, for tests and demos.

Params::

    rules:                        # tried in order on the latest user input; first match wins
      - match: "^book (?P<what>.+)"   # a regex (re.search)
        turn: "^tck-input-required"   # optional: also a regex on the turn id (A2A messageId)
        wait_ms: 0                # pause before anything else
        fail: "template"          # the generation fails with this message
        delegate: {to: agent-id, message: "template"}   # one delegate tool call
        tool: {name: lookup, arguments: {q: "template"}}  # or one tool-server tool call
        artifacts:                # each: kind text|data|file|url, name, and its payload
          - {kind: text, name: notes, text: "template", media_type: text/plain}
          - {kind: data, name: facts, data: {any: json}}
          - {kind: file, name: a.bin, content_base64: "...", media_type: application/pdf}
          - {kind: url, name: link, url: "https://..."}
        reply: "template"         # streamed word by word
        chunks: ["template", ...] # or streamed exactly in these chunks
        chunk_delay_ms: 0         # pause between chunks
        release_file: "/tmp/go"   # after the first chunk, hold until this file exists
        release_timeout_ms: 60000 # at most this long; then the generation fails saying so
        ask: "template"           # then ask a person (the turn ends input_required)
        usage: {input: 120, output: 30}  # tokens reported after each generation of the rule
    default: {reply: "..."}       # used when no rule matches (no ``match``); without one,
                                  # an unmatched input fails the turn with a clear message

Order of one rule's actions: wait, fail, delegate or tool; once the call's result is back:
artifacts, reply or chunks, ask. ``release_file`` holds the generation after its first
chunk (checked every 20 ms) until the file exists: a test steers or cancels a generation
that is certainly still running, or lets it finish by creating the file, whatever the
machine's pace. Templates are ``str.format`` strings over ``{input}``,
``{0}`` (the whole match), ``{1}``... (groups), named groups, ``{question}`` (the question
this input answers, after a HITL stop) and ``{result}`` (the delegation's or the tool's
result; only in a rule that delegates or calls a tool). In ``tool.arguments`` every string
value (at any depth) is a template; other JSON values are passed as they are. Every
template is checked at construction: a bad one is a
:class:`~mas.runtime.errors.PluginConfigError` naming the rule index and the field.

Typed values in ``tool.arguments``: a string value that is exactly one replacement field,
with nothing around it and neither a conversion nor a format spec (``"{a}"``, ``"{1}"``,
``"{result}"``), is a *whole-value placeholder*. Its rendered text becomes a JSON value when
the whole text, with no surrounding whitespace, parses as JSON other than a string: a
number (``42``, ``-1.5``, ``1e3``; never ``NaN`` or ``Infinity``), ``true``, ``false``,
``null``, an object or an array. Everything else stays the rendered string: any template
with text around its field (``"n={a}"``), two fields (``"{a}{b}"``), a format spec
(``"{a:>4}"``), or text that is no such JSON (``"pears"``, ``" 42"``, ``"\"q\""``). To keep
a whole-value placeholder a string whatever it matched, give it the ``!s`` conversion:
``"{a!s}"`` passes ``"42"`` as the string ``"42"``. ``delegate.message`` is always text.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import string
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mas.runtime.boundary.delegation import tool_name_for
from mas.runtime.errors import ModelError, PluginConfigError
from mas.runtime.models.base import (
    AskHuman,
    EmitArtifact,
    ModelOutput,
    ModelPlugin,
    ModelRequest,
    TextChunk,
    ToolCall,
    Usage,
    validate_params,
)
from mas.runtime.models.echo import words
from mas.runtime.turns import ArtifactEmitted

_STRICT = ConfigDict(extra="forbid")
RELEASE_POLL_SECONDS = 0.02
_FORMATTER = string.Formatter()


class ArtifactRule(BaseModel):
    """One artifact to emit."""

    model_config = _STRICT

    kind: Literal["text", "data", "file", "url"]
    name: str = Field(min_length=1)
    text: str | None = None
    data: dict[str, Any] | None = None
    content_base64: str | None = None
    url: str | None = None
    media_type: str | None = None

    @model_validator(mode="after")
    def _payload(self) -> ArtifactRule:
        needed = {"text": "text", "data": "data", "file": "content_base64", "url": "url"}[self.kind]
        if getattr(self, needed) is None:
            raise ValueError(f"an artifact of kind {self.kind!r} needs {needed!r}")
        if self.content_base64 is not None:
            try:
                base64.b64decode(self.content_base64, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"content_base64 is not valid base64 ({exc})") from None
        return self


class DelegateRule(BaseModel):
    """One delegation."""

    model_config = _STRICT

    to: str = Field(min_length=1)
    message: str = Field(min_length=1)


class ToolRule(BaseModel):
    """One call of a tool the agent is offered (an MCP server's tool, by its name)."""

    model_config = _STRICT

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class UsageRule(BaseModel):
    """The tokens a rule reports for each of its generations (as a provider's usage)."""

    model_config = _STRICT

    input: int = Field(default=0, ge=0)
    output: int = Field(default=0, ge=0)


class Rule(BaseModel):
    """One rule (``match`` is absent only in the default rule)."""

    model_config = _STRICT

    match: str | None = None
    turn: str | None = None
    reply: str | None = None
    chunks: list[str] | None = None
    delegate: DelegateRule | None = None
    tool: ToolRule | None = None
    ask: str | None = None
    artifacts: list[ArtifactRule] = Field(default_factory=list)
    wait_ms: int = Field(default=0, ge=0, le=600_000)
    chunk_delay_ms: int = Field(default=0, ge=0, le=60_000)
    release_file: str | None = Field(default=None, min_length=1)
    release_timeout_ms: int = Field(default=60_000, ge=1, le=600_000)
    fail: str | None = None
    usage: UsageRule | None = None

    @model_validator(mode="after")
    def _shape(self) -> Rule:
        if self.reply is not None and self.chunks is not None:
            raise ValueError("set reply or chunks, not both")
        if self.delegate is not None and self.tool is not None:
            raise ValueError("set delegate or tool, not both (one call per rule)")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ValueError(f"match {self.match!r} is not a valid regex: {exc}") from None
        if self.turn is not None:
            try:
                re.compile(self.turn)
            except re.error as exc:
                raise ValueError(f"turn {self.turn!r} is not a valid regex: {exc}") from None
        return self


class ScriptedParams(BaseModel):
    """The scripted model's params."""

    model_config = _STRICT

    rules: list[Rule] = Field(default_factory=list)
    default: Rule | None = None

    @model_validator(mode="after")
    def _matches(self) -> ScriptedParams:
        for index, rule in enumerate(self.rules):
            if rule.match is None:
                raise ValueError(f"rules[{index}].match is required (only default has none)")
        if self.default is not None and self.default.match is not None:
            raise ValueError("default.match is not accepted: the default rule matches anything")
        return self


def _templates(rule: Rule) -> list[tuple[str, str]]:
    out = [
        (f, t)
        for f, t in (("reply", rule.reply), ("ask", rule.ask), ("fail", rule.fail))
        if t is not None
    ]
    out += [(f"chunks[{i}]", t) for i, t in enumerate(rule.chunks or [])]
    if rule.delegate is not None:
        out.append(("delegate.message", rule.delegate.message))
    if rule.tool is not None:
        out += _argument_templates("tool.arguments", rule.tool.arguments)
    out += [
        (f"artifacts[{i}].text", a.text) for i, a in enumerate(rule.artifacts) if a.text is not None
    ]
    return out


def _argument_templates(where: str, value: Any) -> list[tuple[str, str]]:
    """Every string inside ``value`` with its path (``tool.arguments.q``, ``...[0]``)."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _argument_templates(f"{where}.{k}", v)]
    if isinstance(value, list):
        return [t for i, v in enumerate(value) for t in _argument_templates(f"{where}[{i}]", v)]
    return []


def _whole_field(template: str) -> bool:
    """Whether ``template`` is one bare replacement field (``"{a}"``; not ``"{a!s}"``)."""
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError:
        return False
    if len(parsed) != 1:
        return False
    literal, name, spec, conversion = parsed[0]
    return literal == "" and name is not None and not spec and conversion is None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _typed(text: str) -> Any:
    """``text`` as the JSON value it spells (not a string), else ``text`` itself."""
    if not text or text != text.strip():
        return text
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError:
        return text
    return text if isinstance(value, str) else value


def _rendered(value: Any, render: Any) -> Any:
    """``value`` with every string rendered as a template; a whole-value placeholder keeps
    the JSON type of what it matched (module docstring)."""
    if isinstance(value, str):
        return _typed(render(value)) if _whole_field(value) else render(value)
    if isinstance(value, dict):
        return {k: _rendered(v, render) for k, v in value.items()}
    if isinstance(value, list):
        return [_rendered(v, render) for v in value]
    return value


def _check_templates(where: str, rule: Rule) -> None:
    pattern = re.compile(rule.match) if rule.match is not None else None
    calls = rule.delegate is not None or rule.tool is not None
    allowed = {"input", "question"} | ({"result"} if calls else set())
    if pattern is not None:
        allowed |= {str(i) for i in range(pattern.groups + 1)} | set(pattern.groupindex)
    for field, template in _templates(rule):
        try:
            names = [n for _, n, _, _ in _FORMATTER.parse(template) if n is not None]
        except ValueError as exc:
            raise PluginConfigError(
                f"model 'scripted': {where}.{field}: {template!r} is not a valid template: {exc}"
            ) from None
        for name in names:
            root = re.split(r"[.\[]", name, maxsplit=1)[0]
            if root not in allowed:
                raise PluginConfigError(
                    f"model 'scripted': {where}.{field}: {template!r} uses {{{name}}}; "
                    f"accepted: {', '.join('{' + a + '}' for a in sorted(allowed))}"
                )


class ScriptedModel(ModelPlugin):
    """Plays the first matching rule."""

    def __init__(
        self, *, agent_id: str = "", env: Mapping[str, str] | None = None, **params: Any
    ) -> None:
        self.params = validate_params("scripted", ScriptedParams, params)
        for index, rule in enumerate(self.params.rules):
            _check_templates(f"params.rules[{index}]", rule)
        if self.params.default is not None:
            _check_templates("params.default", self.params.default)
        self.agent_id = agent_id

    def _choose(self, text: str, turn_id: str = "") -> tuple[Rule, re.Match[str] | None]:
        for rule in self.params.rules:
            if rule.turn is not None and re.search(rule.turn, turn_id) is None:
                continue
            found = re.search(rule.match or "", text)
            if found is not None:
                return rule, found
        if self.params.default is not None:
            return self.params.default, None
        patterns = ", ".join(repr(r.match) for r in self.params.rules) or "(no rules)"
        raise ModelError(f"no rule of the scripted model matches {text!r:.80}; rules: {patterns}")

    async def generate(self, request: ModelRequest) -> AsyncIterator[ModelOutput]:
        """Play the rule that matches the latest user input."""
        text = request.last_user_text
        rule, found = self._choose(text, request.turn_id)
        results = request.tool_results
        values: dict[str, Any] = {"input": text, "question": request.answers_question or ""}
        positional: list[str] = []
        if found is not None:
            positional = [found.group(0), *(g or "" for g in found.groups())]
            values.update({k: v or "" for k, v in found.groupdict().items()})

        def render(template: str) -> str:
            return template.format(*positional, **values)

        if not results:
            if rule.wait_ms:
                await asyncio.sleep(rule.wait_ms / 1000)
            if rule.fail is not None:
                raise ModelError(render(rule.fail))
            call = _call_of(rule, request, render)
            if call is not None:
                yield call
                if rule.usage is not None:
                    yield Usage(rule.usage.input, rule.usage.output, "scripted")
                return
        values["result"] = results[-1].content if results else ""
        for artifact in rule.artifacts:
            yield EmitArtifact(_artifact(artifact, render))
        chunks = (
            [render(c) for c in rule.chunks]
            if rule.chunks is not None
            else (words(render(rule.reply)) if rule.reply is not None else [])
        )
        for index, chunk in enumerate(chunks):
            if index and rule.chunk_delay_ms:
                await asyncio.sleep(rule.chunk_delay_ms / 1000)
            yield TextChunk(chunk)
            if index == 0 and rule.release_file is not None:
                await _released(Path(rule.release_file), rule.release_timeout_ms)
        if rule.ask is not None:
            yield AskHuman(render(rule.ask))
        if rule.usage is not None:
            yield Usage(rule.usage.input, rule.usage.output, "scripted")


async def _released(path: Path, timeout_ms: int) -> None:
    """Wait until ``path`` exists, at most ``timeout_ms``; a :class:`ModelError` after that."""
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            while not path.exists():
                await asyncio.sleep(RELEASE_POLL_SECONDS)
    except TimeoutError:
        raise ModelError(
            f"the scripted rule waited {timeout_ms} ms for its release_file {str(path)!r}, "
            "which did not appear"
        ) from None


def _call_of(rule: Rule, request: ModelRequest, render: Any) -> ToolCall | None:
    """The rule's one delegate or tool call, refused when the agent is not offered it."""
    if rule.delegate is not None:
        name = tool_name_for(rule.delegate.to)
        arguments: dict[str, Any] = {"message": render(rule.delegate.message)}
        why = f"delegates to {rule.delegate.to!r}, which agent {request.agent_id!r} cannot reach"
    elif rule.tool is not None:
        name, arguments = rule.tool.name, _rendered(rule.tool.arguments, render)
        why = f"calls the tool {name!r}, which agent {request.agent_id!r} is not offered"
    else:
        return None
    if name not in {t.name for t in request.tools}:
        offered = ", ".join(t.name for t in request.tools) or "(none)"
        raise ModelError(f"the scripted rule {why} (tools: {offered})")
    return ToolCall(f"call-{len(request.messages)}", name, arguments)


def _artifact(rule: ArtifactRule, render: Any) -> ArtifactEmitted:
    content = base64.b64decode(rule.content_base64) if rule.content_base64 is not None else None
    return ArtifactEmitted(
        kind=rule.kind,
        name=rule.name,
        text=render(rule.text) if rule.text is not None else None,
        data=rule.data,
        content=content,
        url=rule.url,
        media_type=rule.media_type,
    )

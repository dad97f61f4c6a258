"""Generate ``docs/reference/cli.md``: every ``mas-ctl`` command, its arguments and exit codes.

``python -m mas.reference.cli`` prints the page; ``--check FILE`` exits 1 when ``FILE``
differs from a fresh one (``make reference`` regenerates it).

The page is read off the parser ``mas-ctl`` itself runs (:func:`mas.ctl.cli.build_parser`,
every command module loaded), so a command or an option added there shows up here with its
help text; the exit codes are the paragraph of :mod:`mas.ctl.cli`'s docstring that starts
with ``Exit codes:``. Usage lines are formatted at a fixed width, whatever the terminal.

argparse has no public way to list a parser's arguments: the reads of its ``_actions`` and
friends are in :func:`_arguments`, :func:`_commands` and :func:`_usage` only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mas.ctl import cli
from mas.infra.generated_files import SourceError, run
from mas.reference.markdown import anchor, cell, code

REGENERATE = "make reference"
WIDTH = 100


@dataclass
class Command:
    """One parser of the tree: the top level or a (sub)command."""

    prog: str
    help: str
    parser: argparse.ArgumentParser


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=WIDTH, max_help_position=40)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = _formatter(parser.prog)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _arguments(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, str]]:
    """(invocation, default, help) of each argument but ``--help`` and the command choice."""
    formatter = _formatter(parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        # "-f, --file FILE" (argparse's own form differs between Python versions)
        if action.option_strings:
            invocation = ", ".join(action.option_strings)
            if action.nargs != 0:
                invocation += " " + formatter._format_args(action, action.dest.upper())
        else:
            invocation = formatter._format_args(action, action.dest)
        text = formatter._expand_help(action) if action.help else ""
        default = action.default
        if action.required:
            shown = "required"
        elif default in (None, False, [], argparse.SUPPRESS) or (
            isinstance(action, argparse._CountAction) and default == 0
        ):
            shown = ""
        else:
            shown = code(str(default))
        if isinstance(action, argparse._AppendAction | argparse._CountAction):
            text = f"{text} (repeatable)".strip()
        if action.choices is not None and "{" not in invocation:
            text = f"{text} (one of: {', '.join(map(str, action.choices))})".strip()
        yield invocation, shown, text


def _commands(parser: argparse.ArgumentParser) -> Iterator[Command]:
    """The parser's subcommands, in the order they were added, depth first."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        names: dict[int, list[str]] = {}
        for name, sub in action.choices.items():
            names.setdefault(id(sub), []).append(name)
        for name, sub in action.choices.items():
            first, *aliases = names[id(sub)]
            if name != first:
                continue
            text = helps.get(name, "")
            if aliases:
                text = f"{text} (also: {', '.join(aliases)})".strip()
            yield Command(sub.prog, text, sub)
            yield from _commands(sub)


def exit_codes(docstring: str) -> tuple[list[tuple[str, str]], str]:
    """The exit codes the docstring's ``Exit codes:`` paragraph lists, and what follows them.

    ``Exit codes: 0 success; 1 the document failed; ... 130 interrupted.`` gives
    ``[("0", "success"), ("1", "the document failed"), ..., ("130", "interrupted")]``; the
    sentences after the last code's full stop (``Never a traceback...``) come back as a note.
    The codes may also be a list, one ``- N meaning`` a line. Raises :class:`SourceError`
    when the docstring has no such paragraph.
    """
    paragraph = next(
        (" ".join(p.split()) for p in docstring.split("\n\n") if p.lstrip().startswith("Exit")),
        None,
    )
    if paragraph is None or not paragraph.startswith("Exit codes:"):
        raise SourceError("the docstring has no paragraph starting 'Exit codes:'")
    body = paragraph.removeprefix("Exit codes:").strip().removeprefix("- ")
    entries = re.split(r"(?:;| -)\s+(?=\d+ )", body)
    last, _, note = entries[-1].partition(". ")
    entries[-1:] = [last.rstrip(".")]
    codes = []
    for entry in entries:
        number, _, meaning = entry.strip().rstrip(";.").partition(" ")
        codes.append((number, meaning))
    return codes, note.strip()


HEADER = """\
<!-- Generated by `python -m mas.reference.cli` from mas-ctl's argument parser
     (runtime/mas/ctl/cli.py and runtime/mas/ctl/commands/).
     Do not edit by hand: run `make reference`; CI fails when this file drifts. -->

# mas-ctl reference

`mas-ctl` validates, runs, serves and inspects an `Application` document. Every command
below, with its arguments and their help, is read off the parser the program runs: a
command's own `--help` says the same. The fields of the document are in
[application.md](application.md).
"""


def render() -> str:
    """The page, exactly as committed."""
    top = cli.build_parser()
    commands = list(_commands(top))
    out = [HEADER, "## Usage and global options", "", "```text", _usage(top), "```", ""]
    out += _argument_table(top)
    try:
        codes, note = exit_codes(cli.__doc__ or "")
    except SourceError as exc:
        raise SourceError(f"mas.ctl.cli: {exc}") from exc
    out += ["", "## Exit codes", "", "| code | meaning |", "|---|---|"]
    out += [f"| {code(number)} | {cell(_prose(meaning))} |" for number, meaning in codes]
    if note:
        out += ["", cell(_prose(note))]
    out += ["", "## Commands", "", "| command | what it does |", "|---|---|"]
    for command in commands:
        link = f"[{code(command.prog)}](#{anchor(command.prog)})"
        out.append(f"| {link} | {cell(command.help)} |")
    for command in commands:
        out += ["", f"## {command.prog}", ""]
        for text in dict.fromkeys([command.help, command.parser.description or ""]):
            out += [cell(text), ""] if text else []
        out += ["```text", _usage(command.parser), "```", ""]
        out += _argument_table(command.parser)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip("\n") + "\n"


def _prose(text: str) -> str:
    return text.replace("``", "`").replace(":mod:", "")


def _argument_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = list(_arguments(parser))
    if not rows:
        return ["No arguments."]
    lines = ["| argument | default | help |", "|---|---|---|"]
    for invocation, default, text in rows:
        lines.append(f"| {code(invocation)} | {default or '—'} | {cell(text) or '—'} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or check a committed copy."""
    return run(render, REGENERATE, argv, "python -m mas.reference.cli")


if __name__ == "__main__":
    sys.exit(main())

"""The ``mas-ctl`` entry point: argument parsing, dispatch, exit codes (docs/cli.md is the
guide to every command).

Exit codes: 0 success; 1 the document (or the run, or an agent's turn) failed, every problem
on stderr with the field path first, or a call to an agent failed (one line naming what would
work); 2 usage errors (a bad TARGET or option too) and unreadable or non-YAML files (a
document past a limit of :mod:`mas.infra.guarded_yaml` too); 3 ``serve`` stopped by a signal
with turns still running at ``--drain-timeout`` (they ended canceled); 4 ``ask`` / ``task``:
the agent asks for input (answer with ``--context``); 130 interrupted (``ask`` has sent
``CancelTask`` for its task first).
Never a traceback, unless ``MAS_DEBUG=1`` asks for one.

Global options (``-v``, ``--log-format``) are accepted before and after the command.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence

from mas.ctl import collector
from mas.infra.errors import ApplicationInvalid, DocumentError, OverrideError
from mas.runtime.errors import RuntimeFailure
from mas.telemetry import tracing
from mas.telemetry.logs import LOG_FORMATS, LogFormatError, resolve_format, setup_logging

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Each module has ``register(subparsers)``; its parser sets ``handler(args) -> int``.
COMMAND_MODULES = (
    "validate",
    "routes",
    "serve",
    "run_mas",
    "chat",
    "tui",
    "steer",
    "cancel",
    "ps",
    "conformance",
    "plugins",
    "ask",
    "card",
    "tasks",
    "task",
    "cancel_task",
    "console",
)

Handler = Callable[[argparse.Namespace], int]


def _requested(argv: Sequence[str]) -> str | None:
    """The module of the command ``argv`` names, when one is named before any help flag.

    The top-level parser has flags only (``-v``), so the first other word is the command.
    """
    for word in argv:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            module = word.replace("-", "_")
            return module if module in COMMAND_MODULES else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, one subcommand per module of :mod:`mas.ctl.commands`.

    Given the command line, only the module of the command it names is imported (each pulls
    in what it runs: the A2A server, gRPC, the TUI...); the others get a bare subparser, so a
    usage error still lists every command. Without one (``mas-ctl --help``), all are loaded.
    """
    parser = argparse.ArgumentParser(
        prog="mas-ctl", description="Run, serve and inspect a MAS Lab Application."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text (default) or json: one object per line (default: $MAS_LOG_FORMAT)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    only = None if argv is None else _requested(argv)
    for name in COMMAND_MODULES:
        if only is None or name == only:
            importlib.import_module(f"mas.ctl.commands.{name}").register(sub)
        else:
            sub.add_parser(name.replace("_", "-"))
    for command in sub.choices.values():
        _add_global_options_after(command)
    return parser


def _add_global_options_after(parser: argparse.ArgumentParser) -> None:
    """``-v`` and ``--log-format`` after the command too (``mas-ctl run-mas -f x -v``): kept
    apart from the ones before it, which a subcommand's defaults would otherwise overwrite."""
    group = parser.add_argument_group("global options (also accepted before the command)")
    group.add_argument(
        "-v", "--verbose", dest="verbose_after", action="count", default=0, help="more logging"
    )
    group.add_argument(
        "--log-format", dest="log_format_after", choices=LOG_FORMATS, help="text or json"
    )


def _fail(code: int, lines: Sequence[str]) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one mas-ctl command; returns (and, as a script, exits with) its exit code."""
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(words).parse_args(words)
    verbose = args.verbose + args.verbose_after
    try:
        log_format = resolve_format(args.log_format_after or args.log_format)
        # serve: the agent is the service; every other command is mas-ctl (OTEL_SERVICE_NAME wins)
        tracing.configure(args.agent if args.command == "serve" else "mas-ctl")
    except (LogFormatError, tracing.TracingConfigError) as exc:
        return _fail(EXIT_USAGE, [f"error: {exc}"])
    setup_logging(logging.WARNING - 10 * min(verbose, 2), log_format)
    collector.resume()  # the command's modules are loaded (run() paused the collector)
    handler: Handler = args.handler
    try:
        return handler(args)
    except ApplicationInvalid as exc:
        return _fail(EXIT_FAILED, [f"error: {p}" for p in exc.problems])
    except (DocumentError, OverrideError) as exc:
        return _fail(EXIT_USAGE, [f"error: {exc}"])
    except RuntimeFailure as exc:
        return _fail(EXIT_FAILED, [f"error: {exc}"])
    except KeyboardInterrupt:
        return _fail(EXIT_INTERRUPTED, ["interrupted"])
    except BrokenPipeError:
        # The reader went away (`mas-ctl routes | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if os.environ.get("MAS_DEBUG") == "1":
            raise
        return _fail(
            EXIT_FAILED,
            [f"internal error: {type(exc).__name__}: {exc} (MAS_DEBUG=1 shows the traceback)"],
        )


def run() -> None:
    """Console-script wrapper: loads the command with the cyclic collector paused."""
    collector.pause()
    sys.exit(main())


if __name__ == "__main__":
    run()

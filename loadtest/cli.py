"""The ``loadtest`` command: a thin argparse layer over the pipeline's modules.

Each sub-command lives in the module that owns its stage; this file only wires
arguments to them and turns :class:`~loadtest.errors.LoadtestError` into one
line on stderr and an exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence

from loadtest import __version__
from loadtest.argtypes import OneLineParser
from loadtest.diskfull import RunFolderFull, full_disk_message, is_disk_full
from loadtest.errors import LoadtestError
from loadtest.mock.cli import add_arguments as add_mock_arguments
from loadtest.mock.cli import run as run_mock
from loadtest.redact import scrubbed_std_streams

MOCK_HELP = "serve the built-in simulated OpenAI-compatible LLM server"


def _cmd_mock(args: argparse.Namespace) -> int:
    return run_mock(args)


def _add_mock(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mock", help=MOCK_HELP)
    add_mock_arguments(p)
    p.set_defaults(func=_cmd_mock)


def mock_parser() -> argparse.ArgumentParser:
    """``loadtest mock``'s own parser: the same arguments as the sub-command's, and nothing else.

    Why a second way in: the mock is started by the hundred (every e2e test, the
    demo, the benchmarks), and the full parser imports every command's module,
    the gate's and the analysis's stacks (pandas, SciPy) among them: about a
    second of CPU before the mock listens, none of which it uses.
    """
    parser = OneLineParser(prog="loadtest mock", description=MOCK_HELP)
    add_mock_arguments(parser)
    parser.set_defaults(func=_cmd_mock, command="mock")
    return parser


def build_parser() -> argparse.ArgumentParser:
    # start-up time: each command's module (the gate, the analysis, Kubernetes, profile) only for the
    # full parser, never for `loadtest mock` (see mock_parser)
    from loadtest.cli_common import positive_int
    from loadtest.cli_read import add_read_commands
    from loadtest.cli_run import add_run_commands
    from loadtest.deploy.cli import add_arguments as add_k8s
    from loadtest.profile.cli import add_profile_command
    from loadtest.storage.baseline import add_arguments as add_baseline
    from loadtest.workload.trace_cli import add_trace_command

    parser = OneLineParser(
        prog="loadtest",
        description="Capacity testing for OpenAI-compatible LLM endpoints.",
    )
    parser.add_argument("--version", action="version", version=f"loadtest {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_commands(sub)
    add_read_commands(sub)
    add_profile_command(sub)
    _add_mock(sub)
    add_k8s(sub, positive_int)
    add_baseline(sub)
    add_trace_command(sub)
    return parser


def _one_line(message: str) -> str:
    return re.sub(r"\s*\n\s*", " ", message.strip())


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["mock"]:
        args = mock_parser().parse_args(words[1:])
    else:
        args = build_parser().parse_args(words)
    with scrubbed_std_streams():  # no secret reaches stdout or stderr, tracebacks included
        try:
            return int(args.func(args) or 0)
        except LoadtestError as err:
            # one line whatever the message holds (a server's error page, a multi-line reason)
            print(f"loadtest {args.command}: error: {_one_line(str(err))}", file=sys.stderr)
            return err.exit_code
        except OSError as err:
            if not is_disk_full(err):
                if not err.filename:
                    raise
                # A path problem no check foresaw: still one line naming the file, never a traceback.
                print(f"loadtest {args.command}: error: {err.filename}: {(err.strerror or str(err)).lower()}", file=sys.stderr)
                return 2
            # Any write not handled on the spot (a report, an analysis's outputs): one line, not a traceback.
            print(f"loadtest {args.command}: error: {full_disk_message(err)}", file=sys.stderr)
            return RunFolderFull.exit_code
        except KeyboardInterrupt:
            print(f"loadtest {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())

"""argparse types shared by the commands' option modules (cli.py, cost_cli.py, profile/cli.py)."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any, Callable, NoReturn


def positive(kind: type) -> Callable[[str], float]:
    """An argparse type for a positive int or float, with a one-line message."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}; got {text!r}") from None
        if not math.isfinite(value):  # nan and inf: no duration, rate or count of either exists
            raise argparse.ArgumentTypeError(f"expected a finite number; got {text!r}")
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def int_at_least(minimum: int, *, expected: str = "an integer", below: str | None = None):
    """An argparse type for a whole number of at least ``minimum``, each mistake one line.

    ``expected`` names what a non-number should have been; ``below`` says why a smaller one is refused.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{below or f'must be {minimum} or more'}; got {text!r}")
        return value

    return parse


#: A count that may be 0.
non_negative_int = int_at_least(0)


def port_number(text: str) -> int:
    """An argparse type for a TCP port to listen on or connect to: 1 to 65535, one line otherwise.

    Checked when the arguments are read, so ``--web-port 99999`` is refused before
    any process starts, not by a socket call's OverflowError halfway through a run.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number; got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535; got {text!r}")
    return value


def non_empty(text: str) -> str:
    """An argparse type for a name that must be given, such as ``--model``.

    ``--model "$MODEL"`` with the variable unset is ``--model ""``; without this check
    the empty name was sent, and the server's 400 ended the run after its preflight.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty; got {text!r}")
    return text


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line: the problem, and where the usage is.

    argparse prints the whole usage block (about twenty lines for ``run``) before
    its message, which buries the one line that says what was wrong. Sub-command
    parsers are a :class:`SubcommandParser` (see :meth:`add_subparsers`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A word that starts with a minus and a digit is a value, never an option: argparse knows only
        # plain negative numbers (-5, -0.5), so ``--tolerance -5%`` read "-5%" as an unknown option and
        # said "expected at least one argument" instead of the flag's own line on a negative tolerance.
        # No option of ours looks like one (``-h`` is the only short option), so nothing is lost.
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> "NoReturn":
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Sub-commands (and their verbs) parsed by a :class:`SubcommandParser` unless told otherwise."""
        kwargs.setdefault("parser_class", SubcommandParser)
        return super().add_subparsers(**kwargs)


class SubcommandParser(OneLineParser):
    """A sub-command's parser: it refuses the words it does not know itself.

    argparse has a sub-command parse only what it knows and hands the rest up to the top
    parser, which said ``loadtest: error: unrecognized arguments: --bogus (see loadtest
    --help)``, while every other mistake in a sub-command's arguments is said as
    ``loadtest analyze: error: ... (see loadtest analyze --help)``: the help that lists
    the options is the sub-command's.
    """

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

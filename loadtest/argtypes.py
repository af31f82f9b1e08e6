"""argparse types shared by the commands' option modules (cli.py, cost_cli.py, profile/cli.py)."""

from __future__ import annotations

import argparse
from typing import Callable


def positive(kind: type) -> Callable[[str], float]:
    """An argparse type for a positive int or float, with a one-line message."""
    noun = "an integer" if kind is int else "a number"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}; got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def non_negative_int(text: str) -> int:
    """An argparse type for a count that may be 0, with a one-line message."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more; got {text!r}")
    return value

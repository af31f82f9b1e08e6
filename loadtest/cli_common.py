"""Argument types and groups shared by the ``loadtest`` sub-commands (cli_run.py, cli_read.py).

Each type raises :class:`argparse.ArgumentTypeError` with the text argparse
prints after the flag's name, so a bad value is one line and exit 2.
"""

from __future__ import annotations

import argparse
import math

from loadtest.argtypes import positive
from loadtest.scenario import MAX_RATE_RPS, MAX_USERS, number_text


def _sweep(text: str, parse: type, example: str, what: str, most: float) -> list:
    """A comma-separated sweep (``1,2,4``): every part given, each a positive finite number, rising.

    ``1,,2`` is a typo, not the sweep 1,2; a sweep that falls or repeats has no capacity (the last
    level holding before the first failing), as the scenario's ``load.levels`` says too.
    """
    parts = [part.strip() for part in text.split(",")]
    try:
        if "" in parts:
            raise ValueError
        values = [parse(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated {what} like {example}; got {text!r}") from None
    if any(not (0 < value < float("inf")) for value in values):
        raise argparse.ArgumentTypeError(f"{what} must be positive; got {text!r}")
    too_big = next((value for value in values if value > most), None)
    if too_big is not None:  # the scenario's bound (loadtest/scenario/_base.py says why): a typo, not a plan
        raise argparse.ArgumentTypeError(f"{what} must be at most {most:.0f}; got {number_text(too_big)} "
                                         "(see 'Limits' in docs/scenarios.md)")
    falls = next((i for i in range(1, len(values)) if values[i] <= values[i - 1]), None)
    if falls is not None:
        raise argparse.ArgumentTypeError(f"{what} must rise from one level to the next; got {text!r} "
                                         f"({number_text(values[falls - 1])} then {number_text(values[falls])})")
    return values


def levels_arg(text: str) -> list[int]:
    return _sweep(text, int, "1,2,4", "levels (users)", MAX_USERS)


def rates_arg(text: str) -> list[float]:
    return _sweep(text, float, "1,2,4", "rates (requests/s)", MAX_RATE_RPS)


positive_int = positive(int)  # (loadtest/argtypes.py, shared with the other option modules)
positive_float = positive(float)


def non_negative_float(text: str) -> float:
    """Seconds that may be zero (``--web-linger 0``: close the UI with the run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be zero or more; got {text!r}")
    return value


def fraction(text: str) -> float:
    """A share as ``0.2`` or ``20%`` (the headroom, the traffic growth per minute)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.2 or a percentage like 20%; got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.2 or a percentage like 20%; got {text!r}")
    if not raw.endswith("%") and value > 1:
        raise argparse.ArgumentTypeError(f"a fraction must be at most 1 (for a percentage write {text}%); got {text!r}")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 100%; got {text!r}")
    return value


fraction.__name__ = "fraction"


def add_autoscaling_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("autoscaling thresholds (summary.json autoscaling, autoscaling.yaml)")
    g.add_argument("--headroom", type=fraction, metavar="H", help="scale out this far below capacity (default 20%%)")
    g.add_argument("--scale-up-s", type=positive_float, metavar="S",
                   help="seconds from a threshold crossing to a new replica serving; derives the headroom from --traffic-growth")
    g.add_argument("--traffic-growth", type=fraction, metavar="G",
                   help="assumed traffic growth per minute for --scale-up-s (default 10%%)")


def autoscaling_overrides(args: argparse.Namespace) -> dict[str, float | None]:
    return {"headroom": args.headroom, "scale_up_s": args.scale_up_s, "traffic_growth_per_min": args.traffic_growth}

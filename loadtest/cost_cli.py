"""The cost flags of ``run`` and ``analyze``: ``--usd-per-hour``, ``--peak-users``, ``--peak-rps``.

Kept out of cli.py so the flags and their parsing live in one place; they
become run.json's ``cost_options`` (read by :mod:`loadtest.analysis.run_cost`).
"""

from __future__ import annotations

import argparse
from typing import Any

from loadtest.argtypes import positive
from loadtest.errors import InputError


_positive = positive(float)


def add_cost_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost (summary.json cost; overrides the scenario's cost:)")
    g.add_argument("--usd-per-hour", type=_positive, metavar="USD", help="price of one replica per hour")
    peak = g.add_mutually_exclusive_group()
    peak.add_argument("--peak-users", type=_positive, metavar="N", help="forecast: replicas and monthly cost for this many peak concurrent users")
    peak.add_argument("--peak-rps", type=_positive, metavar="R", help="forecast: the same for this many peak requests/s")


def cost_options(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as run.json's ``cost_options`` (absent ones left out)."""
    names = ("usd_per_hour", "peak_users", "peak_rps")
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def check_peak_for_mode(options: dict[str, Any], load_mode: str | None) -> None:
    """Refuse ``--peak-users`` for a run whose levels are rates (open loop, trace replay): its capacity is a
    rate, so a peak in users has nothing to be divided by, and the forecast would be left out unsaid."""
    if options.get("peak_users") is not None and load_mode not in (None, "closed_loop"):
        raise InputError(f"--peak-users {options['peak_users']:g}: the levels are rates ({load_mode}), so the "
                         "capacity is a rate; give the peak as --peak-rps")


def merge_cost_options(stored: dict[str, Any] | None, given: dict[str, Any]) -> dict[str, Any]:
    """``analyze``'s flags over the run's: a new peak (users or req/s) replaces the old one of either kind."""
    out = dict(stored or {})
    if "peak_users" in given or "peak_rps" in given:
        out.pop("peak_users", None)
        out.pop("peak_rps", None)
    out.update(given)
    return out

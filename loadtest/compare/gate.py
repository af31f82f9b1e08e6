"""The command-line side of the gate, shared by ``loadtest compare`` and ``loadtest run --baseline``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from loadtest.argtypes import int_at_least
from loadtest.compare.noise import MIN_HISTORY_RUNS, UNKNOWN_NOISE_FACTOR
from loadtest.compare.rules import parse_rules, split_class, unmatched_class_tolerances
from loadtest.errors import InputError
from loadtest.paths import output_file
from loadtest.storage.remote import path_arg
from loadtest.run_files import COMPARE_JSON
from loadtest.staged_paths import shown

if TYPE_CHECKING:  # the engine (pandas, SciPy) loads only when the gate runs: see run_gate
    from loadtest.compare.engine import Comparison


def add_gate_arguments(p: argparse.ArgumentParser, *, default_outputs_note: str = "") -> None:
    """The flags both commands take."""
    g = p.add_argument_group("regression gate")
    g.add_argument("--tolerance", action="append", nargs="+", metavar="TOL",
                   help="global tolerance (default 5%%) and/or per check: itl_ms.p95=3%% ttft_ms=10%% "
                        "throughput=5%% error_rate=0.5%% (error rate in percentage points)")
    g.add_argument("--fail-on", action="append", metavar="WHAT",
                   help="what fails the gate: capacity, latency, throughput, error_rate, a check such as "
                        "itl_ms.p95 (each request class's too) or a class's own, chat.itl_ms.p95, all (default) "
                        "or none; comma-separated or repeated")
    g.add_argument("--inconclusive", choices=("pass", "fail"),
                   help="map an inconclusive-only result (exit 6) to 0 (pass) or 1 (fail)")
    g.add_argument("--history", nargs="+", action="extend", type=path_arg, metavar="DIR",
                   help="folders of earlier runs: those of the same workload fingerprint give each check's "
                        "run-to-run noise, and a regression must be outside it")
    g.add_argument("--min-history", type=_min_history, default=None, metavar="N",
                   help=f"reference runs (history plus baselines) needed to know the run-to-run noise "
                        f"(default {MIN_HISTORY_RUNS}); with fewer, a latency or throughput change past the tolerance "
                        f"is inconclusive whatever its size, and an error or valid-output rate's change of less "
                        f"than {UNKNOWN_NOISE_FACTOR:g}x its tolerance")
    g.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML (one testcase per check)")
    g.add_argument("--markdown", type=Path, metavar="FILE", help="write a short Markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
    g.add_argument("--html", type=Path, metavar="FILE", help="write the overlay page (compare.html)")
    g.add_argument("--json", type=Path, metavar="FILE", help="write compare.json" + default_outputs_note)


#: argparse type: checked with the arguments, so ``run --baseline`` refuses it before any load.
_min_history = int_at_least(2, expected="a number of runs", below="at least 2 runs are needed to see a spread")


def output_targets(args: argparse.Namespace, default_dir: Path | None = None) -> dict[str, Path | None]:
    """The gate's output files (``--json`` …, or all four in ``default_dir``), each checked writable.

    Checked before the comparison (and, for ``run --baseline``, before any load), so a
    mistyped path is one line at once, not a traceback after the work.
    """
    targets = {"json": args.json, "junit": args.junit, "markdown": args.markdown, "html": args.html}
    for kind, path in targets.items():
        if path is not None:
            output_file(path, f"--{kind}")
    if default_dir is not None:
        defaults = {"json": COMPARE_JSON, "junit": "compare.junit.xml", "markdown": "compare.md", "html": "compare.html"}
        targets = {k: v or default_dir / defaults[k] for k, v in targets.items()}
    return targets


def run_gate(args: argparse.Namespace, baseline: Path | Sequence[Path], candidate: Path | Sequence[Path], *,
             default_dir: Path | None = None) -> int:
    """Compare (each side one run or several), write the outputs asked for (or all of them into
    ``default_dir``), print, return the exit code."""
    # Start-up time: `run --baseline` imports this module for output_targets' early path check before
    # any load; the comparison and its pages (plotly) load only when the gate runs.
    from loadtest.compare import outputs
    from loadtest.compare.groups import compare_groups
    from loadtest.compare.page import write_compare_html

    tolerances = [t for group in (args.tolerance or []) for t in group]
    rules = parse_rules(tolerances, args.fail_on or (), args.inconclusive)
    min_history = getattr(args, "min_history", None)
    targets = output_targets(args, default_dir)
    cmp: Comparison = compare_groups(
        [baseline] if isinstance(baseline, (str, Path)) else list(baseline),
        [candidate] if isinstance(candidate, (str, Path)) else list(candidate),
        rules, history=getattr(args, "history", None) or (),
        min_history=min_history if min_history is not None else MIN_HISTORY_RUNS,
        args=("--baseline", "the new run") if default_dir is not None else ("baseline", "candidate"),
    )
    stray = unmatched_class_tolerances(rules, (c.check for c in cmp.changes))
    if stray:
        have = ", ".join(sorted({c.check for c in cmp.changes if split_class(c.check)[0] is not None})) or "none"
        raise InputError(f"--tolerance {', '.join(stray)}: this comparison has no such request-class check (its class "
                         f"checks: {have})")
    missing = rules.unmatched(c.check for c in cmp.changes)
    if missing:
        have = ", ".join(sorted({c.check for c in cmp.changes})) or "none"
        raise InputError(f"--fail-on {', '.join(missing)}: this comparison has no such check, so it could never "
                         f"fail the gate (its checks: {have}; a request class's checks are those of its own SLO); "
                         "name one of its checks or a group")
    writers = {
        "json": outputs.write_json,
        "junit": outputs.write_junit,
        "markdown": outputs.write_markdown,
        "html": write_compare_html,
    }
    # Files first: a closed stdout (``| head``) must not cost CI its reports.
    written = [writers[kind](path, cmp) for kind, path in targets.items() if path is not None]
    print(outputs.terminal_text(cmp))
    for path in written:
        print(f"wrote {shown(path)}")
    sys.stdout.flush()
    return cmp.exit_code

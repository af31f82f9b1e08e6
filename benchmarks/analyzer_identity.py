"""Are an analyzer change's outputs identical to the old ones? Analyze saved runs, then compare.

A refactor of the analysis must not move a figure. This script re-analyzes
saved run folders exactly as ``loadtest analyze`` does (``analyze_run`` and
``write_reports``, the HTML report included) and keeps the outputs, so that
the same runs analyzed by two versions of the code can be compared byte for
byte::

    # the old code (an exported tree of the base commit) and the new one, same runs
    PYTHONPATH=/tmp/base python benchmarks/analyzer_identity.py analyze --out /tmp/before RUN...
    python benchmarks/analyzer_identity.py analyze --out /tmp/after RUN...
    python benchmarks/analyzer_identity.py compare /tmp/before /tmp/after

Each run folder is copied first (only the files the analysis reads), so the
saved runs are never rewritten. Two analyses of one run by the same code
differ only in :data:`VOLATILE` (the clock, Plotly's chart ids), which
``compare`` blanks; every other byte must match. ``compare`` exits 1 if any file differs; for
a differing ``summary.json`` it names the keys that differ and the largest
absolute difference of a number, so a last-bit float change is told from a
real one.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

#: What the analysis reads from a run folder (everything else stays behind).
INPUTS = ("run.json", "requests.parquet", "requests.parts", "server_metrics.parquet", "server_metrics.parts")
#: The outputs compared.
OUTPUTS = ("summary.json", "autoscaling.yaml", "report.html")
#: What differs between two analyses of one run by the same code: summary.json's ``generated_at``
#: (the clock) and the random ids Plotly gives each chart's ``<div>`` in report.html.
VOLATILE = (
    re.compile(rb'"generated_at": "[^"]*"'),
    re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
)


def analyze(runs: list[Path], out: Path) -> None:
    import loadtest  # the code under test: whichever tree PYTHONPATH names first
    from loadtest.analysis import analyze_run
    from loadtest.report import write_reports

    out.mkdir(parents=True, exist_ok=True)
    print(f"code: {Path(loadtest.__file__).parent}")
    for run in runs:
        with tempfile.TemporaryDirectory(prefix="identity-") as tmp:
            work = Path(tmp) / run.name
            work.mkdir()
            for name in INPUTS:
                src = run / name
                if src.is_dir():
                    shutil.copytree(src, work / name)
                elif src.is_file():
                    shutil.copy2(src, work / name)
            t0 = time.perf_counter()
            write_reports(work, analyze_run(work), html=True)
            took = time.perf_counter() - t0
            dest = out / run.name
            dest.mkdir(exist_ok=True)
            for name in OUTPUTS:
                shutil.copy2(work / name, dest / name)
        print(f"{run.name}: analyzed in {took:.2f} s → {dest}")


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


def _summary_diff(a: Path, b: Path) -> list[str]:
    """Keys of two summary.json files that differ, and the largest absolute numeric difference."""
    left, right = dict(_leaves(json.loads(a.read_text()))), dict(_leaves(json.loads(b.read_text())))
    lines, worst = [], 0.0
    for key in sorted(set(left) | set(right)):
        x, y = left.get(key, "<absent>"), right.get(key, "<absent>")
        if key == "generated_at" or x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)):
            continue
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and math.isfinite(y):
            worst = max(worst, abs(x - y))
        lines.append(f"    {key}: {x!r} → {y!r}")
    return lines + [f"    max |difference| of a number: {worst:.3g}"]


def normalized(data: bytes) -> bytes:
    """``data`` with the :data:`VOLATILE` parts blanked; every other byte compared as is."""
    for pattern in VOLATILE:
        data = pattern.sub(b"<volatile>", data)
    return data


def compare(before: Path, after: Path) -> int:
    differ = 0
    for run in sorted(p for p in before.iterdir() if p.is_dir()):
        for name in OUTPUTS:
            a, b = run / name, after / run.name / name
            if not b.is_file():
                print(f"{run.name}/{name}: missing in {after}")
                differ += 1
            elif normalized(a.read_bytes()) == normalized(b.read_bytes()):
                print(f"{run.name}/{name}: identical ({a.stat().st_size:,} bytes, clock and chart ids aside)")
            else:
                differ += 1
                print(f"{run.name}/{name}: DIFFERS")
                if name == "summary.json":
                    print("\n".join(_summary_diff(a, b)))
    print("all identical" if not differ else f"{differ} file(s) differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("analyze", help="analyze copies of run folders and keep their outputs")
    a.add_argument("--out", type=Path, required=True, metavar="DIR")
    a.add_argument("runs", type=Path, nargs="+", metavar="RUN")
    c = sub.add_parser("compare", help="compare two output folders byte for byte")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "analyze":
        missing = [str(r) for r in args.runs if not (r / "run.json").is_file()]
        if missing:
            print(f"error: not a run folder (no run.json): {', '.join(missing)}", file=sys.stderr)
            return 2
        analyze(args.runs, args.out)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())

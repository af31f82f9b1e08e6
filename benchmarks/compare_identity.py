"""Does ``loadtest compare`` answer the same when it streams the chunk lists? Dump everything it decides, then compare.

``loadtest compare`` once read both runs whole (``read_requests``: every chunk
timestamp as pandas arrays) and flattened them whole for the bootstrap's ITL
samples; it now reads the scalar columns once and the chunk lists a batch at
a time (issue 31). The bootstrap's random draws depend on the samples *and
their order*, so this checks more than the verdicts: for every comparison it
keeps

* the :class:`~loadtest.compare.samples.LevelSamples` of both runs, every
  array (values, owners, failed flags, served times and tokens, validity) with
  its dtype and bytes, and the order of the levels;
* each run's summary under the common SLO (``summary_dict``, clock aside);
* the outcome: exit code, stdout, stderr, ``compare.json``, the Markdown and
  the JUnit XML.

The old code is the old tree, not a copy kept here: export the base commit and
run this script once under each tree, on the same run folders, then compare::

    git archive <base> --prefix=base/ | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/base python benchmarks/compare_identity.py dump --out /tmp/before \\
        --work /tmp/cmp-work --part-rows 97 --history-root RUNS A1,A2 B1,B2 ...
    python benchmarks/compare_identity.py dump --out /tmp/after --work /tmp/cmp-work ... (same arguments)
    python benchmarks/compare_identity.py check /tmp/before /tmp/after

A pair is ``BASELINE,CANDIDATE`` (run folders, or a ``summary.json``). With
``--part-rows N`` each pair of merged folders is compared again as part files of N
records (``requests.parts/``, a run killed before its merge), made under
``--work``. Under ``--work`` the script also makes the error cases (a truncated
``requests.parquet``, a folder with neither records nor a summary, a missing
folder), whose exit code and one line must match too. Paths are the same in both
dumps (the outputs are written under ``--work`` first), so every byte is compared.
``check`` exits 1 if anything differs, naming what.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow.parquet as pq

#: What a run folder holds that compare reads (the rest stays behind).
INPUTS = ("run.json", "summary.json", "requests.parquet", "requests.parts")
#: The clock in a summary.json (and the generated_at of any output).
VOLATILE = re.compile(rb'"generated_at": "[^"]*"')


# -- making the cases ---------------------------------------------------------------------------


def as_parts(run: Path, into: Path, rows: int) -> Path:
    """A copy of ``run`` whose records are part files of ``rows`` records each (same rows, same order)."""
    out = into / f"{run.name}-parts{rows}"
    if out.exists():
        shutil.rmtree(out)
    (out / "requests.parts").mkdir(parents=True)
    for name in ("run.json", "summary.json"):
        if (run / name).is_file():
            shutil.copy(run / name, out / name)
    table = pq.read_table(run / "requests.parquet")
    for i, start in enumerate(range(0, table.num_rows, rows)):
        pq.write_table(table.slice(start, rows), out / "requests.parts" / f"{i:06d}.parquet")
    return out


def error_cases(run: Path, work: Path) -> list[tuple[str, list[str]]]:
    """Compare invocations that must fail with one line (exit 2): damaged, empty and missing folders."""
    damaged = work / "damaged"
    if damaged.exists():
        shutil.rmtree(damaged)
    damaged.mkdir(parents=True)
    shutil.copy(run / "run.json", damaged / "run.json")
    data = (run / "requests.parquet").read_bytes()
    (damaged / "requests.parquet").write_bytes(data[: len(data) // 2])
    empty = work / "empty"
    if empty.exists():
        shutil.rmtree(empty)
    empty.mkdir()
    shutil.copy(run / "run.json", empty / "run.json")
    return [
        ("error-damaged", ["compare", str(run), str(damaged)]),
        ("error-damaged-baseline", ["compare", str(damaged), str(run)]),
        ("error-empty", ["compare", str(run), str(empty)]),
        ("error-missing", ["compare", str(work / "no-such-run"), str(run)]),
    ]


# -- running one case -----------------------------------------------------------------------------


def _spy(module: Any, name: str, calls: list) -> Callable[[], None]:
    """Record every return value of ``module.name``; returns the undo."""
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(dict(out) if isinstance(out, dict) else out)  # a copy: the caller may consume its dict
        return out

    setattr(module, name, spy)
    return lambda: setattr(module, name, real)


def run_case(name: str, argv: list[str], work: Path, out: Path) -> float:
    """Run ``loadtest`` with ``argv`` in this process; keep what it decided under ``out/name``."""
    import loadtest.compare.engine as engine
    import loadtest.report.summary as summary
    from loadtest.cli import main

    scratch = work / "outputs"
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    files = {"compare.json": "--json", "compare.md": "--markdown", "junit.xml": "--junit"}
    if argv[0] == "compare" and not name.startswith("error"):
        argv = argv + [a for f, flag in files.items() for a in (flag, str(scratch / f))]
    elif argv[0] == "history":
        argv = argv + ["--json", str(scratch / "history.json"), "--html", str(scratch / "history.html")]
    samples: list[dict] = []
    summaries: list[dict] = []
    undo = [_spy(engine, "level_samples", samples), _spy(summary, "summary_dict", summaries)]
    stdout, stderr = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
    finally:
        for u in undo:
            u()
    took = time.perf_counter() - t0
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / "argv.json").write_text(json.dumps(argv))
    (dest / "exit_code").write_text(f"{code}\n")
    (dest / "stdout.txt").write_text(stdout.getvalue())
    (dest / "stderr.txt").write_text(stderr.getvalue())
    for f in sorted(scratch.iterdir()):
        if f.suffix != ".html":  # history.html: Plotly's random chart ids; its table is history.json
            shutil.copy(f, dest / f.name)
    (dest / "summaries.json").write_text(json.dumps(summaries, indent=1, sort_keys=True, default=str))
    _save_samples(samples, dest)
    return took


def _save_samples(calls: list[dict], dest: Path) -> None:
    """Every array of every LevelSamples returned, with its dtype (npz), and the scalars and orders (json)."""
    arrays: dict[str, np.ndarray] = {}
    meta = []
    for i, levels in enumerate(calls):
        order = []
        for conc, level in levels.items():
            key = f"{i}/{conc}"
            order.append({"concurrency": conc, "level.concurrency": level.concurrency, "window_s": level.window_s,
                          "latency": {m: c.n_owners for m, c in level.latency.items()}})
            for field in ("failed", "served_e2e_ms", "served_tokens", "valid"):
                arrays[f"{key}/{field}"] = getattr(level, field)
            for metric, clustered in level.latency.items():
                arrays[f"{key}/{metric}/values"] = clustered.values
                arrays[f"{key}/{metric}/owner"] = clustered.owner
        meta.append(order)
    (dest / "samples.json").write_text(json.dumps(meta, indent=1))
    np.savez(dest / "samples.npz", **arrays)
    (dest / "samples_keys.json").write_text(json.dumps(list(arrays)))


def dump(args: argparse.Namespace) -> int:
    import loadtest  # the code under test: whichever tree PYTHONPATH names first

    print(f"code: {Path(loadtest.__file__).parent}")
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    cases: list[tuple[str, list[str]]] = []
    for pair in args.pairs:
        base, cand = (Path(p) for p in pair.split(","))
        label = f"{_name(base)}~{_name(cand)}"
        cases.append((label, ["compare", str(base), str(cand)]))
        if args.part_rows and all((p / "requests.parquet").is_file() for p in (base, cand)):
            parts = work / "parts"
            parts.mkdir(exist_ok=True)
            pb, pc = as_parts(base, parts, args.part_rows), as_parts(cand, parts, args.part_rows)
            cases.append((f"{label}~parts", ["compare", str(pb), str(pc)]))
    if args.history_root:
        root = args.history_root
        first = Path(args.pairs[0].split(",")[0])
        cases.append(("gate-history", ["compare", *args.pairs[0].split(","), "--history", str(root)]))
        names = sorted({json.loads(p.read_text()).get("name") or "" for p in root.rglob("run.json")})
        cases += [(f"history-{n}", ["history", str(root), "--scenario", n]) for n in names if n]
        cases += error_cases(first, work)
    for name, argv in cases:
        took = run_case(name, argv, work, args.out)
        code = (args.out / name / "exit_code").read_text().strip()
        print(f"{name}: exit {code} in {took:.2f} s")
    return 0


def _name(path: Path) -> str:
    return path.parent.name + "-summary" if path.is_file() else path.name


# -- comparing two dumps ----------------------------------------------------------------------------


def _compare_samples(a: Path, b: Path) -> list[str]:
    problems = []
    keys_a, keys_b = json.loads((a / "samples_keys.json").read_text()), json.loads((b / "samples_keys.json").read_text())
    if keys_a != keys_b:
        return [f"    sample arrays differ in their keys or order: {sorted(set(keys_a) ^ set(keys_b))[:5]}"]
    with np.load(a / "samples.npz") as za, np.load(b / "samples.npz") as zb:
        for key in keys_a:
            x, y = za[key], zb[key]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                problems.append(f"    {key}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}, bytes differ")
    return problems


def _count_samples(case: Path) -> int:
    with np.load(case / "samples.npz") as z:
        return sum(z[k].size for k in z.files if k.endswith("/values"))


def check(before: Path, after: Path) -> int:
    differ = 0
    for case in sorted(p for p in before.iterdir() if p.is_dir()):
        other = after / case.name
        if not other.is_dir():
            print(f"{case.name}: missing in {after}")
            differ += 1
            continue
        problems = []
        names = sorted({f.name for f in case.iterdir()} | {f.name for f in other.iterdir()})
        for name in names:
            x, y = case / name, other / name
            if not x.is_file() or not y.is_file():
                problems.append(f"    {name}: only in {'after' if not x.is_file() else 'before'}")
            elif name == "samples.npz":
                problems += _compare_samples(case, other)
            elif VOLATILE.sub(b"", x.read_bytes()) != VOLATILE.sub(b"", y.read_bytes()):
                problems.append(f"    {name}: differs")
        if problems:
            differ += 1
            print(f"{case.name}: DIFFERS")
            print("\n".join(problems))
        else:
            code = (case / "exit_code").read_text().strip()
            calls = len(json.loads((case / "samples.json").read_text()))
            print(f"{case.name}: identical (exit {code}; samples of {calls} runs, "
                  f"{_count_samples(case):,} sample values, byte for byte; {len(names)} files)")
    print("all identical" if not differ else f"{differ} case(s) differ")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="run the comparisons and keep what they decided")
    d.add_argument("--out", type=Path, required=True, metavar="DIR")
    d.add_argument("--work", type=Path, required=True, metavar="DIR",
                   help="where part-file copies, error cases and outputs are made (the same path for both dumps)")
    d.add_argument("--part-rows", type=int, default=0, metavar="N", help="also compare each pair as part files of N records")
    d.add_argument("--history-root", type=Path, metavar="DIR",
                   help="also: the first pair gated with --history DIR, `history DIR` per scenario, and the error cases")
    d.add_argument("pairs", nargs="+", metavar="BASELINE,CANDIDATE")
    c = sub.add_parser("check", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        return dump(args)
    return check(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())

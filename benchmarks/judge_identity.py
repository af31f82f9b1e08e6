"""Does the live judge answer the same when it reads only the running level's records?

The judge process (``loadtest.analysis.decide_worker``) once read the whole run
at every look (``read_requests``) and kept the running level's rows; it now
reads only those rows (``records_stream.read_level``). This replays looks on
saved run folders both ways and compares the decisions (verdict, reason,
failing check and every observed value, exactly): at the middle and at the end
of every level, from the merged ``requests.parquet`` and from part files cut
from it (``--part-rows`` records each, as a run still going has them).

    python benchmarks/judge_identity.py [--part-rows 97] RUN...

Exits 1 at the first decision that differs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from loadtest.analysis.decide import decide_level
from loadtest.analysis.slo import SloSpec
from loadtest.records import PARTS_DIR, REQUESTS_PARQUET, RUN_JSON, read_requests
from loadtest.records_stream import read_level


def as_parts(run: Path, into: Path, rows: int) -> Path:
    """A copy of ``run`` whose records are part files of ``rows`` records (a run before its merge)."""
    out = into / run.name
    (out / PARTS_DIR).mkdir(parents=True)
    shutil.copy(run / RUN_JSON, out / RUN_JSON)
    table = pq.read_table(run / REQUESTS_PARQUET)
    for i, start in enumerate(range(0, table.num_rows, rows)):
        pq.write_table(table.slice(start, rows), out / PARTS_DIR / f"{i:06d}.parquet")
    return out


def check(run_dir: Path) -> tuple[int, float, float]:
    """(looks compared, seconds reading whole, seconds reading the level) for one folder."""
    run = json.loads((run_dir / RUN_JSON).read_text())
    slo = SloSpec.from_dict((run.get("scenario") or {}).get("slo"))
    confidence = float(run.get("verdict_confidence") or 0.95)
    looks, whole_s, level_s = 0, 0.0, 0.0
    for level in run["levels"]:
        end = level.get("end_wall") or level["start_wall"] + 10.0
        for share in (0.5, 1.0):
            now = level["start_wall"] + share * (end - level["start_wall"])
            t0 = time.perf_counter()
            before = decide_level(read_requests(run_dir), run, slo, level, now, confidence)
            t1 = time.perf_counter()
            after = decide_level(read_level(run_dir, int(level["index"])), run, slo, level, now, confidence)
            t2 = time.perf_counter()
            whole_s, level_s = whole_s + t1 - t0, level_s + t2 - t1
            if before != after:
                raise SystemExit(f"{run_dir} level {level['index']} at {share:.0%}: {before} != {after}")
            looks += 1
    return looks, whole_s, level_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part-rows", type=int, default=97)
    ap.add_argument("runs", type=Path, nargs="+", metavar="RUN")
    args = ap.parse_args(argv)
    total = 0
    with tempfile.TemporaryDirectory(prefix="judge-identity-") as tmp:
        for run in args.runs:
            for folder, kind in ((run, "merged"), (as_parts(run, Path(tmp), args.part_rows), "parts")):
                looks, whole_s, level_s = check(folder)
                total += looks
                print(f"{run.name} ({kind}): {looks} looks identical; reading whole {whole_s:.2f} s, the level {level_s:.2f} s")
    print(f"{total} decisions identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())

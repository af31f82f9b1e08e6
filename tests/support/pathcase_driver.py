"""Run many ``loadtest`` command lines in one process and report how each ended.

The path-mistake matrix (tests/e2e/test_path_mistakes.py) has a hundred cells; a
fresh interpreter per cell would cost minutes on a shared machine. Each cell is
``loadtest.cli.main(argv)`` with stdout and stderr captured: an exception that
escapes ``main`` is exactly what would have been a traceback, and is recorded as
one. The matrix runs this script twice: as is, and under ``setpriv`` without
CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH for the permission cells (root ignores
permission bits otherwise).

usage: python pathcase_driver.py CASES.json RESULTS.json
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def main() -> None:
    import locust  # noqa: F401  (gevent's patches first, as the real entry point does for run/worker)

    from loadtest.cli import main as loadtest_main

    cases = json.loads(open(sys.argv[1], encoding="utf-8").read())
    results = []
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        crash = None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = loadtest_main(argv)
            except SystemExit as exc:  # argparse's own errors
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException:  # would have been a traceback
                code, crash = None, traceback.format_exc()
        results.append({"argv": argv, "code": code, "stderr": err.getvalue(), "traceback": crash})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()

"""Every path argument × every ordinary path mistake: one line naming both, exit 2, no traceback.

The matrix is data: :data:`ARGS` (one row per path argument, with the command
line that places a path in it and what kind of path it takes) and
:data:`MISTAKES` (one column per mistake, with how to make it for each kind).
A new path argument is covered by adding one row. Cells whose mistake does not
apply to a kind (a run-folder format for a scenario file) print as ``n/a``.

Every cell runs the real ``loadtest.cli.main`` (tests/support/pathcase_driver.py, in one
child process for speed); a run folder used by the rows comes from a real run
against a real ``loadtest mock``. Permissions: the tests run as root, which
ignores permission bits, so the permission column runs under ``setpriv
--bounding-set=-dac_override,-dac_read_search``: still uid 0, but without the
two capabilities that let root read and write regardless of the bits.

Cells that must succeed in ``run`` (a path with spaces and non-ASCII, a missing
output folder, an existing non-UTF-8 output file) are covered together by one
real run whose every path is odd that way (:func:`test_a_run_whose_every_path_is_odd`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import yaml

from loadtest.mock.process import MockServer
from support.runkit import copy_as_another_run, loadtest, write_scenario

#: asserts nothing about time (bad paths and their one-line errors, no clock): runs in make test's parallel pass
pytestmark = pytest.mark.untimed

HERE = Path(__file__).resolve().parent
FAST_MOCK = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]
TINY_LOAD = {"levels": [1], "level_duration_s": 1.5, "warmup_s": 0.2, "warmup_requests": 0}
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
#: The exit codes a successful `run --baseline` / `compare` may end with (README: the regression gate).
GATE_CODES = {0, 1, 6}


@dataclass(frozen=True)
class Env:
    """What the rows need: a good scenario, a good run folder, good inputs."""

    scenario: Path
    run: Path
    dataset: Path
    bundle: Path
    trace: Path


@dataclass(frozen=True)
class Arg:
    command: str
    name: str  # the argument as the user sees it (and as the error line names it)
    kind: str  # scenario | yaml_file | run_folder | history_dir | out_folder | out_file
    argv: Callable[[Env, Path, Path], list[str]]  # (env, the odd path, a scratch folder) -> command line
    run_load: bool = False  # a cell that passes would send load: its successes are the joint run's


def _yaml_with(env: Env, scratch: Path, field: str, path: Path) -> Path:
    data = yaml.safe_load(env.scenario.read_text())
    if field == "dataset":
        data["workload"]["dataset"] = {"path": str(path), "format": "jsonl"}
    elif field == "trace":
        data["workload"]["trace"] = {"path": str(path), "format": "mooncake"}
        data["load"].pop("levels", None)
        data["load"]["speedups"] = [1]
    else:
        data["target"]["ca_bundle"] = str(path)
    out = scratch / "scenario.yaml"
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return out


def _other_run(env: Env, scratch: Path) -> Path:
    """Another run of the good run's workload, for a candidate: a run compared with itself (or a copy of
    it) is refused before any output."""
    out = scratch / "candidate run"
    if not out.exists():
        copy_as_another_run(env.run, out)
    return out


ARGS: list[Arg] = [
    Arg("validate", "scenario", "scenario", lambda e, p, d: ["validate", str(p)]),
    Arg("run", "scenario", "scenario", lambda e, p, d: ["run", str(p), "--out", str(d / "out")], run_load=True),
    Arg("worker", "scenario", "scenario", lambda e, p, d: ["worker", str(p)], run_load=True),
    Arg("validate", "workload.dataset.path", "yaml_file", lambda e, p, d: ["validate", str(_yaml_with(e, d, "dataset", p))]),
    Arg("validate", "target.ca_bundle", "yaml_file", lambda e, p, d: ["validate", str(_yaml_with(e, d, "ca_bundle", p))]),
    Arg("validate", "workload.trace", "yaml_file", lambda e, p, d: ["validate", str(_yaml_with(e, d, "trace", p))]),
    Arg("run", "--out", "out_folder", lambda e, p, d: ["run", str(e.scenario), "--out", str(p)], run_load=True),
    Arg("run", "--baseline", "run_folder",
        lambda e, p, d: ["run", str(e.scenario), "--baseline", str(p), "--out", str(d / "out")], run_load=True),
    *[Arg("run", f"--{flag}", "out_file",
          lambda e, p, d, flag=flag: ["run", str(e.scenario), "--baseline", str(e.run), f"--{flag}", str(p),
                                      "--out", str(d / "out")], run_load=True)
      for flag in ("junit", "markdown", "html", "json")],
    Arg("analyze", "run_dir", "run_folder", lambda e, p, d: ["analyze", str(p)]),
    Arg("compare", "baseline", "run_folder", lambda e, p, d: ["compare", str(p), str(e.run), "--json", str(d / "c.json")]),
    Arg("compare", "candidate", "run_folder", lambda e, p, d: ["compare", str(e.run), str(p), "--json", str(d / "c.json")]),
    *[Arg("compare", f"--{flag}", "out_file",
          lambda e, p, d, flag=flag: ["compare", str(e.run), str(_other_run(e, d)), f"--{flag}", str(p)])
      for flag in ("junit", "markdown", "html", "json")],
    Arg("history", "DIR", "history_dir", lambda e, p, d: ["history", str(p), "--html", str(d / "h.html")]),
    Arg("history", "--html", "out_file", lambda e, p, d: ["history", str(e.run), "--html", str(p)]),
    Arg("history", "--json", "out_file", lambda e, p, d: ["history", str(e.run), "--html", str(d / "h.html"), "--json", str(p)]),
    Arg("trace synth", "output", "out_file", lambda e, p, d: ["trace", "synth", str(p), "--rate", "5", "--duration-s", "2"]),
]

INPUT_FILES = ("scenario", "yaml_file")
RUN_FOLDERS = ("run_folder", "history_dir")
OUTPUTS = ("out_folder", "out_file")


def _good_input(env: Env, arg: Arg, at: Path) -> Path:
    """A valid input of the row's kind at ``at`` (for the cells that spoil only one property)."""
    if arg.kind in RUN_FOLDERS:
        copy_as_another_run(env.run, at)  # compared with env.run: another run, not a copy of it
    elif arg.name == "target.ca_bundle":
        shutil.copy(env.bundle, at)
    elif arg.name == "workload.dataset.path":
        shutil.copy(env.dataset, at)
    elif arg.name == "workload.trace":
        shutil.copy(env.trace, at)
    else:
        shutil.copy(env.scenario, at)
    return at


def _edit_run_json(folder: Path, edit: Callable[[dict], None]) -> None:
    run = json.loads((folder / "run.json").read_text())
    edit(run)
    (folder / "run.json").write_text(json.dumps(run))


# Each mistake: kind -> (make the odd path in scratch folder d, expected "error" or "ok"); kinds not listed: n/a.
Maker = Callable[[Env, Arg, Path], Path]


def _wrong_type(env: Env, arg: Arg, d: Path) -> Path:
    if arg.kind in INPUT_FILES or arg.kind == "out_file":
        (d / "a folder").mkdir()
        return d / "a folder"
    (d / "a file").write_text("not a folder\n")
    return d / "a file"


def _missing(env: Env, arg: Arg, d: Path) -> Path:
    return d / "does not exist" / "x.yaml" if arg.kind in INPUT_FILES else d / "does not exist"


def _no_permission(env: Env, arg: Arg, d: Path) -> Path:
    if arg.kind in OUTPUTS:
        locked = d / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        return locked / ("out" if arg.kind == "out_folder" else "out.file")
    path = _good_input(env, arg, d / "unreadable")
    path.chmod(0o000)
    return path


def _dangling(env: Env, arg: Arg, d: Path) -> Path:
    (d / "link").symlink_to(d / "gone")
    return d / "link"


def _folder_with_a_file(env: Env, arg: Arg, d: Path) -> Path:
    """A folder holding only notes.txt: not a run folder, and not an empty one for --out."""
    (d / "photos").mkdir()
    (d / "photos" / "notes.txt").write_text("hello\n")
    return d / "photos"


def _older_format(env: Env, arg: Arg, d: Path) -> Path:
    """run.json before it carried ``format``: still read."""
    path = _good_input(env, arg, d / "old run")
    _edit_run_json(path, lambda run: run.pop("format"))
    return path


def _older_and_lacking(env: Env, arg: Arg, d: Path) -> Path:
    """An older or foreign run.json without the levels the analysis needs."""
    path = _good_input(env, arg, d / "old run")
    _edit_run_json(path, lambda run: (run.pop("format"), run.pop("levels")))
    return path


def _newer_format(env: Env, arg: Arg, d: Path) -> Path:
    path = _good_input(env, arg, d / "new run")
    _edit_run_json(path, lambda run: run.update(format=99))
    return path


def _contents(data: bytes, name: str) -> Maker:
    """A file holding ``data`` (for a run folder: its run.json)."""
    def make(env: Env, arg: Arg, d: Path) -> Path:
        if arg.kind in RUN_FOLDERS:
            path = _good_input(env, arg, d / "run")
            (path / "run.json").write_bytes(data)
            return path
        (d / name).write_bytes(data)
        return d / name

    return make


def _parent_is_file(env: Env, arg: Arg, d: Path) -> Path:
    (d / "plain file").write_text("x\n")
    return d / "plain file" / "inside"


def _odd_name(env: Env, arg: Arg, d: Path) -> Path:
    """Spaces and non-ASCII: not a mistake; the path must simply work."""
    name = "ünïcødé name with spaces"
    return d / name if arg.kind in OUTPUTS else _good_input(env, arg, d / name)


MISTAKES: dict[str, tuple[Maker, dict[str, str]]] = {
    "wrong type (file↔folder)": (_wrong_type, dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS, *OUTPUTS), "error")),
    "missing": (_missing, {**dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS), "error"), "out_file": "ok", "out_folder": "ok"}),
    "no permission": (_no_permission, dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS, *OUTPUTS), "error")),
    "dangling symlink": (_dangling, dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS, *OUTPUTS), "error")),
    "not a run folder": (_folder_with_a_file, dict.fromkeys(RUN_FOLDERS, "error")),
    "older format": (_older_format, dict.fromkeys(RUN_FOLDERS, "ok")),
    "older, lacking levels": (_older_and_lacking, dict.fromkeys(RUN_FOLDERS, "error")),
    "newer format": (_newer_format, dict.fromkeys(RUN_FOLDERS, "error")),
    "empty file": (_contents(b"", "empty"), dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS), "error")),
    "not UTF-8": (_contents(b"name: caf\xe9\n\xff\xfe\x00\n", "latin1"), {**dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS), "error"), "out_file": "ok"}),
    "folder not empty": (_folder_with_a_file, {"out_folder": "error"}),
    "parent is a file": (_parent_is_file, dict.fromkeys(("scenario", "yaml_file", *OUTPUTS), "error")),
    "spaces, non-ASCII": (_odd_name, dict.fromkeys(("scenario", "yaml_file", *RUN_FOLDERS, *OUTPUTS), "ok")),
}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Env:
    root = tmp_path_factory.mktemp("paths")
    dataset = root / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"say {i}", "max_tokens": 4}) + "\n" for i in range(10)))
    bundle = root / "ca.pem"
    shutil.copy(__import__("certifi").where(), bundle)
    trace = root / "trace.jsonl"  # a Mooncake trace: ms timestamps, lengths, shared block hashes
    trace.write_text("".join(json.dumps({"timestamp": 100 * i, "input_length": 16, "output_length": 4,
                                         "hash_ids": [0, i]}) + "\n" for i in range(10)))
    with MockServer(FAST_MOCK) as mock:
        scenario = write_scenario(root, mock.base_url, name="paths", load=TINY_LOAD)
        result = loadtest("run", str(scenario), "--out", str(root / "good run"), timeout=120)
        assert result.returncode == 0, result.stderr
        yield Env(scenario, root / "good run", dataset, bundle, trace)


def _drive(cases: list[list[str]], folder: Path, prefix: list[str]) -> list[dict]:
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    subprocess.run([*prefix, sys.executable, str(HERE.parent / "support" / "pathcase_driver.py"), str(folder / "cases.json"),
                    str(folder / "results.json")], check=True, timeout=600, cwd=folder, stdin=subprocess.DEVNULL)
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def _judge(arg: Arg, mistake: str, expect: str, path: Path, result: dict) -> str | None:
    """None if the cell ended as it should, else what went wrong."""
    if result["traceback"]:
        return f"traceback:\n{result['traceback']}"
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    if expect == "ok":
        ok_codes = GATE_CODES if result["argv"][0] == "compare" else {0}
        return None if result["code"] in ok_codes else f"exit {result['code']}: {result['stderr']}"
    if result["code"] != 2:
        return f"exit {result['code']} (expected 2): {result['stderr']}"
    errors = [line for line in lines if ": error: " in line]
    if len(errors) != 1 or len(lines) != 1:
        return f"expected one line, got: {result['stderr']!r}"
    if arg.name not in errors[0] or str(path) not in errors[0]:
        return f"the line does not name {arg.name} and {path}: {errors[0]}"
    return None


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux) for the permission cells")
def test_every_path_argument_fails_cleanly_on_every_mistake(env, tmp_path):
    cells, plain, locked = [], [], []
    for r, arg in enumerate(ARGS):
        for c, (mistake, (make, expects)) in enumerate(MISTAKES.items()):
            expect = expects.get(arg.kind)
            if expect is None or (expect == "ok" and arg.run_load):
                cells.append((arg, mistake, expect and "joint run", None, None))
                continue
            d = tmp_path / f"cell {r}-{c} é"
            d.mkdir()
            path = make(env, arg, d)
            argv = arg.argv(env, path, d)
            (locked if mistake == "no permission" else plain).append(len(cells))
            cells.append((arg, mistake, expect, path, argv))
    results: dict[int, dict] = {}
    for group, prefix, where in ((plain, [], "plain"), (locked, NO_DAC, "locked")):
        (tmp_path / where).mkdir()
        for i, result in zip(group, _drive([cells[i][4] for i in group], tmp_path / where, prefix)):
            results[i] = result
    failures, table = [], {}
    for i, (arg, mistake, expect, path, argv) in enumerate(cells):
        if i not in results:
            mark = "n/a" if expect is None else "ok†"
        else:
            problem = _judge(arg, mistake, expect, path, results[i])
            mark = "✗" if problem else ("exit 2" if expect == "error" else f"ok ({results[i]['code']})")
            if problem:
                failures.append(f"{arg.command} {arg.name} × {mistake}: {problem}")
        table.setdefault(f"`{arg.name}` ({arg.command})", {})[mistake] = mark
    _print_matrix(table)
    assert not failures, "\n".join(failures)
    for row, marks in table.items():  # every row was really walked, not skipped
        assert sum(m == "exit 2" for m in marks.values()) >= 4, (row, marks)
    assert len(results) > 150


def _print_matrix(table: dict[str, dict[str, str]]) -> None:
    """The matrix as Markdown on stdout (pytest -s), for the README and the issue's closing note."""
    names = list(MISTAKES)
    print("\n| argument (command) | " + " | ".join(names) + " |")
    print("|" + "---|" * (len(names) + 1))
    for row, marks in table.items():
        print(f"| {row} | " + " | ".join(marks.get(m, "n/a") for m in names) + " |")


def test_a_run_whose_every_path_is_odd(env, tmp_path):
    """The `ok†` cells of `run`: spaces and non-ASCII in every path, a missing output folder,
    a non-UTF-8 file overwritten, a baseline of the older format (no ``format`` key)."""
    odd = tmp_path / "dossier à espaces"
    odd.mkdir()
    scenario = odd / "scénario de test.yaml"
    shutil.copy(env.scenario, scenario)
    baseline = shutil.copytree(env.run, odd / "base line é")
    _edit_run_json(baseline, lambda run: run.pop("format"))  # the `--baseline` × older format cell
    (odd / "old.md").write_bytes(b"\xff\xfe not utf-8")
    outs = {"--junit": odd / "new folder ü" / "j u.xml", "--markdown": odd / "old.md",
            "--html": odd / "cmp é.html", "--json": odd / "c ø.json"}
    with MockServer(FAST_MOCK) as mock:
        result = loadtest("run", str(scenario), "--target", mock.base_url, "--out", str(odd / "not yet" / "rün"),
                          "--baseline", str(baseline), *[x for k, v in outs.items() for x in (k, str(v))], timeout=180)
    assert result.returncode in GATE_CODES, result.stderr
    assert "Traceback" not in result.stderr
    assert (odd / "not yet" / "rün" / "summary.json").is_file()
    for path in outs.values():
        assert path.is_file() and path.stat().st_size > 0, path
    assert (odd / "old.md").read_text(encoding="utf-8")  # replaced by the Markdown summary


def test_out_is_an_existing_file_is_one_line_before_any_load(env, tmp_path):
    """The reported case: `run … --out FILE` ended in NotADirectoryError after the run."""
    (tmp_path / "report.txt").write_text("I am a file\n")
    result = loadtest("run", str(env.scenario), "--out", str(tmp_path / "report.txt"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == f"loadtest run: error: --out {tmp_path / 'report.txt'}: is a file, expected a folder"


def _no_records(folder: Path) -> None:
    (folder / "requests.parquet").unlink()


def _truncated_records(folder: Path) -> None:
    data = (folder / "requests.parquet").read_bytes()
    (folder / "requests.parquet").write_bytes(data[: len(data) // 3])


def _levels_not_a_list(folder: Path) -> None:
    _edit_run_json(folder, lambda run: run.update(levels="x"))


@pytest.mark.parametrize("spoil", [_no_records, _truncated_records, _levels_not_a_list])
def test_analyze_refuses_a_run_folder_it_cannot_read_and_leaves_its_summary(env, tmp_path, spoil):
    """Without readable records, a re-analysis would write a summary with no levels over the good one."""
    run = shutil.copytree(env.run, tmp_path / "run")
    spoil(run)
    summary = (run / "summary.json").read_bytes()
    result = loadtest("analyze", str(run))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "run_dir" in lines[0] and str(run) in lines[0]
    assert (run / "summary.json").read_bytes() == summary

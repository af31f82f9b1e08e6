"""run.json has one definition (loadtest/run_record.py): written through it, read through it.

- every key that code anywhere in ``loadtest/`` reads from a run.json mapping
  (``run["k"]``, ``run.get("k")``, ``analysis.run.get("k")``...) is a field of
  the model, and every attribute used on a ``.record`` is one;
- no dict literal in ``loadtest/`` names a key twice (the bug that lost the
  compare fingerprint to ``workload_fingerprint``);
- writing an unknown key, or a wrong type, is refused;
- old run folders still load (no ``format``, keys missing: the defaults), a
  newer format is refused with one line;
- the compare fingerprint stored at run time (hash included) is the one
  ``compare`` uses, even after the dataset file changed.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from loadtest.run_record import RUN_FORMAT, RunRecord, normalized

PACKAGE = Path(__file__).resolve().parents[2] / "loadtest"
FIELDS = set(RunRecord.model_fields)


def _run_like(node: ast.AST) -> bool:
    """A name that holds a run.json mapping: ``run``/``run_json``, or an ``.run`` attribute (analysis.run, side.run)."""
    return (isinstance(node, ast.Name) and node.id in ("run", "run_json")) or (
        isinstance(node, ast.Attribute) and node.attr == "run"
    )


def run_json_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) of every constant-key read of a run.json mapping in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _run_like(node.value) and isinstance(node.slice, ast.Constant):
            out.append((node.lineno, node.slice.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _run_like(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)):
            out.append((node.lineno, node.args[0].value))
    return out


def record_attributes(source: str) -> list[tuple[int, str]]:
    """(line, name) of every ``<x>.record.<name>`` (RunState's record), read or written."""
    return [
        (node.lineno, node.attr) for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "record"
        and isinstance(node.value.value, ast.Name) and node.value.value.id in ("state", "self")
    ]


def duplicate_keys(source: str) -> list[tuple[int, str]]:
    """(line, key) of every constant key that a dict literal in ``source`` names twice."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            seen: set = set()
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        out.append((key.lineno, key.value))
                    seen.add(key.value)
    return out


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent), path.read_text(encoding="utf-8")


def test_the_checks_find_what_they_look_for():
    """The scanners below really fail: each finds its defect in a snippet."""
    src = 'x = run.get("no_such_key")\ny = analysis.run["levels"]\nd = {"a": 1, "b": 2, "a": 3}\nstate.record.nope = 1\n'
    assert run_json_reads(src) == [(1, "no_such_key"), (2, "levels")]
    assert duplicate_keys(src) == [(3, "a")]
    assert record_attributes(src) == [(4, "nope")]


def test_every_run_json_key_read_in_the_package_is_defined_in_the_model():
    undefined = [f"{path}:{line}: {key!r}" for path, src in _sources()
                 for line, key in run_json_reads(src) if key not in FIELDS]
    assert not undefined, "run.json keys read but not defined in loadtest/run_record.py:\n" + "\n".join(undefined)
    reads = sum(len(run_json_reads(src)) for _, src in _sources())
    assert reads > 40  # the scan sees the analysis', report's and compare's reads (not a vacuous pass)


def test_every_record_attribute_used_is_a_field():
    undefined = [f"{path}:{line}: {name}" for path, src in _sources()
                 for line, name in record_attributes(src) if name not in FIELDS | {"to_json", "model_copy"}]
    assert not undefined, "\n".join(undefined)


def test_no_dict_literal_in_the_package_names_a_key_twice():
    dupes = [f"{path}:{line}: {key!r}" for path, src in _sources() for line, key in duplicate_keys(src)]
    assert not dupes, "a key written twice in one dict literal (the later silently wins):\n" + "\n".join(dupes)


def test_writing_an_unknown_key_or_a_wrong_type_is_refused():
    with pytest.raises(ValidationError):
        RunRecord(compare_fingerprnt={})  # misspelt
    record = RunRecord()
    with pytest.raises(ValidationError):
        record.stoped_by = "disk_full"
    with pytest.raises(ValidationError):
        record.complete = "maybe"
    with pytest.raises(ValidationError):
        record.load_mode = "sideways"  # a mode must be one the model names
    record.stopped_by = "disk_full"
    assert record.to_json()["stopped_by"] == "disk_full" and record.to_json()["format"] == RUN_FORMAT


def test_an_old_run_json_loads_with_the_defaults_and_keeps_what_it_says():
    old = {"name": "old", "scenario": {"name": "old", "slo": {}}, "levels": [{"index": 0, "concurrency": 2}],
           "workers": ["local"], "some_retired_key": 1, "preflight": {"ttft_ms": 5}}
    run = normalized(old)
    assert run["format"] is None  # it did not say: not stamped with this version's format
    assert run["levels"] == old["levels"] and run["name"] == "old"
    assert run["complete"] is None and run["ended_wall"] is None and run["compare_fingerprint"] is None
    assert run["warmup_s"] == 0.0 and run["cost_options"] == {} and run["load_mode"] == "closed_loop"
    assert "some_retired_key" not in run
    assert run["preflight"] == {"ttft_ms": 5}  # an older shape is kept as written, not refused


def test_a_saved_run_json_reads_back_unchanged():
    run = RunRecord(name="r", warmup_s=2.0, complete=True, levels=[{"index": 0}]).to_json()
    assert normalized(json.loads(json.dumps(run))) == run


def test_the_folder_readers_refuse_a_newer_format_and_read_an_unstamped_one(tmp_path):
    from loadtest.errors import InputError
    from loadtest.paths import read_run_json

    (tmp_path / "run.json").write_text(json.dumps({"format": RUN_FORMAT + 1, "scenario": {}, "levels": []}))
    with pytest.raises(InputError, match="written by a newer loadtest"):
        read_run_json(tmp_path, "DIR")
    (tmp_path / "run.json").write_text(json.dumps({"scenario": {}, "levels": []}))
    assert read_run_json(tmp_path, "DIR")["format"] is None


def test_compare_uses_the_fingerprint_stored_at_run_time_not_the_dataset_as_it_is_now(tmp_path):
    """The run folder's compare fingerprint (with its hash) is the one ``compare`` matches on;
    editing the dataset after the run changes a re-hash, not the run's fingerprint."""
    from loadtest.compare.engine import side_fingerprint
    from loadtest.fingerprint import fingerprint
    from loadtest.compare.inputs import load_run
    from loadtest.records import write_run_json
    from loadtest.run_state import initial_record
    from loadtest.scenario import parse_scenario

    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    scenario = parse_scenario({
        "name": "fp", "target": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "workload": {"dataset": {"path": str(data)}, "max_tokens": 8},
        "load": {"levels": [1, 2], "level_duration_s": 2, "warmup_s": 0},
    })
    folder = tmp_path / "run"
    folder.mkdir()
    record = initial_record(scenario)
    write_run_json(folder, record.to_json())
    (folder / "summary.json").write_text(json.dumps({"name": "fp"}))  # no fingerprint there: run.json's is the one
    stored = json.loads((folder / "run.json").read_text())["compare_fingerprint"]
    assert stored["hash"] and stored["datasets"], stored

    data.write_text('{"prompt": "changed after the run"}\n')
    assert fingerprint(scenario.public_dict())["hash"] != stored["hash"]  # a re-hash now would differ
    used = side_fingerprint(load_run(folder, records=False, arg="--baseline"), "baseline")
    assert used == stored
    assert used["hash"] == stored["hash"]

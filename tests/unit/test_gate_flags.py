"""The gate's list flags refuse a bad value in one line that names the flag and the value (exit 2).

``--tolerance -5%`` was taken by argparse for an unknown option ("-5%" is not a plain negative
number to it), so the user read "argument --tolerance: expected at least one argument" rather
than what was wrong; ``--fail-on capacity,`` (a stray comma, a variable left unset) was read as
``capacity`` without a word. Both are refused before any folder is read, for ``compare``,
``history`` and ``run --baseline`` alike.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from loadtest.cli import main
from loadtest.compare.rules import parse_rules
from loadtest.errors import InputError


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's own refusals end in SystemExit
            code = int(stop.code)
    return code, err.getvalue()


NEGATIVE = "a tolerance is how far a check may move either way and still be unchanged, so 0 or more"


TOLERANCES = [
    ("-5%", f"--tolerance '-5%': {NEGATIVE}"),
    ("-0.05", f"--tolerance '-0.05': {NEGATIVE}"),
    ("itl_ms.p95=-3%", f"--tolerance 'itl_ms.p95=-3%': {NEGATIVE}"),
    ("5%,", "--tolerance '5%,': an empty item in the comma-separated list"),
    ("5%,,itl_ms.p95=3%", "--tolerance '5%,,itl_ms.p95=3%': an empty item"),
]
FAIL_ON = [
    ("capacity,", "--fail-on 'capacity,': an empty item in the comma-separated list"),
    (",latency", "--fail-on ',latency': an empty item"),
    ("capacity, ,latency", "--fail-on 'capacity, ,latency': an empty item"),
]
CASES = ([("compare", "--tolerance", v, says) for v, says in TOLERANCES]
         + [("compare", "--fail-on", v, says) for v, says in FAIL_ON]
         + [("history", "--tolerance", v, says) for v, says in TOLERANCES])  # history has no --fail-on


@pytest.mark.parametrize("command, flag, value, says", CASES)
def test_a_bad_gate_value_is_one_line_naming_the_flag_and_the_value(tmp_path, command, flag, value, says):
    where = ["compare", str(tmp_path / "a"), str(tmp_path / "b")] if command == "compare" else ["history", str(tmp_path)]
    code, err = _cli(*where, flag, value)
    assert code == 2 and says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "expected at least one argument" not in err


def test_run_with_a_baseline_refuses_them_before_any_load(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\ntarget: {base_url: 'http://127.0.0.1:9/v1', model: m}\nload: {levels: [1]}\n")
    for flag, value in (("--tolerance", "-5%"), ("--fail-on", "capacity,")):
        code, err = _cli("run", str(scenario), "--out", str(tmp_path / "out"), "--baseline", str(tmp_path),
                         flag, value)
        assert code == 2 and f"{flag} '{value}'" in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "out").exists()


def test_the_lists_still_take_commas_spaces_and_repeats():
    rules = parse_rules(["5%", "itl_ms.p95=3%, ttft_ms=10%", "throughput=2% error_rate=0.5%"],
                        ["capacity,latency", " itl_ms.p95 "])
    assert rules.tolerance == pytest.approx(0.05)
    assert rules.tolerance_for("itl_ms.p95") == pytest.approx(0.03)
    assert rules.tolerance_for("ttft_ms.p99") == pytest.approx(0.10)
    assert rules.tolerance_for("output_tokens_per_s") == pytest.approx(0.02)
    assert rules.fail_on == {"capacity", "latency", "itl_ms.p95"}
    assert parse_rules(["0%"]).tolerance == 0  # no change tolerated: a meaning, so taken
    with pytest.raises(InputError, match="expected a tolerance like 5% or 0.05, got 'nan%'"):
        parse_rules(["nan%"])


def test_an_unknown_fail_on_item_names_the_groups_too():
    """gate.md lists capacity, latency, all and none beside the checks; so does the refusal."""
    with pytest.raises(InputError) as err:
        parse_rules([], ["latncy"], None)
    text = str(err.value)
    assert "--fail-on 'latncy'" in text and "capacity, latency" in text and "all or none" in text

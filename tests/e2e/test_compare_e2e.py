"""The regression gate end to end: real mock servers, real runs, the real ``loadtest`` command.

The mock's decode step lasts ``B + S × running`` ms, so raising the
per-sequence cost S by 15% slows every level by a known amount (at 4 users
50 → 56 ms per token, +12%, with B = S = 10), while the same mock and scenario,
run again, must not be flagged. The scenario's SLO names TPOT p50 and ITL
p50, so those (plus throughput and the error rate) are the checks.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
import yaml

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

pytestmark = pytest.mark.solo

MOCK = ["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]
PER_SEQ_MS = 10.0
SECTIONS = {
    # Varied output lengths, as in real traffic: with one fixed length the closed-loop users fall
    # into lock-step patterns that differ from run to run (a run-level effect, not sampling noise).
    "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 8, "stddev": 3}},
    # Levels run their full length: a gate needs samples for the change, not only for the SLO verdict.
    "load": {"levels": [2, 4], "level_duration_s": 5, "warmup_s": 0.5, "min_level_duration_s": 5},
    # Medians: on a shared 2-core machine a p95 of ~30 requests per level moves with one stalled
    # request, and the gate then (rightly) answers "inconclusive" rather than "no regression".
    "slo": {"tpot_ms": {"p50": 1000}, "itl_ms": {"p50": 1000}, "max_error_rate": 0.5},
}
REPEATS = 5


def _scenario(folder, base_url, **sections):
    scenario = write_scenario(folder, base_url, **{**SECTIONS, **sections})
    data = yaml.safe_load(scenario.read_text())
    data["slo"] = SECTIONS["slo"]  # exactly these objectives (write_scenario merges in a TTFT one)
    scenario.write_text(yaml.safe_dump(data))
    return scenario


def _run(folder, base_url, out, *extra, **sections):
    return loadtest("run", str(_scenario(folder, base_url, **sections)), "--out", str(out), *extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline and REPEATS more runs of the same scenario against one mock."""
    folder = tmp_path_factory.mktemp("gate")
    with MockServer([*MOCK, "--decode-per-seq-ms", str(PER_SEQ_MS)]) as mock:
        outs = []
        for i in range(REPEATS + 1):
            out = folder / f"same-{i}"
            result = _run(folder, mock.base_url, out)
            assert result.returncode == 0, result.stderr
            outs.append(out)
    return folder, outs


def _failing_cases(junit_file):
    root = ET.parse(junit_file).getroot()
    return [case for case in root.iter("testcase") if case.find("failure") is not None], root


def test_same_mock_same_scenario_passes_every_repeat(runs):
    """No regression in any repeated pair.

    The mock shares two cores with the load generator (and, on a CI machine, with
    other jobs), so a run can be genuinely a little slower; the gate may then say
    "inconclusive" (exit 6) about it, which is not a regression. ``--inconclusive
    pass`` is how a CI job that does not want to be held by that says so; what must
    never happen is a *regression* verdict, and that is what is asserted.
    """
    folder, outs = runs
    baseline = outs[0]
    codes, outcomes = [], []
    for i, candidate in enumerate(outs[1:]):
        junit, report = folder / f"same-{i}.xml", folder / f"same-{i}.json"
        result = loadtest("compare", str(baseline), str(candidate), "--inconclusive", "pass",
                          "--junit", str(junit), "--json", str(report))
        failing, root = _failing_cases(junit)
        codes.append(result.returncode)
        data = json.loads(report.read_text())
        outcomes.append(data["outcome"])
        assert result.returncode == 0, result.stdout + result.stderr
        assert failing == [], [c.get("name") for c in failing]
        assert data["counts"]["regression"] == 0, result.stdout
        assert int(root.get("tests")) == 1 + 2 * 4  # capacity + 2 levels × (tpot p50, itl p50, throughput, errors)
    assert codes == [0] * REPEATS
    print("same-server outcomes:", outcomes)


def test_slower_decode_is_a_regression_with_a_failing_testcase(runs, tmp_path):
    """+12% at 4 users: without a history any speed change is "inconclusive: run-to-run noise
    unknown" (docs/gate.md), so the gate runs as a nightly one should, with the same-server runs
    as its history."""
    folder, outs = runs
    with MockServer([*MOCK, "--decode-per-seq-ms", str(PER_SEQ_MS * 1.15)]) as mock:
        out = tmp_path / "slow"
        junit = tmp_path / "gate.xml"
        result = _run(tmp_path, mock.base_url, out, "--baseline", str(outs[0]), "--junit", str(junit),
                      "--history", str(folder))
    assert result.returncode == 1, result.stdout + result.stderr
    failing, _ = _failing_cases(junit)
    names = [c.get("name") for c in failing]
    # The slowdown is largest where the batch is largest: 4 users, +12% per token.
    assert any(n.startswith(("tpot_ms.p50 @ 4 users", "itl_ms.p50 @ 4 users")) for n in names), names
    message = failing[0].find("failure").get("message")
    assert " at " in message and "users" in message and "%" in message and "→" in message
    # --baseline writes the outputs not given elsewhere into the new run folder.
    for name in ("compare.json", "compare.md", "compare.html"):
        assert (out / name).is_file(), name
    assert not (out / "compare.junit.xml").exists()
    report = json.loads((out / "compare.json").read_text())
    assert report["outcome"] == "regression" and report["exit_code"] == 1
    assert "REGRESSION" in (out / "compare.md").read_text()

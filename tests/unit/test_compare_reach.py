"""What the gate says when its reference runs are few: "within noise", not "unchanged"; the smallest
change it could have caught (:mod:`loadtest.compare.reach`), and that figure is where it turns;
bands printed so that their two ends read alike; no "[?, ?]" for a group's throughput.

A trial against a real llama-server (3 reference runs) printed "unchanged itl_ms.p95 at 1 users:
+56.6% … run-to-run noise [-92.2%, +1132.9%]" and exited 0, rightly, but "unchanged" claimed what
those runs cannot tell, and nothing said that no check could have failed short of a tenfold change.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re

import pytest

from loadtest.compare.noise import fmt_band, fmt_band_end
from support.gate_runs import T0, cli, write_run

#: The reference runs' scales: a server that moves a few percent from run to run.
REFERENCE = (1.0, 1.04, 0.97)


@pytest.fixture(scope="module")
def few(tmp_path_factory):
    """A baseline and 2 earlier runs (3 reference runs, the fewest that judge by the noise), and what
    they could catch (compare.json's ``detectable``, from a candidate of the same server)."""
    root = tmp_path_factory.mktemp("few")
    with contextlib.redirect_stdout(io.StringIO()):
        for i, scale in enumerate(REFERENCE[1:]):
            write_run(root / "history" / f"night-{i}", seed=70 + i, t0=T0 - (2 - i) * 86_400, scale=scale)
        base = write_run(root / "base", seed=1, scale=REFERENCE[0])
        same = write_run(root / "same", seed=2, t0=T0 + 86_400, scale=1.0)
    code, out, _ = cli("compare", str(base), str(same), "--history", str(root / "history"),
                       "--json", str(root / "same.json"))
    assert code == 0, out
    return root, base, json.loads((root / "same.json").read_text())


def _slowed(root, name: str, factor: float, seed: int):
    """A candidate whose every latency is ``factor`` × the reference runs' (geometric) mean."""
    mean = math.exp(sum(math.log(s) for s in REFERENCE) / len(REFERENCE))
    with contextlib.redirect_stdout(io.StringIO()):
        return write_run(root / name, seed=seed, t0=T0 + 2 * 86_400, scale=mean * factor)


def test_the_gate_says_what_it_could_catch_and_turns_there(few):
    """The figure for every check together is the gate's own threshold: a server slowed past it
    fails, one slowed by less (still well past the 5% tolerance) passes as "within noise"."""
    root, base, report = few
    caught = report["detectable"]
    assert caught["reference_runs"] == 3 and caught["candidate_runs"] == 1 and caught["target"] == pytest.approx(0.10)
    every = caught["every_check"]
    assert 0.10 < every < 1.0, caught  # wider than twice the tolerance with 3 runs, but not unbounded
    assert caught["every_check"] <= caught["one_check"] <= caught["one_check_median"], caught
    warning = next(w for w in report["warnings"] if w.startswith("with 3 reference runs the gate fails only"))
    assert f"past about {every * 100:+.0f}%" in warning and caught["one_check_name"] in warning, warning
    assert "(--history) narrow that" not in " ".join(report["warnings"])  # the figures say it instead

    history = ("--history", str(root / "history"))
    past = _slowed(root, "past", (1 + every) ** 1.2, seed=3)
    code, out, _ = cli("compare", str(base), str(past), *history, "--json", str(root / "past.json"))
    assert code == 1, out
    # its bands are lopsided, the worse end at the single-check t once the run as a whole moved: said beside them
    messages = [c["message"] for c in json.loads((root / "past.json").read_text())["checks"]]
    assert any("(narrowed on the worse side: the run as a whole moved worse, composite +" in m for m in messages), out
    inside = _slowed(root, "inside", (1 + every) ** 0.7, seed=4)
    assert (1 + every) ** 0.7 > 1.10  # the change is past twice the tolerance: only the noise holds it
    code, out, _ = cli("compare", str(base), str(inside), *history, "--json", str(root / "inside.json"))
    assert code == 0, out
    assert any(c["within_noise_only"] for c in json.loads((root / "inside.json").read_text())["checks"]), out


def test_a_change_within_wide_noise_is_said_within_noise_not_unchanged(few, tmp_path):
    root, base, report = few
    cand = _slowed(root, "noisy", 1.15, seed=5)
    code, out, _ = cli("compare", str(base), str(cand), "--history", str(root / "history"),
                       "--json", str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"),
                       "--html", str(tmp_path / "c.html"), "--junit", str(tmp_path / "c.xml"))
    assert code == 0, out
    noisy = [c for c in json.loads((tmp_path / "c.json").read_text())["checks"] if c["within_noise_only"]]
    assert noisy, out
    md, page, junit = ((tmp_path / f).read_text() for f in ("c.md", "c.html", "c.xml"))
    for c in noisy:
        assert c["verdict"] == "unchanged"  # compare.json's four verdicts are a contract; within_noise_only says it
        line = next(ln for ln in out.splitlines() if c["message"] in ln)
        assert re.match(r"^\s+within noise\s", line) and "unchanged" not in line.split(c["check"])[0], line
        worse = c["noise_ci"][1] if c["kind"] == "latency" else c["noise_ci"][0]
        assert (f"the gate cannot tell it from noise with {c['noise_runs']} reference runs, and fails this check "
                f"only past {fmt_band_end(worse)}") in c["message"], c["message"]
        assert f"⚪ within noise | {c['name']} |" in md
        assert f"within noise: {c['message']}" in junit
    assert page.count(">within noise</td>") == len(noisy)


def test_a_wide_band_prints_as_factors_that_read_alike_both_ways():
    """The noise is modelled on the log scale: ±2.5 there printed "[-92.2%, +1132.9%]"."""
    lo, hi = math.exp(-2.55) - 1, math.exp(2.51) - 1
    assert fmt_band((lo, hi)) == "[÷12.8, ×12.3]"
    assert fmt_band((-0.109, 15.815)) == "[-10.9%, ×16.8]"
    assert fmt_band((-0.204, 0.378)) == "[-20.4%, +37.8%]"  # within a halving and a doubling: percent
    assert fmt_band((0.0, 0.146), relative=False) == "[+0.0 pp, +14.6 pp]"
    assert fmt_band((math.nan, 0.1)) == "–"


def test_a_groups_throughput_says_why_it_has_no_within_run_interval(few, tmp_path):
    """With --repeat (or --also-*) a throughput's change is the groups' and its runs are read from
    their summaries, which keep no throughput interval: it printed "-14.7% [?, ?] … within-run [?, ?]"."""
    root, base, _ = few
    other = _slowed(root, "other", 1.0, seed=6)
    code, out, _ = cli("compare", str(base), str(root / "same"), "--also-candidate", str(other),
                       "--history", str(root / "history"), "--json", str(tmp_path / "g.json"))
    checks = json.loads((tmp_path / "g.json").read_text())["checks"]
    throughput = [c for c in checks if c["check"] == "output_tokens_per_s"]
    assert throughput and "?" not in out, out
    for c in throughput:
        assert c["ci"] is None or all(x is None for x in c["ci"])
        assert "no within-run interval: summary.json keeps none for throughput" in c["message"], c["message"]
        assert "[?" not in c["message"] and "within-run [" not in c["message"]

"""The gate on runs whose levels are rates (open loop) or trace speedups: matched by the rate, judged as users are.

Until 2026-12, ``compare``, ``run --baseline`` and ``history`` refused such runs (exit 2): levels were
matched by their concurrent users, every level of an open loop has none, and its levels all fell on
one key, "0 users". The runs here are synthetic open loops with known answers
(:func:`support.gate_runs.write_rate_run`: latencies that grow with the rate, times a ``scale``; or a
server with 2 slots that falls behind above about 4 req/s), so "30% slower at every rate" and "its
capacity fell from 16 to 4 req/s" are facts the gate must find.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from loadtest.fingerprint import differences, fingerprint
from support import gate_runs
from support.gate_runs import EARLIER, T0, cli, scenario_dict, write_rate_run

#: The module-scoped open-loop runs (support/gate_runs.py), bound here so that pytest finds them.
pair = gate_runs.pair
rate_pair = gate_runs.rate_pair


def _compare(tmp_path: Path, name: str, *args: str) -> tuple[int, str, dict, list[str]]:
    """``loadtest compare ARGS`` with every output: (exit code, terminal, compare.json, JUnit test names)."""
    out = {k: tmp_path / f"{name}.{k}" for k in ("json", "xml", "md", "html")}
    code, text, err = cli("compare", *args, "--json", str(out["json"]), "--junit", str(out["xml"]),
                          "--markdown", str(out["md"]), "--html", str(out["html"]))
    assert "Traceback" not in err, err
    report = json.loads(out["json"].read_text())
    names = [case.get("name") for case in ET.parse(out["xml"]).getroot().iter("testcase")]
    every = text + out["md"].read_text() + out["xml"].read_text() + out["json"].read_text() + out["html"].read_text()
    assert " users" not in every and "0 users" not in every, "a rate level named as users"
    return code, text, report, names


def test_rate_levels_are_matched_by_their_rate_and_a_slower_server_fails_at_each(rate_pair, tmp_path):
    """Every rate of both runs is compared (not only the largest, at "0 users"), against the run-to-run
    noise of the same server: the same server passes, a 30% slower one fails at 4, 8 and 16 req/s."""
    root, base, same, slow, _ = rate_pair
    history = ("--history", str(root / EARLIER))
    code, text, report, names = _compare(tmp_path, "same", str(base), str(same), *history)
    assert code == 0, text
    assert report["load_mode"] == "open_loop" and report["history_runs"] == 3
    levels = {c["level"] for c in report["checks"] if c["level"] is not None}
    assert levels == {4.0, 8.0, 16.0}, levels
    judged = [c for c in report["checks"] if c["kind"] == "latency"]
    assert judged and all(c["noise"] == "history" for c in judged), [c["name"] for c in judged if c["noise"] != "history"]
    assert "ttft_ms.p95 @ 4 req/s" in names and "ttft_ms.p50 @ 16 req/s" in names, names

    code, text, report, names = _compare(tmp_path, "slow", str(base), str(slow), *history)
    assert code == 1, text
    failing = {c["name"] for c in report["checks"] if c["fails_gate"]}
    for rate in ("4", "8", "16"):
        assert {f"ttft_ms.p95 @ {rate} req/s", f"itl_ms.p50 @ {rate} req/s"} <= failing, failing
    message = next(c["message"] for c in report["checks"] if c["name"] == "ttft_ms.p95 @ 8 req/s")
    assert message.startswith("ttft_ms.p95 at 8 req/s: ") and "reference runs" in message, message
    assert "capacity" not in failing  # the slower server still holds every rate within the SLOs


def test_a_server_that_falls_behind_loses_capacity_in_req_s_and_its_completed_share(rate_pair, tmp_path):
    """At a fixed offered rate the tokens/s follow the client's schedule; what measures the server is the
    share of the sends it completed. A server that falls behind above ~4 req/s completes a third at 16."""
    root, base, _, _, behind = rate_pair
    code, text, report, _ = _compare(tmp_path, "behind", str(base), str(behind), "--history", str(root / EARLIER))
    assert code == 1, text
    summaries = [json.loads((run / "summary.json").read_text()) for run in (base, behind)]
    caps = [s["capacity"]["rate_rps"] for s in summaries]
    assert caps[1] < caps[0] and caps[0] == summaries[0]["capacity"]["max_tested_rate_rps"], caps
    capacity = next(c for c in report["checks"] if c["check"] == "capacity")
    assert capacity["verdict"] == "regression" and capacity["fails_gate"], capacity
    assert f"capacity dropped for certain: {caps[0]:g} → {caps[1]:g} req/s" in capacity["message"], capacity["message"]
    for side, summary in zip(("baseline", "candidate"), summaries):
        assert report[side]["capacity"]["rate_rps"] == summary["capacity"]["rate_rps"]
        assert report[side]["capacity"]["concurrency"] is None
    assert report["baseline"]["capacity"]["bounds"]["lower"] == caps[0]

    share = {c["level"]: c for c in report["checks"] if c["check"] == "completed_share"}
    assert set(share) == {4.0, 8.0, 16.0} and not any(c["check"] == "output_tokens_per_s" for c in report["checks"])
    loops = [{lv["rate_rps"]: lv["open_loop"] for lv in s["levels"]} for s in summaries]
    for rate, check in share.items():  # the summaries' own figures: completed over sent
        for value, loop in ((check["baseline"], loops[0][rate]), (check["candidate"], loops[1][rate])):
            assert value == pytest.approx(loop["completed_rps"] / loop["sent_rps"])
    top = share[16.0]
    assert top["candidate"] < 0.5 < 0.95 < top["baseline"], top
    assert top["kind"] == "throughput" and top["fails_gate"], top
    assert top["ci"][0] < top["change"] < top["ci"][1] and top["ci"][1] < -0.05, top  # a within-run interval, past 5%
    assert share[4.0]["verdict"] == "unchanged", share[4.0]  # it kept up there


def test_without_history_a_speed_change_at_a_rate_is_held_as_for_users(rate_pair, tmp_path):
    """Two runs alone do not know the run-to-run noise: a 30% slowdown at a rate is inconclusive
    (exit 6), as it is at a number of users, and says what --history needs."""
    _, base, _, slow, _ = rate_pair
    code, text, report, names = _compare(tmp_path, "pair", str(base), str(slow))
    assert code == 6, text
    held = [c for c in report["checks"] if c["holds_gate"]]
    assert held and all(c["noise"] == "unknown" for c in held)
    assert "completed_share @ 8 req/s" in names and "output_tokens_per_s @ 8 req/s" not in names


def test_runs_of_two_load_modes_are_refused_in_one_line_naming_both(pair, rate_pair, tmp_path):
    _, closed, _, _ = pair
    root, rates, same, _, _ = rate_pair
    code, out, err = cli("compare", str(closed), str(rates))
    assert code == 2 and not out
    assert err.strip().splitlines() == [
        f"loadtest compare: error: incomparable runs: baseline {closed} is a closed-loop run (load.levels) and "
        f"candidate {rates} is an open-loop run (load.rates); compare runs of one load mode"], err
    code, _, err = cli("compare", str(rates), str(same), "--also-candidate", str(closed))
    assert code == 2 and f"--also-candidate {closed} is a closed-loop run (load.levels)" in err and f"baseline {rates}" in err
    assert len(err.strip().splitlines()) == 1
    # a bare summary.json says its mode by its levels
    code, _, err = cli("compare", str(closed / "summary.json"), str(rates))
    assert code == 2 and f"baseline {closed / 'summary.json'} is a closed-loop run" in err, err
    # run --baseline: before any load is sent
    scenario = tmp_path / "rates.yaml"
    scenario.write_text(json.dumps({**scenario_dict(), "load": {"rates": [2, 4], "level_duration_s": 10, "warmup_s": 1}}))
    code, _, err = cli("run", str(scenario), "--baseline", str(closed), "--out", str(tmp_path / "run"))
    assert code == 2 and f"--baseline {closed} is a closed-loop run (load.levels) and the run of {scenario} would be " \
        "an open-loop run (load.rates)" in err, err
    assert not (tmp_path / "run").exists()


def test_rate_runs_without_a_level_in_common_are_refused(rate_pair, tmp_path):
    """Of one workload (the fingerprint holds the rates), but a summary whose levels ran at other rates:
    nothing would be compared but the capacity, so it is refused, naming what each run measured."""
    _, base, same, _, _ = rate_pair
    summary = json.loads((same / "summary.json").read_text())
    for level in summary["levels"]:
        level["rate_rps"] *= 1.5
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    code, out, err = cli("compare", str(base), str(tmp_path / "summary.json"))
    assert code == 2 and "No regression" not in out
    assert err.strip().splitlines() == [
        f"loadtest compare: error: incomparable runs: no level in common (baseline {base} measured 4, 8, 16 req/s; "
        f"candidate {tmp_path / 'summary.json'} measured 6, 12, 24 req/s)"], err


def test_a_trace_replay_is_matched_by_its_speedup(tmp_path):
    """A trace replay's levels are speedups of its window (here of 4 req/s): a server with 2 slots waits
    seconds at 4× (16 req/s), past the TTFT limit, where the baseline held: its capacity fell, in ×."""
    slo = {"ttft_ms": {"p95": 2000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}
    with contextlib.redirect_stdout(io.StringIO()):
        base = write_rate_run(tmp_path / "base", seed=1, trace_rate=4.0, rates=(1, 2, 4), slo=slo)
        slow = write_rate_run(tmp_path / "slow", seed=2, t0=T0 + 86_400, trace_rate=4.0, rates=(1, 2, 4), slots=2, slo=slo)
    code, text, report, names = _compare(tmp_path, "trace", str(base), str(slow))
    assert code == 1, text
    assert report["load_mode"] == "trace_replay"
    assert "ttft_ms.p95 @ 2×" in names and "completed_share @ 4×" in names, names
    capacity = next(c for c in report["checks"] if c["check"] == "capacity")
    speedups = [json.loads((run / "summary.json").read_text())["capacity"]["speedup"] for run in (base, slow)]
    assert capacity["fails_gate"] and f"{speedups[0]:g}× → {speedups[1]:g}×" in capacity["message"], capacity["message"]
    assert report["candidate"]["capacity"]["speedup"] == speedups[1]


def test_history_lists_rate_runs_by_rate_and_marks_the_slower_one(rate_pair, tmp_path):
    root, _, _, _, _ = rate_pair
    runs = tmp_path / "runs"
    shutil.copytree(root, runs, ignore=shutil.ignore_patterns("behind"))
    code, out, err = cli("history", str(runs), "--html", str(tmp_path / "h.html"), "--json", str(tmp_path / "h.json"))
    assert code == 0 and "skipped" not in err, err
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["load_mode"] == "open_loop"
    rows = {Path(r["run"]).name: r for r in doc["runs"]}
    assert rows["slow"]["vs_previous"] == "regression" and rows["same"]["vs_previous"] == "pass", rows
    assert rows["base"]["capacity"] == 16.0 and rows["base"]["bracket"] == "at least 16 req/s"
    assert "ttft_ms.p95@16 req/s" in rows["slow"] and rows["slow"]["ttft_ms.p95@16 req/s"] > rows["same"]["ttft_ms.p95@16 req/s"]
    assert any(cp["name"].endswith(" req/s") and cp["worse"] for cp in doc["change_points"]), doc["change_points"]
    assert "capacity (req\\u002fs; bar: certain bracket)" in (tmp_path / "h.html").read_text()  # plotly escapes "/"
    assert " users" not in out


def test_a_rate_run_is_promoted_as_a_baseline(rate_pair, tmp_path):
    """Refused while the gate could not judge one (every later night would have exited 2)."""
    root, base, same, _, _ = rate_pair
    code, _, err = cli("baseline", "promote", str(base), str(tmp_path / "baseline"))
    assert code == 0, err
    code, text, _, _ = _compare(tmp_path, "promoted", str(tmp_path / "baseline"), str(same), "--history", str(root / EARLIER))
    assert code == 0, text


def test_the_fingerprint_of_a_rate_run_holds_its_rates_and_how_arrivals_are_drawn():
    """Bursty arrivals at the same mean rate queue more: other work, as other levels are. A closed loop's
    fingerprint names none of it (its hash is the one stored in every earlier run)."""
    load = {"rates": [2, 4], "level_duration_s": 10, "warmup_s": 1}
    poisson = fingerprint({"load": load})
    bursty = fingerprint({"load": {**load, "arrival": "gamma", "burstiness": 0.5}})
    more = fingerprint({"load": {**load, "rates": [2, 4, 8]}})
    assert poisson["rates"] == [2, 4] and poisson["arrival"] == "poisson" and poisson["max_in_flight"] == 512
    assert differences(poisson, bursty) == ["arrival: poisson → gamma", "burstiness: unset → 0.5"]
    assert differences(poisson, more) == ["rates: [2,4] → [2,4,8]"]
    assert fingerprint({"load": {**load, "arrival_seed": 7}})["hash"] == poisson["hash"]  # other draws, one process
    closed = fingerprint({"load": {"levels": [1, 2], "level_duration_s": 10, "warmup_s": 1}})
    assert not {"rates", "speedups", "arrival", "burstiness", "max_in_flight"} & set(closed)
    replay = fingerprint({"load": {"speedups": [0.5, 1], "level_duration_s": 10, "warmup_s": 1}})
    assert replay["speedups"] == [0.5, 1] and "arrival" not in replay


def test_the_completed_share_of_runs_alike_to_the_send_does_not_sway_the_other_checks(rate_pair, tmp_path):
    """A seeded arrival schedule sends the same requests in every run, so a healthy server's completed
    share came out alike to 0.01% in four mock runs, and a candidate's few percent (its longer lives
    moved the served span's edges) stood thousands of spreads away: the composite of all checks read
    −3250, "the run as a whole moved better", and a +90% ITL passed as within noise. The share is a
    count of the sends, known to about one send in their number, and that floors its spread."""
    root, base, _, slow, _ = rate_pair
    history = tmp_path / "history"
    shutil.copytree(root / EARLIER, history)
    own = {lv["rate_rps"]: lv["open_loop"] for lv in json.loads((base / "summary.json").read_text())["levels"]}
    for i, run in enumerate(sorted(history.iterdir())):
        summary = json.loads((run / "summary.json").read_text())
        for level in summary["levels"]:  # the baseline's share, to a hair
            loop, ref = level["open_loop"], own[level["rate_rps"]]
            loop["completed_rps"] = loop["sent_rps"] * ref["completed_rps"] / ref["sent_rps"] * (1 + 1e-5 * (i + 1))
        (run / "summary.json").write_text(json.dumps(summary))
    # the slower candidate's share, a few percent off theirs as the mock's was (kept alone: no records)
    summary = json.loads((slow / "summary.json").read_text())
    for level in summary["levels"]:
        level["open_loop"]["completed_rps"] *= 1.04
    candidate = tmp_path / "slow" / "summary.json"
    candidate.parent.mkdir()
    candidate.write_text(json.dumps(summary))
    code, text, report, _ = _compare(tmp_path, "alike", str(base), str(candidate), "--history", str(history))
    assert code == 1, text
    composite = next(w for w in report["warnings"] if "judged together" in w)
    assert "moved better" not in text and "composite -" not in composite, composite
    failing = {c["name"] for c in report["checks"] if c["fails_gate"]}
    assert {f"itl_ms.p50 @ {rate} req/s" for rate in ("4", "8", "16")} <= failing, failing
    share = [c for c in report["checks"] if c["check"] == "completed_share"]
    assert share and all(c["verdict"] != "regression" for c in share), [c["message"] for c in share]

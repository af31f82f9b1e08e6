"""``loadtest profile`` against the mock in roofline mode: it recovers the mock's declared truth.

The mock (loadtest/mock/roofline.py, MODEL.md "Roofline mode") declares
1000 GB/s, 16 TFLOPS, 8 B parameters at 2 bytes, 4 MB of KV per context token
and 0.5 ms overhead per step. By its formulas, with the profile's decode
requests (8-word prompts, 96 output tokens: a mean context of 8 + 48 = 56
tokens, as the test reads it back from the records):

- decode step, memory side: 0.5 + 16 + n × 4e6 × 56 / 1e12 s = 16.5 + 0.224 n ms;
- compute side: 0.5 + n × 2 × 8e9 / 16e12 s = 0.5 + 1.0 n ms;
- knee: 16 / (1 − 0.224) = 20.6 sequences;

Short prompts matter here: admitting a request computes its whole prompt in
that step, and at 1 ms per token a 32-word prompt costs as much as 32 decode
sequences (a real GPU's knee is in the hundreds, so a short prompt costs it
less than a step).
- prefill: 1.0 ms per prompt token (the compute floor), fixed about the overhead.

A second mock has a 25 ms overhead on a model whose floors are ~1 ms: that is
``overhead``-bound, not memory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loadtest.mock.parse import count_words
from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

# The decode slope (per-sequence cost) is fitted to step times within 10%: a neighbour's CPU
# lengthens the mock's larger steps more. So the roofline tests are solo; the overhead test is paired.
SLOPE_WITHIN_10_PCT = pytest.mark.solo

ROOFLINE = ["--roofline-hbm-gbps", "1000", "--roofline-tflops", "16", "--roofline-params-b", "8",
            "--roofline-bytes-per-weight", "2", "--roofline-kv-bytes-per-token", "4e6", "--roofline-overhead-ms", "0.5"]
# 6 s decode levels and one round of knee probes. The fitted per_seq_ms runs above the mock's truth
# by an amount that shrank as the levels grew: with two knee rounds and 4 s levels +10.2% (3 of 3 in
# one suite run), with 6 s +3.8 to +7.5% in five runs alone and +10.0% once in a clean-clone suite
# (past the 10% the issue asks for), with 8 s +1.8 to +4.2% in three runs. Most of that excess came
# from the second round's probes: its batch sizes sit one to three sequences past the knee, where
# a step that also admits a newcomer's 8-token prompt (8 ms at 1 ms a token) lands on one side of
# the two-segment split or the other. Refitting one 8 s profile without them moved per_seq from
# +5.1% to -0.2% and the knee from 20.77 to 20.49 (truth 20.62). With one round
# (``--knee-rounds 1``): 8 s levels +1.0, +3.2, -0.8%, knee 20.52-20.75, in 101-102 s; 6 s levels
# +3.3, +2.1, +2.9, +3.2, +3.4 and +1.1% (six runs), knee 20.62-20.73, in 82-84 s, against 132 s
# for two rounds of 8 s levels. What is left of the excess is in the mock's own steps, not the
# client's stamps (the mock keeps its schedule to ~0.1 ms a step, and the client's ITL p50 matches
# the modelled step past the knee).
FAST = ["--prefill-s", "8", "--max-prompt-tokens", "512", "--decode-level-s", "6", "--warmup", "1",
        "--decode-prompt-tokens", "8", "--decode-max-tokens", "96", "--knee-rounds", "1"]


def _profile(folder: Path, mock_args: list[str], *extra: str, **sections) -> tuple[dict, str]:
    with MockServer(mock_args) as mock:
        scenario = write_scenario(folder, mock.base_url, target={"api": "completions", "timeout_s": 30}, **sections)
        result = loadtest("profile", str(scenario), "--out", str(folder / "profile"), *FAST, *extra, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((folder / "profile" / "profile.json").read_text()), result.stdout


@pytest.fixture(scope="module")
def roofline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile-roofline")
    # hardware and model declared as the mock's; the parameter count comes from its /v1/models meta.
    # The mock's request log is its own account of each TTFT, for the prefill fit to be held against.
    # 8 s decode levels here (FAST's 6 s for the rest): the slope's tail at 6 s reached +10.0% and +10.1%
    # in two clean-clone suites (2026-12-05, 2026-12-06; +3.1 and +3.9% alone the same hour), at 8 s
    # +1.0, +3.2 and -0.8% (above).
    return _profile(
        folder, [*ROOFLINE, "--request-log", str(folder / "requests.jsonl")], "--max-batch", "32",
        "--decode-level-s", "8", hardware={"hbm_gbps": 1000, "tflops": 16}, model={"kv_bytes_per_token": 4e6},
    ) + (folder,)


def _server_prefill_view(folder: Path) -> tuple[float, float, float]:
    """The prefill sweep as the mock saw it: (fixed ms, ms per token, transport ms).

    The line goes through the mock's own TTFT p50 per prompt length (its request log), over the
    sweep's measured requests. The sweep sends one request at a time, so the client's records and
    the log's entries pair up in order; transport is the median of the client's TTFT less the
    mock's for the same request: the time outside the mock's stamps (its HTTP parsing before
    ``arrival``, its write after ``first_token``, the client's send and read).
    """
    records = pd.read_parquet(folder / "profile" / "prefill" / "requests.parquet").sort_values("start_wall")
    entries = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    # the sweep's prompts are the only ones of 100 words or more (the decode runs send 8); the
    # mock counts a word as a token (count_words)
    entries = sorted((e for e in entries if count_words(e.get("prompt") or "") >= 100), key=lambda e: e["arrival"])
    assert len(entries) == len(records), (len(entries), len(records))
    by_length: dict[int, list[float]] = {}
    transport = []
    for row, entry in zip(records.itertuples(), entries):
        assert count_words(entry["prompt"]) == row.prompt_tokens
        if not row.warmup and row.ok and entry["outcome"] == "finished":  # the sweep's end cancels its last request
            by_length.setdefault(int(row.prompt_tokens), []).append(entry["ttft_ms"])
            transport.append(row.ttft_ms - entry["ttft_ms"])
    lengths = sorted(by_length)
    assert len(lengths) >= 3, lengths
    slope, fixed = np.polyfit(lengths, [float(np.median(by_length[n])) for n in lengths], 1)
    return float(fixed), float(slope), float(np.median(transport))


@SLOPE_WITHIN_10_PCT
def test_prefill_per_token_cost_is_recovered(roofline):
    profile, _, folder = roofline
    p = profile["prefill"]
    assert p["ms_per_token"] == pytest.approx(1.0, rel=0.10)
    assert p["tokens_per_s"] == pytest.approx(1000, rel=0.10)
    lo, hi = p["ms_per_token_ci"]
    assert lo <= p["ms_per_token"] <= hi
    # The fixed part is the 0.5 ms overhead plus the mock's own per-request work and the trip
    # there and back: 7-11 ms on an idle 2-core host, 11 ms on CI's slower cores, so no wall-clock
    # bound holds it. It is held against the mock's own account instead: the line through the
    # mock's TTFTs (3-4 ms fixed: its steps run a little late) plus the measured time outside its
    # stamps (4-7 ms, the same with a raw-socket client: the mock's, not Locust's).
    # The fit's interval is wide (±2-4 ms: three prompt lengths, 5-10 requests each).
    server_fixed, server_slope, transport = _server_prefill_view(folder)
    assert 0 <= transport < 0.2 * p["points"][0]["ttft_p50_ms"], transport  # 4-8 ms here
    # within the fit's own interval (a millisecond of slack: the two lines' p50s are of different draws)
    fixed_lo, fixed_hi = p["fixed_ms_ci"]
    assert fixed_lo - 1.0 <= server_fixed + transport <= fixed_hi + 1.0, (p["fixed_ms_ci"], server_fixed, transport)
    assert p["ms_per_token"] == pytest.approx(server_slope, rel=0.03)
    assert [pt["prompt_tokens"] for pt in p["points"]][:3] == [128, 256, 512] or p["points"][0]["prompt_tokens"] >= 128
    assert p["bound"] == "compute"


@SLOPE_WITHIN_10_PCT
def test_decode_costs_and_knee_are_recovered(roofline):
    profile, _, _ = roofline
    d = profile["decode"]
    context = d["context_tokens"]
    assert 52 <= context <= 60  # 8-word prompts and 96 tokens out: 8 + 48
    per_seq = 4e6 * context / 1e12 * 1000  # ms
    knee = 16 / (1.0 - per_seq)
    assert d["fixed_ms"] == pytest.approx(16.5, rel=0.10)
    assert d["per_seq_ms"] == pytest.approx(per_seq, rel=0.10)
    assert d["compute_ms_per_seq"] == pytest.approx(1.0, rel=0.10)
    assert abs(d["knee_sequences"] - knee) <= 1.0, (d["knee_sequences"], knee)
    # the right bound each side of the knee, point by point (one sequence either side may sit on the line)
    for point in d["points"]:
        if point["sequences"] < knee - 1:
            assert point["bound"] == "memory", point
        elif point["sequences"] > knee + 1:
            assert point["bound"] == "compute", point
    assert d["bound_below_knee"] == "memory" and d["bound_above_knee"] == "compute"
    assert profile["summary"][0].startswith("decode is memory-bound up to about")


@SLOPE_WITHIN_10_PCT
def test_profile_folder_holds_the_runs_the_report_and_the_table(roofline):
    profile, stdout, folder = roofline
    out = folder / "profile"
    assert profile["runs"] == ["prefill", "decode-1", "decode-ladder", "decode-knee-1"]  # --knee-rounds 1
    for run in profile["runs"]:
        assert (out / run / "summary.json").is_file() and (out / run / "report.html").is_file()
    page = (out / "report.html").read_text()
    assert "id='profile'" in page and "memory-bound up to about" in page
    assert "decode: step time against batch size" in stdout
    assert profile["model"]["params"] == 8e9 and profile["model"]["bytes_per_weight"] == 2.0
    assert profile["complete"] is True and profile["wall_s"] > 0


# Paired (no mark): no slope is asserted, only the step's fixed part within 10% of 26 ms and the
# bound, "overhead" by a factor of 25 over the floors. Beside a full-core hog it passed 2 of 2.
def test_a_large_fixed_overhead_is_called_overhead(tmp_path):
    args = ["--roofline-hbm-gbps", "1000", "--roofline-tflops", "16", "--roofline-params-b", "0.5",
            "--roofline-overhead-ms", "25"]
    # 4 s levels and a 4 s prefill sweep (the last flags win over FAST's): only the step's fixed part
    # and the bound are asserted, and a 26 ms step gives over a hundred gaps per user in 3 s.
    profile, _ = _profile(tmp_path, args, "--max-batch", "8", "--decode-level-s", "4", "--prefill-s", "4",
                          hardware={"hbm_gbps": 1000, "tflops": 16})
    d = profile["decode"]
    assert d["fixed_ms"] == pytest.approx(26, rel=0.10)  # 25 + the 1 ms weight read
    assert all(p["bound"] == "overhead" for p in d["points"]), d["points"]
    assert d["bound_below_knee"] == "overhead"
    assert "overhead-bound" in profile["summary"][0]


# Paired (no mark): the mock's step is 0.5 + 5 n ms, so the ladder's limit (2 × one sequence's, ~11 ms)
# is passed at 4 sequences by 3.7× the base (2 may pass or not: 1.9×); nothing else here is timed.
def test_the_sweeps_print_their_stopping_rule_not_a_capacity_or_autoscaling(tmp_path):
    """A trial against a 1-thread llama-server read, under the user's ITL p95 of 100 ms: "Even the lowest
    tested level (2 concurrent users) fails the SLOs: the p50 ITL is 3.71 ms against a 2.158 ms limit"
    and, from every sweep, "autoscaling: ... aim for 0.8 concurrent users per replica": the ladder's own
    stopping rule and each sweep's error budget, printed as findings about the endpoint."""
    with MockServer(["--decode-base-ms", "0.5", "--decode-per-seq-ms", "5", "--max-batch", "16"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, target={"api": "completions", "timeout_s": 30},
                                  slo={"itl_ms": {"p95": 100}, "max_error_rate": 0.01})
        result = loadtest("profile", str(scenario), "--out", str(tmp_path / "profile"), "--prefill-s", "3",
                          "--max-prompt-tokens", "256", "--decode-level-s", "3", "--warmup", "1",
                          "--decode-prompt-tokens", "8", "--decode-max-tokens", "32", "--knee-rounds", "0",
                          "--max-batch", "4", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for finding in ("autoscaling:", "This endpoint", "fails the SLOs", "why it stops there"):
        assert finding not in out, (finding, out)
    assert out.count("not your SLOs") == 3, out  # prefill, decode-1, decode-ladder
    assert "verdict: the profile's stopping rule for this ladder (ITL p50 ≤" in out
    assert re.search(r"the ladder stops at [24] users: its ITL p50 [\d.]+ ms passed [\d.]+ ms", out), out
    # the sweeps' folders keep their own summaries, capacity and autoscaling included
    ladder = json.loads((tmp_path / "profile" / "decode-ladder" / "summary.json").read_text())
    assert ladder["capacity"]["first_failing"] in (2, 4) and "autoscaling" in ladder

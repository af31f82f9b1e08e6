"""An ordinary run's summary.json gets cost (on goodput), the decode fit and each level's bound."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from loadtest.analysis.cost import DAYS_PER_MONTH
from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run-cost")
    # d(c) = 10 + 2c ms (MODEL.md): ITL 12, 14, 18, 26 at 1, 2, 4, 8 users; the 22 ms ITL SLO holds up to 4
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(
            folder, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 32},
            load={"levels": [1, 2, 4, 8], "level_duration_s": 4, "warmup_s": 1,
                  "min_level_duration_s": 4, "max_level_duration_s": 4},
            cost={"usd_per_accelerator_hour": 1.5, "daily_shape": [1.0] * 12 + [0.5] * 12},
            hardware={"accelerator": "L4", "count": 2},
        )
        data = yaml.safe_load(scenario.read_text())
        # only the ITL median: decided at every level; 4 ms either side of d(4) = 18 and d(8) = 26 ms
        data["slo"] = {"itl_ms": {"p50": 22}, "max_error_rate": 0.05}
        scenario.write_text(yaml.safe_dump(data))
        result = loadtest("run", str(scenario), "--out", str(folder / "run"), "--peak-users", "36", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder / "run"


def test_cost_is_priced_on_goodput_at_capacity(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    cost = summary["cost"]
    assert summary["capacity"]["concurrency"] == 4
    assert cost["usd_per_hour"] == 3.0  # $1.50 per accelerator × 2
    level = next(lv for lv in summary["levels"] if lv["concurrency"] == 4)
    # every request at 4 users meets the SLO's per-request limits (no TTFT/e2e limit; ITL judged per level)
    assert cost["goodput_rps"] == pytest.approx(level["goodput_rps"], rel=1e-3)
    assert cost["usd_per_million_output_tokens"] == pytest.approx(3.0 / (cost["good_output_tokens_per_s"] * 3600) * 1e6)
    assert cost["usd_per_thousand_requests"] == pytest.approx(3.0 / (level["goodput_rps"] * 3600) * 1e3, rel=1e-3)
    assert cost["usd_per_million_tokens"] < cost["usd_per_million_output_tokens"]  # prompts add tokens
    # 32 tokens per request: the good output tokens follow the goodput
    assert cost["good_output_tokens_per_s"] == pytest.approx(32 * cost["goodput_rps"], rel=0.01)
    fc = cost["forecast"]
    # 36 users at 4 × (1 − 20%) = 3.2 per replica: 12 at the peak; 18 users: 6 replicas
    assert fc["peak_replicas"] == 12 and fc["replicas_by_hour"] == [12] * 12 + [6] * 12
    assert fc["monthly_usd_static"] == pytest.approx(12 * 24 * 3.0 * DAYS_PER_MONTH)
    assert fc["monthly_usd_autoscaled"] == pytest.approx((12 * 12 + 6 * 12) * 3.0 * DAYS_PER_MONTH)


def test_decode_fit_and_bounds_on_an_ordinary_run(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    fit = summary["decode_fit"]
    assert fit["fixed_ms"] == pytest.approx(10, rel=0.10)
    assert fit["per_seq_ms"] == pytest.approx(2, rel=0.10)
    assert fit["knee_sequences"] is None  # the default mock is one straight line
    # L4 × 2 declared, but no model size (the default mock tells none): the bound comes from the fit
    assert fit["basis"] == "fit"
    for level in summary["levels"]:
        assert level["bound"]["bound"] == "memory_or_overhead" and level["bound"]["basis"] == "fit"
        # The batch is the server's running count (p50 of the level's scrapes, one a second). A
        # closed-loop user between two requests, or a new request waiting for the next step's
        # admission (18 ms at 4 users), is not running: on a busy CI host two of a level's three
        # scrapes saw 3 running at 4 users. One user fewer than the level's is the truth's range.
        assert level["concurrency"] - 1 <= level["bound"]["sequences"] <= level["concurrency"]
    assert "no knee seen" in fit["sentence"]
    # what the roofline lacks is named: hardware is declared, the parameter count is not (a trial read
    # "declare hardware: and model: to tell which" with both sections declared)
    assert fit["roofline_missing"] == "model.params_b"
    assert json.loads((run_dir / "run.json").read_text())["model_meta"] is None  # the default mock tells none


def test_a_run_with_hardware_reads_the_model_size_the_server_tells(tmp_path):
    """llama.cpp's /v1/models meta (n_params, size) is read by run, not only by profile: run.json's
    model_meta was never written, so a roofline run lacked the model size the server tells."""
    roofline = ["--roofline-hbm-gbps", "1000", "--roofline-tflops", "16", "--roofline-params-b", "8",
                "--roofline-bytes-per-weight", "2", "--roofline-overhead-ms", "0.5"]
    with MockServer(roofline) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, load={"levels": [1, 2], "level_duration_s": 3, "warmup_s": 0.5},
                                  hardware={"hbm_gbps": 1000, "tflops": 16})
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    meta = json.loads((tmp_path / "run" / "run.json").read_text())["model_meta"]
    assert meta["n_params"] == 8e9 and meta["size"] == 16e9, meta
    fit = json.loads((tmp_path / "run" / "summary.json").read_text())["decode_fit"]
    assert fit is None or fit["roofline_missing"] is None, fit
    assert "declare hardware: and model:" not in result.stdout


def test_analyze_reprices_with_the_flag(run_dir):
    result = loadtest("analyze", str(run_dir), "--usd-per-hour", "6", "--peak-rps", "10")
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    cost = summary["cost"]
    assert cost["usd_per_hour"] == 6.0
    assert cost["forecast"]["unit"] == "rps"
    per = cost["goodput_rps"] * 0.8
    assert cost["forecast"]["peak_replicas"] == math.ceil(10 / per - 1e-9)
    page = (run_dir / "report.html").read_text()
    assert "id='cost'" in page and "id='why'" in page


def test_compare_gives_the_cost_change_in_every_format(run_dir, tmp_path):
    # the candidate: a cheaper step per sequence (d = 10 + 1.4c: 21.2 ms at 8 users, within the 25 ms SLO)
    scenario = run_dir.parent / "test.yaml"
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "1.4", "--prefill-per-token-ms", "0"]) as mock:
        result = loadtest("run", str(scenario), "--target", mock.base_url, "--out", str(tmp_path / "cand"),
                          "--peak-users", "36", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # the baseline was re-priced by the analyze test above: price it as the run was, per accelerator
    assert loadtest("analyze", str(run_dir), "--peak-users", "36").returncode == 0
    out = tmp_path / "cmp"
    out.mkdir()
    result = loadtest("compare", str(run_dir), str(tmp_path / "cand"), "--json", str(out / "c.json"),
                      "--markdown", str(out / "c.md"), "--junit", str(out / "c.xml"), "--html", str(out / "c.html"))
    assert result.returncode in (0, 6), result.stderr
    cost = json.loads((out / "c.json").read_text())["cost"]
    assert cost["capacity"] == {"baseline": 4, "candidate": 8}
    per_m = cost["usd_per_million_output_tokens"]
    assert per_m["candidate"] < per_m["baseline"]
    assert per_m["change"] == pytest.approx(per_m["candidate"] / per_m["baseline"] - 1)
    fc = cost["forecast"]
    # 36 users: 4 × 0.8 = 3.2 per replica -> 12; 8 × 0.8 = 6.4 -> 6
    assert fc["replicas"] == {"baseline": 12, "candidate": 6}
    sentence = cost["sentence"]
    assert sentence.startswith("capacity 4 → 8 users per replica: $/1M output tokens")
    assert "at 36 peak users 12 → 6 replicas" in sentence
    for name in ("c.md", "c.xml", "c.html"):
        assert "users per replica: $/1M output tokens" in (out / name).read_text(), name
    assert "cost: capacity 4 → 8" in result.stdout

"""Open-loop load (issue 15) end to end: ``loadtest run`` with rates against ``loadtest mock``.

The mock's request log (``--request-log``) is the ground truth: when each
request *arrived at the server* and when it ended, on the same host's
``perf_counter`` clock. What the client says it offered is held against what
the server received.

The mock used here: ``--max-batch 4 --decode-base-ms B --decode-per-seq-ms 0
--prefill-per-token-ms 0`` and 16-token replies. Each request holds one of the
4 slots for 16 decode steps of B ms (MODEL.md: a step lasts B + S × running, S = 0
here; a sequence gets one token per step), so the server completes at most

    λ* = slots / (tokens × step) = 4 / (16 × B / 1000)  requests per second

(10 req/s for B = 25; 8.33 req/s for B = 30). Below λ* constant arrivals always
find a free slot and TTFT is one or two steps; above it the queue grows by
(λ − λ*) requests every second for as long as the level lasts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from support.runkit import loadtest, summary, write_scenario

TOKENS = 16
SLOTS = 4


def throughput_rps(step_ms: float) -> float:
    """λ*: the mock's completion rate with every slot busy (see the module doc)."""
    return SLOTS / (TOKENS * step_ms / 1000.0)


def mock_flags(step_ms: float, log: Path) -> list[str]:
    return [
        "--max-batch", str(SLOTS), "--decode-base-ms", str(step_ms), "--decode-per-seq-ms", "0",
        "--prefill-per-token-ms", "0", "--request-log", str(log),
    ]


def ks_exponential_pvalue(samples: np.ndarray, mean: float) -> float:
    """One-sample Kolmogorov–Smirnov test against Exp(mean): the asymptotic p-value."""
    x = np.sort(samples)
    n = len(x)
    cdf = 1.0 - np.exp(-x / mean)
    d = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    lam = (np.sqrt(n) + 0.12 + 0.11 / np.sqrt(n)) * d
    k = np.arange(1, 101)
    return float(np.clip(2 * np.sum((-1) ** (k - 1) * np.exp(-2 * (k * lam) ** 2)), 0.0, 1.0))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (no ties expected in continuous times)."""
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def server_log(path: Path) -> dict[str, np.ndarray]:
    """The mock's arrivals and ends, as wall-clock seconds.

    Each line's own ``wall_offset`` (taken as the mock wrote it), not this host's offset now: a
    clean clone once measured 3.7 of 5 req/s received because the VM's wall clock had been
    stepped between the run and this conversion (paired with the client's sends, the offset of
    the run put every arrival in its window: 4.94 and 29.95 req/s).
    """
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    offset = np.array([line["wall_offset"] for line in lines])
    return {
        "arrival": np.array([line["arrival"] for line in lines]) + offset,
        "end": np.array([line["end"] for line in lines]) + offset,
    }


def run(tmp_path: Path, flags: list[str], *cli: str, **sections) -> tuple[dict, Path]:
    out = tmp_path / "run"
    with MockServer(flags) as mock:
        sections["load"] = {"levels": None, **sections["load"]}  # runkit's default is closed loop
        scenario = write_scenario(tmp_path, mock.base_url, **sections)
        result = loadtest("run", str(scenario), "--out", str(out), *cli, timeout=300)
    assert result.returncode == 0, result.stderr
    return summary(out), out


def window(level: dict) -> tuple[float, float]:
    return level["window"]["measured_from_wall"], level["window"]["end_wall"]


def test_below_throughput_the_rate_is_kept_and_at_3x_the_server_receives_the_offered_rate(tmp_path):
    """No coordinated omission: at 3 × λ* the mock receives 3 × λ*, though it completes only λ*."""
    step = 25.0
    top = throughput_rps(step)  # 10 req/s
    log = tmp_path / "requests.jsonl"
    s, out = run(
        tmp_path, mock_flags(step, log),
        "--rates", f"{top / 2:g},{3 * top:g}",
        workload={"max_tokens": TOKENS},
        load={"rates": [1], "arrival": "constant", "max_in_flight": 300, "level_duration_s": 5, "warmup_s": 1,
              "min_level_duration_s": 5, "max_level_duration_s": 5},
        slo={"ttft_ms": {"p95": 1000}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    levels = {lv["rate_rps"]: lv for lv in s["levels"]}
    assert sorted(levels) == [top / 2, 3 * top]
    truth = server_log(log)

    # Below throughput: what was sent and what the server received match the offered rate within 5%.
    below = levels[top / 2]
    lo, hi = window(below)
    received = np.sum((truth["arrival"] >= lo) & (truth["arrival"] < hi)) / (hi - lo)
    assert below["open_loop"]["sent_rps"] == pytest.approx(top / 2, rel=0.05)
    assert received == pytest.approx(top / 2, rel=0.05)
    assert below["open_loop"]["server_kept_up"] and below["status"] == "pass"

    # At 3 × throughput: the server receives arrivals at the offered rate, completes at λ*.
    over = levels[3 * top]
    lo, hi = window(over)
    received = np.sum((truth["arrival"] >= lo) & (truth["arrival"] < hi)) / (hi - lo)
    completed = np.sum((truth["end"] >= lo) & (truth["end"] < hi)) / (hi - lo)
    print(f"\noverload: offered {3 * top:g} req/s, received {received:.2f}, completed {completed:.2f} "
          f"(client: sent {over['open_loop']['sent_rps']:.2f}, completed {over['open_loop']['completed_rps']:.2f}); "
          f"throughput λ* = {top:g}")
    assert received == pytest.approx(3 * top, rel=0.05)
    assert completed == pytest.approx(top, rel=0.15)
    assert over["open_loop"]["dropped"] == 0
    assert not over["open_loop"]["server_kept_up"]
    assert over["status"] == "fail" and s["capacity"]["rate_rps"] == top / 2
    assert s["capacity"]["concurrency"] is None

    # TTFT from the scheduled time grows with the time in the level, as the server's queue does:
    # each second (3 λ* − λ*) = 2 λ* more requests wait, so a request's wait grows by ~2 s per s.
    frame = read_requests(out)
    mine = frame[(frame.level_index == over["index"]) & frame.ok & ~frame.warmup]
    t = mine.scheduled_wall.to_numpy() - over["window"]["start_wall"]
    ttft = mine.ttft_ms.to_numpy() + mine.schedule_lag_ms.to_numpy()
    rho = spearman(t, ttft)
    slope = np.polyfit(t, ttft, 1)[0]
    assert rho > 0.9, rho
    assert 1000 < slope < 3000, slope  # ms of TTFT per s in the level; the queue model says ~2000
    assert s["levels"][1]["ttft_ms"]["p50"] > 1000
    assert "the server could not keep up" in (out / "report.html").read_text()


def test_rate_capacity_with_refine_agrees_with_the_slot_model(tmp_path):
    """Capacity = λ* = 4 / (16 × 30 ms) = 8.33 req/s, found by --refine to within its resolution.

    Derivation: below λ* constant arrivals find a slot (TTFT ≈ one or two 30 ms steps, far
    under the 250 ms limit). Above it the backlog grows by (λ − λ*) per second, and a request
    arriving t seconds into the level waits (λ − λ*) t / λ* seconds: at 9 req/s (8% over),
    ~0.4 s by the end of a 5 s level, past the limit. So the first failing rate is above λ*
    and the highest passing one is at most a few percent over it (where the backlog of a 5 s
    level stays under 250 ms); bisection stops within --rate-resolution (0.75 req/s).
    """
    step = 30.0
    truth = throughput_rps(step)
    s, _ = run(
        tmp_path, mock_flags(step, tmp_path / "requests.jsonl"),
        "--refine", "--rate-resolution", "0.75",
        workload={"max_tokens": TOKENS},
        load={"rates": [3, 6, 12], "arrival": "constant", "max_in_flight": 200, "level_duration_s": 5,
              "warmup_s": 1, "max_level_duration_s": 10},
        slo={"ttft_ms": {"p95": 250}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    cap = s["capacity"]
    print(f"\ncapacity found {cap['rate_rps']} req/s (first failing {cap['first_failing_rate_rps']}); "
          f"derived λ* = {truth:.2f} req/s; mean in flight there {cap['mean_in_flight']}")
    assert cap["concurrency"] is None and cap["binding"] == "ttft_ms.p95"
    assert truth - 0.75 - 0.1 <= cap["rate_rps"] <= truth * 1.05, cap
    assert truth <= cap["first_failing_rate_rps"] <= truth + 0.75 + 0.1 or cap["first_failing_rate_rps"] > cap["rate_rps"]
    assert cap["first_failing_rate_rps"] - cap["rate_rps"] <= 0.75 + 1e-9
    probes = [lv["refine"] for lv in s["levels"]].count(True)
    assert probes >= 2
    # how refinement ended: the bracket as narrow as --rate-resolution asks, after its probes
    assert s["run"]["refine"]["ended"] == "closed" and s["run"]["refine"]["probes"] == probes, s["run"]["refine"]
    assert "(within the resolution of 0.75 req/s: --rate-resolution)" in s["run"]["refine"]["why"]
    # Little's law at capacity: in flight = rate × time in system (16 steps + first-token wait).
    assert cap["mean_in_flight"] == pytest.approx(cap["rate_rps"] * TOKENS * step / 1000, rel=0.25)


@pytest.mark.untimed  # the levels are undecided by their sample counts (2 s at 1 and 2 req/s), whatever the timing
def test_refine_with_nothing_to_bisect_says_why(tmp_path):
    """Trial E: ``--refine`` in open loop took no probe and said nothing (its lowest level was
    undecided, too few samples). One line now says why, and summary.json's ``run.refine`` keeps it."""
    out = tmp_path / "run"
    with MockServer(["--max-batch", "64", "--decode-base-ms", "2", "--decode-per-seq-ms", "0",
                     "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url, workload={"max_tokens": 4},
            load={"levels": None, "rates": [1, 2], "arrival": "constant", "max_in_flight": 16, "level_duration_s": 2,
                  "warmup_s": 0, "min_level_duration_s": 2, "max_level_duration_s": 2},
            slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.5},
        )
        result = loadtest("run", str(scenario), "--out", str(out), "--refine", timeout=300)
    assert result.returncode == 0, result.stderr
    s = summary(out)
    assert [lv["status"] for lv in s["levels"]] == ["uncertain", "uncertain"], s["levels"]
    assert not any(lv["refine"] for lv in s["levels"])
    refine = s["run"]["refine"]
    assert refine["ended"] == "undecided" and refine["probes"] == 0, refine
    assert refine["why"].startswith("nothing to bisect: the lowest level, 1 req/s, is uncertain (p95 TTFT is "), refine
    assert refine["why"].endswith("longer levels (load.max_level_duration_s) would decide it"), refine
    said = " ".join((result.stdout + result.stderr).split())  # one line, beside the live lines (rich may wrap it)
    assert f"refine: {refine['why']}" in said, result.stderr
    assert json.loads((out / "run.json").read_text())["refine"] == refine


def test_two_workers_offer_the_full_rate_as_one_poisson_stream(tmp_path):
    """Each worker draws rate/2 from its own seeded stream; the server sees Poisson at the full rate."""
    rate = 30.0
    log = tmp_path / "requests.jsonl"
    s, out = run(
        tmp_path, ["--max-batch", "256", "--decode-base-ms", "5", "--decode-per-seq-ms", "0",
                   "--prefill-per-token-ms", "0", "--request-log", str(log)],
        "--workers", "2",
        workload={"max_tokens": 8},
        load={"rates": [rate], "arrival": "poisson", "max_in_flight": 64, "level_duration_s": 8, "warmup_s": 1,
              "min_level_duration_s": 8, "max_level_duration_s": 8},
        slo={"ttft_ms": {"p95": 1000}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    level = s["levels"][0]
    lo, hi = window(level)
    arrivals = server_log(log)["arrival"]
    arrivals = np.sort(arrivals[(arrivals >= lo) & (arrivals < hi)])
    n = len(arrivals)
    # The count of a Poisson process over T seconds has mean and variance λT: within 4 sd.
    assert abs(n - rate * (hi - lo)) < 4 * np.sqrt(rate * (hi - lo)), (n, rate * (hi - lo))
    gaps = np.diff(arrivals)
    # Gaps are exponential at the *full* rate (two rate/2 streams merged, not one stream).
    assert ks_exponential_pvalue(gaps, 1 / rate) > 0.001
    assert ks_exponential_pvalue(gaps, 2 / rate) < 0.001
    frame = read_requests(out)
    sent = frame[(frame.level_index == level["index"]) & ~frame.warmup]
    per_worker = sent.groupby("worker").size()
    assert len(per_worker) == 2 and per_worker.min() > 0.3 * len(sent), per_worker


@pytest.mark.untimed  # asserts on the schedule drawn in advance (scheduled_wall), never on when requests went out
def test_two_workers_merge_constant_arrivals_into_the_one_process_schedule(tmp_path):
    """Constant arrivals with --workers 2 are 1/rate apart over both workers, as in one process.

    Each worker used to draw rate/2 with its own random phase: at 4 req/s the merged arrivals came
    in near-pairs (gaps of 20.5 / 479.5 ms instead of 250). Now every worker deals out the one
    schedule. A worker's last arrivals may be cut by the level change a few ms before the other's,
    so the check stops at the earlier of the two workers' last scheduled times.
    """
    rates = [4.0, 8.0]
    _, out = run(
        tmp_path, ["--max-batch", "64", "--decode-base-ms", "5", "--decode-per-seq-ms", "0",
                   "--prefill-per-token-ms", "0"],
        "--workers", "2",
        workload={"max_tokens": 4},
        load={"rates": rates, "arrival": "constant", "max_in_flight": 32, "level_duration_s": 3, "warmup_s": 0.5,
              "min_level_duration_s": 3, "max_level_duration_s": 3},
        slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.5},
    )
    frame = read_requests(out)
    for index, rate in enumerate(rates):
        level = frame[frame.level_index == index]
        last = level.groupby("worker").scheduled_wall.max()
        assert len(last) == 2, level.worker.value_counts()
        times = np.sort(level.scheduled_wall[level.scheduled_wall <= last.min()].to_numpy())
        assert len(times) >= 2 * rate, (rate, len(times))
        gaps_ms = np.diff(times) * 1000.0
        assert np.abs(gaps_ms - 1000.0 / rate).max() < 1.0, (rate, gaps_ms.round(1).tolist())


def test_arrivals_beyond_max_in_flight_are_dropped_failures(tmp_path):
    """3 requests may be in flight; at 20 req/s on an 8 req/s server the rest fail as 'dropped'.

    Two request classes: a dropped arrival is drawn a class by their weights as a sent one is, so it
    counts against its class's error budget (a trial's two-class run recorded drops with no class,
    which became a class "nan" and a traceback in the terminal's class table)."""
    s, out = run(
        tmp_path, mock_flags(30.0, tmp_path / "requests.jsonl"),
        workload={"max_tokens": TOKENS, "classes": [{"name": "chat", "weight": 3}, {"name": "batch", "weight": 1}]},
        load={"rates": [20], "arrival": "constant", "max_in_flight": 3, "level_duration_s": 3, "warmup_s": 0.5,
              "min_level_duration_s": 3, "max_level_duration_s": 3},
        slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    level = s["levels"][0]
    loop = level["open_loop"]
    assert loop["dropped"] > 0 and level["errors_by_kind"].get("dropped") == loop["dropped"]
    assert loop["offered_rps"] == pytest.approx(20, rel=0.1)
    assert loop["sent_rps"] < 0.8 * loop["offered_rps"]
    checks = {c["name"]: c["verdict"] for c in level["checks"]}
    assert level["status"] == "fail" and checks["error_rate"] == "fail"  # drops count against the budget
    frame = read_requests(out)
    dropped = frame[frame.error_kind == "dropped"]
    assert dropped.schedule_lag_ms.isna().all() and dropped.scheduled_wall.notna().all()
    assert set(dropped["class"]) == {"chat", "batch"}, dropped["class"].value_counts(dropna=False)
    assert set(s["capacity"]["classes"]) == {"chat", "batch"}
    by_class = {name: lv["errors"] for name, lv in level["classes"].items()}
    assert set(by_class) == {"chat", "batch"} and sum(by_class.values()) == level["errors"], by_class


def test_a_window_shorter_than_two_request_lives_does_not_flag_a_server_that_keeps_up(tmp_path):
    """A trial: 8 req/s to a server at a third of its capacity, a 2.5 s window after a 1 s warm-up,
    1.7 s requests: 'done' read 6.2 of 8.6 sends and the '!' said the server could not keep up. Here
    64 slots of 96 tokens at 18 ms a step (1.73 s a request, 37 req/s at most): 8 req/s is kept up, and
    the level must not say otherwise (whether the window was long enough to tell, or says it was not)."""
    s, out = run(
        tmp_path, ["--max-batch", "64", "--decode-base-ms", "18", "--decode-per-seq-ms", "0",
                   "--prefill-per-token-ms", "0", "--request-log", str(tmp_path / "requests.jsonl")],
        workload={"max_tokens": 96},
        load={"rates": [8], "arrival": "constant", "max_in_flight": 100, "level_duration_s": 3.5, "warmup_s": 1,
              "min_level_duration_s": 3.5, "max_level_duration_s": 3.5},
        slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    loop = s["levels"][0]["open_loop"]
    print(f"\nsent {loop['sent_rps']:.2f} completed {loop['completed_rps']:.2f} told {loop.get('keep_up_told')} "
          f"over {loop.get('completed_span_s')} s, {loop.get('completed_shift_s')} s after the window")
    assert loop["server_kept_up"], loop
    if loop.get("keep_up_told"):
        assert loop["completed_rps"] == pytest.approx(8.0, rel=0.15), loop
    assert s["levels"][0]["status"] == "pass"

"""Trace replay (issue 28) end to end: ``loadtest trace synth``, then ``loadtest run`` with speedups against ``loadtest mock``.

The mock's request log is the ground truth: when each request arrived at the
server (``perf_counter`` on this host, the client's clock) and the prompt it
carried. Held against the trace file:

* arrival times: the k-th arrival of a level at (trace offset_k / speedup)
  after the level's start, its lag from that schedule small (p99 within a few
  ms; the bound follows from the mock being idle enough to answer at once);
* lengths: each request's prompt tokens (the mock's usage: words) and its
  completion tokens (``ignore_eos``) are its row's;
* prefixes: two requests whose rows share their first ``k`` hash blocks share
  exactly ``k × block_tokens`` prompt words, and nothing more;
* prefix-cache hits: the mock's cache (``--prefix-cache-blocks``, large enough
  never to evict) serves a request's leading full blocks that an earlier request
  of the same replay sent; the cached tokens each level reports match that
  count replayed over the trace, and the server's counters agree with the
  responses.

The capacity test: a mock that completes at most λ* = slots / (tokens × step)
requests per second (test_open_loop.py derives it) and a trace whose mean rate
is known; the speedup found is λ* / mean rate, within --refine's resolution.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from loadtest.load.trace_replay import replay_offsets
from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from loadtest.workload.trace import read_trace
from support.runkit import loadtest, summary, write_scenario

BLOCK = 16


def synth(path: Path, *args: str) -> Path:
    result = loadtest("trace", "synth", str(path), *args, timeout=60)
    assert result.returncode == 0, result.stderr
    return path


def run(tmp_path: Path, flags: list[str], *cli: str, **sections) -> tuple[dict, Path]:
    out = tmp_path / "run"
    with MockServer(flags) as mock:
        sections["load"] = {"levels": None, **sections["load"]}
        scenario = write_scenario(tmp_path, mock.base_url, **sections)
        result = loadtest("run", str(scenario), "--out", str(out), *cli, timeout=300)
    assert result.returncode == 0, result.stderr
    return summary(out), out


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """One run with two workers: a 40 req/s mooncake trace with shared prefixes, at 1× and 2×, against a roomy mock."""
    tmp = tmp_path_factory.mktemp("replay")
    trace = synth(tmp / "t.jsonl", "--rate", "40", "--duration-s", "6", "--input-mean", "56", "--input-stddev", "12",
                  "--output-mean", "6", "--output-stddev", "2", "--prefix-groups", "3", "--prefix-blocks", "2",
                  "--prefix-share", "0.7", "--block-tokens", str(BLOCK), "--seed", "3")
    log = tmp / "requests.jsonl"
    s, out = run(
        tmp, ["--max-batch", "256", "--decode-base-ms", "4", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0",
              "--request-log", str(log), "--prefix-cache-blocks", "100000", "--prefix-cache-block-tokens", str(BLOCK)],
        "--workers", "2",  # each worker sends every other arrival: the merged schedule must still be the trace's
        workload={"trace": {"path": str(trace), "format": "mooncake", "block_tokens": BLOCK}},
        target={"metrics": {"interval_s": 0.5}},
        load={"speedups": [1, 2], "max_in_flight": 64, "level_duration_s": 4, "warmup_s": 1,
              "min_level_duration_s": 4, "max_level_duration_s": 4},
        slo={"ttft_ms": {"p95": 2000}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {"summary": s, "out": out, "trace": read_trace(str(trace), "mooncake", block_tokens=BLOCK), "log": lines}


def matched(schedule: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each of ``times``, the index of the nearest entry of the sorted ``schedule``."""
    right = np.clip(np.searchsorted(schedule, times), 1, len(schedule) - 1)
    return np.where(np.abs(schedule[right - 1] - times) < np.abs(schedule[right] - times), right - 1, right)


def test_arrivals_follow_the_trace_over_the_speedup(replay):
    s, trace = replay["summary"], replay["trace"]
    frame = read_requests(replay["out"])
    # each line's own offset, taken as the mock wrote it (the wall clock may be stepped since)
    arrivals = np.array([line["arrival"] + line["wall_offset"] for line in replay["log"]])
    assert [lv["speedup"] for lv in s["levels"]] == [1.0, 2.0]
    for lv in s["levels"]:
        mine = frame[frame.level_index == lv["index"]].sort_values("scheduled_wall")
        start = lv["window"]["start_wall"]
        scheduled = mine.scheduled_wall.to_numpy() - start
        n = len(scheduled)
        schedule = np.array(replay_offsets(trace, lv["speedup"], 3600.0, 0)[0])
        # the schedule the two workers kept, merged, is the trace's, to float precision: every due time is
        # one of the trace's over the speedup, none twice, and none skipped before the last (a worker may
        # stop a few ms before the other at the level's end)
        nearest = matched(schedule, scheduled)
        assert np.all(np.abs(schedule[nearest] - scheduled) < 1e-6)
        sent = Counter(np.rint(scheduled * 1e6).astype(int))  # rows due at the same time: a multiset
        due = Counter(np.rint(schedule[: int(nearest.max()) + 1] * 1e6).astype(int))
        assert not sent - due and sum((due - sent).values()) <= 2
        expected = schedule[nearest]
        shares = mine.worker.value_counts().to_numpy()
        assert len(shares) == 2 and abs(int(shares[0]) - int(shares[1])) <= 3
        # and the server received each request at its scheduled time: a few ms of lag at most
        # (paired in time order; the level's last requests may still be in flight when the run stops)
        # the level's own requests: each prompt's first word names its salt scope, level and repetition
        tag = f".L{lv['index']}.R"
        level_arrivals = np.array([t for t, line in zip(arrivals, replay["log"]) if tag in line["prompt"].split(" ", 1)[0]])
        seen = np.sort(level_arrivals)[:n]
        m = len(seen)
        assert m >= n - 10
        expected, client_lag = expected[:m], mine.schedule_lag_ms.to_numpy()[:m]
        lag_ms = (seen - (start + expected)) * 1000.0
        # the server's lag is the client's own send lag (measured, and flagged when late) plus the
        # transport to the mock's parser: that part must be small whatever the host's load
        # measured over the level's window (after warmup_s: users open their connections in the first second)
        measured = expected >= 1.0
        transport_ms = (lag_ms - client_lag)[measured]
        lag_ms = lag_ms[measured]
        p99 = float(np.percentile(lag_ms, 99))
        print(f"\n{lv['speedup']:g}x: {n} arrivals, server-side lag from the trace time p50 {np.median(lag_ms):.2f} ms, "
              f"p99 {p99:.2f} ms; client send lag p99 {lv['open_loop']['schedule_lag_ms']['p99']} ms; "
              f"transport p99 {np.percentile(transport_ms, 99):.2f} ms")
        assert lv["open_loop"]["dropped"] == 0
        assert np.median(lag_ms) < (5.0 if not lv["host_contended"] else 25.0)
        # Loopback plus the mock's parse is well under a millisecond on an idle host, so the typical
        # request reaches the server when the client says it sent it. The tail is not asserted: on a
        # shared 2-core host the mock's own event loop waits for a core now and then (100+ ms seen here
        # with other jobs running), which says nothing of the schedule. benchmarks/bench_trace_replay.py
        # measures the p99 per speedup.
        assert float(np.median(transport_ms)) < 5.0


def test_each_request_has_its_rows_lengths(replay):
    trace = replay["trace"]
    frame = read_requests(replay["out"])
    frame = frame[frame.level_index >= 0].sort_values("scheduled_wall")
    by_level = frame.groupby("level_index")
    for _, mine in by_level:
        # rows due in the same millisecond may go out in either order: compare (due, lengths) as multisets
        speedup = float(mine.rate_rps.iloc[0]) / trace.mean_rate_rps
        due = np.rint((mine.scheduled_wall.to_numpy() - mine.scheduled_wall.min()) * speedup * 1000).astype(int)
        ok = mine.ok.to_numpy()
        offsets, arrivals = replay_offsets(trace, 1.0, 3600.0, 0)  # the merged schedule at 1×, repetitions included
        last = int(matched(np.array(offsets), due / 1000.0).max())
        schedule = list(zip(offsets, arrivals))[: last + 1]
        got = Counter(zip(due, mine.prompt_tokens.astype(int)))  # a failure's prompt: the row's length
        want = Counter((int(round(t * 1000)), trace.rows[a.row].input_tokens) for t, a in schedule)
        assert not got - want and sum((want - got).values()) <= 2  # a worker may stop a few ms early
        # the output lengths of the successes (a request cut at the run's end has none) are their rows'
        done = Counter(zip(due[ok], mine.completion_tokens.to_numpy()[ok].astype(int)))
        outputs = Counter((int(round(t * 1000)), trace.rows[a.row].output_tokens) for t, a in schedule)
        assert ok.mean() > 0.97 and not done - outputs


def test_shared_blocks_share_exactly_their_tokens(replay):
    """Within a level's replay, common prompt prefix = shared leading blocks × BLOCK words; across levels, nothing."""
    trace = replay["trace"]
    known = {r.hash_ids[: -(-r.input_tokens // BLOCK)] for r in trace.rows}
    by_level: dict[str, list[tuple[list[str], tuple[int, ...]]]] = {}
    for line in replay["log"]:
        words = line["prompt"].split()
        if not words or "-b" not in words[0]:
            continue  # the preflight's and warm-up requests
        scope = words[0].rsplit("-b", 1)[0]
        heads = words[::BLOCK]
        ids = tuple(int(w.rsplit("-b", 1)[1]) for w in heads if w.startswith(scope + "-b"))
        assert ids in known  # the blocks named in the prompt are a row's hash_ids
        by_level.setdefault(scope, []).append((words, ids))
    # one salt scope per level and repetition of the window: 1× runs 4 s of the 6 s window, 2× 8 s (two)
    assert sorted(scope.split(".", 1)[1] for scope in by_level) == ["L0.R0", "L1.R0", "L1.R1"]
    checked = shared = 0
    for prompts in by_level.values():
        for (a, ia), (b, ib) in zip(prompts[:-1][:80], prompts[1:][:80]):
            blocks = 0
            while blocks < min(len(ia), len(ib)) and ia[blocks] == ib[blocks]:
                blocks += 1
            want = min(blocks * BLOCK, len(a), len(b))
            common = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            assert common == want, (blocks, common)
            checked += 1
            shared += want > 0
    assert checked >= 100 and shared >= 20
    # one level shares no first word with the other: its cache starts cold
    first = [{p[0] for p, _ in prompts} for prompts in by_level.values()]
    assert not first[0] & first[1] and not first[1] & first[2] and not first[0] & first[2]


def test_capacity_speedup_matches_the_mocks_throughput(tmp_path):
    """λ* = 4 / (16 × 25 ms) = 10 req/s; the trace's mean rate is ~4 req/s: capacity ≈ λ* / mean ≈ 2.5×.

    Below λ* arrivals find a slot (TTFT a step or two); above it the backlog grows by (λ − λ*)
    per second and TTFT passes the 250 ms limit within a 5 s level (test_open_loop.py's
    derivation). --refine bisects the speedup to within 5% of the failing one.
    """
    trace = synth(tmp_path / "t.csv", "--format", "burstgpt", "--rate", "4", "--duration-s", "60",
                  "--burstiness", "50", "--input-mean", "32", "--output-mean", "16", "--seed", "1")
    mean = read_trace(str(trace), "burstgpt").mean_rate_rps
    truth = 10.0 / mean
    s, _ = run(
        tmp_path, ["--max-batch", "4", "--decode-base-ms", "25", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"],
        "--refine",
        workload={"trace": {"path": str(trace), "format": "burstgpt"}},
        load={"speedups": [1, 2, 4], "max_in_flight": 200, "level_duration_s": 5, "warmup_s": 1, "max_level_duration_s": 10},
        slo={"ttft_ms": {"p95": 250}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    cap = s["capacity"]
    print(f"\ncapacity found {cap['speedup']}x (first failing {cap['first_failing_speedup']}x) of a {mean:.3f} req/s window; "
          f"truth λ*/mean = {truth:.3f}x; {cap['message']}")
    # host_contended: the run flags a level where other jobs held the cores (a shared CI host); the figure stands
    assert cap["binding"] == "ttft_ms.p95" and cap["verdict"] in ("found", "host_contended")
    assert truth * 0.85 <= cap["speedup"] <= truth * 1.08, cap
    assert cap["first_failing_speedup"] - cap["speedup"] <= 0.05 * cap["first_failing_speedup"] + 1e-3
    if cap["verdict"] == "found":
        assert cap["message"].startswith(f"This endpoint holds {cap['speedup']:g}× the traffic of the trace window within the SLOs; at ")
    else:
        assert f"the endpoint holds {cap['speedup']:g}× the traffic of the trace window" in cap["message"]


def expected_cached(trace, arrivals) -> list[tuple[int, int]]:
    """(cached, prompt) tokens per arrival of a replay: its leading full blocks an earlier arrival of the same scope sent."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for a in arrivals:
        row = trace.rows[a.row]
        full = row.input_tokens // BLOCK
        keys = [row.hash_ids[: i + 1] for i in range(min(full, len(row.hash_ids)))]
        hit = 0
        while hit < len(keys) and (a.rep, keys[hit]) in seen:
            hit += 1
        out.append((hit * BLOCK, row.input_tokens))
        seen.update((a.rep, k) for k in keys)
    return out


def test_prefix_cache_hits_per_level_match_the_trace(replay):
    s, trace = replay["summary"], replay["trace"]
    frame = read_requests(replay["out"])
    for lv in s["levels"]:
        mine = frame[frame.level_index == lv["index"]]
        offsets, arrivals = replay_offsets(trace, lv["speedup"], 3600.0, lv["index"])
        last = int(matched(np.array(offsets), mine.scheduled_wall.to_numpy() - lv["window"]["start_wall"]).max())
        per_arrival = expected_cached(trace, arrivals[: last + 1])
        got_cached, want_cached = int(mine.cached_tokens.sum()), sum(c for c, _ in per_arrival)
        # rows due in the same millisecond may swap which of two hits, and a worker may stop a few ms
        # before the other (an arrival or two unsent): a few blocks either way
        assert abs(got_cached - want_cached) <= 6 * BLOCK, (got_cached, want_cached)
        cache = lv["prefix_cache"]
        # the level's figure covers its measured window: arrivals from warmup_s (1 s) to the window's end
        end = lv["window"]["end_wall"] - lv["window"]["start_wall"]
        measured = [cp for t, cp in zip(offsets, per_arrival) if 1.0 <= t < end]
        truth = sum(c for c, _ in measured) / sum(p for _, p in measured)
        print(f"\n{lv['speedup']:g}x: prefix-cache hit rate {cache['hit_rate']:.3f} ({cache['source']}); responses "
              f"{cache['responses']['hit_rate']:.3f}; the trace replayed through the cache model {truth:.3f}")
        assert cache["responses"]["hit_rate"] == pytest.approx(truth, abs=0.03)
        if cache["source"] == "server":  # scrapes every 0.5 s: the counters' window is the level's to a scrape
            assert cache["server"]["hit_rate"] == pytest.approx(cache["responses"]["hit_rate"], abs=0.08)
    assert any(lv["prefix_cache"]["source"] == "server" for lv in s["levels"])

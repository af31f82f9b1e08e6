"""Traces without a server: the three readers, their errors, the window, synth, prompts from hash_ids, the replay schedule.

What reaches a real server (arrival times, lengths, shared prefix tokens, the
capacity as a speedup) is checked end to end in tests/e2e/test_trace_replay.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loadtest.analysis import SloSpec, analyze
from loadtest.errors import InputError
from loadtest.load.modes import TraceReplay, load_mode
from loadtest.load.trace_replay import replay_offsets
from loadtest.scenario import parse_scenario
from loadtest.workload import Workload
from loadtest.workload.trace import TraceArrival, TraceRow, read_trace
from loadtest.workload.trace_prompt import trace_prompt
from loadtest.workload.trace_synth import SynthSpec, synth_rows, write_trace
from support.synthetic import closed_loop_rows, level_plan, request_row, run_dict, to_frame

ROWS = [(0.0, 10, 3, [1, 2]), (0.5, 12, 4, [1, 3]), (1.25, 7, 2, [])]


def write(tmp_path: Path, fmt: str, rows=ROWS, name: str | None = None) -> Path:
    path = tmp_path / (name or f"t.{fmt}")
    if fmt == "mooncake":
        path.write_text("".join(json.dumps({"timestamp": int(t * 1000), "input_length": i, "output_length": o, "hash_ids": h}) + "\n" for t, i, o, h in rows))
    elif fmt == "azure":
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
            f"2023-11-16 18:15:{46 + t:09.6f}0,{i},{o}\n" for t, i, o, _ in rows))
    else:
        path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + "".join(
            f"{t},ChatGPT,{i},{o},{i + o},Conversation log\n" for t, i, o, _ in rows))
    return path


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "burstgpt"])
def test_each_format_reads_times_from_the_first_row_and_the_lengths(tmp_path, fmt):
    trace = read_trace(str(write(tmp_path, fmt)), fmt)
    assert [r.t_s for r in trace.rows] == pytest.approx([0.0, 0.5, 1.25], abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in trace.rows] == [(10, 3), (12, 4), (7, 2)]
    assert trace.rows[1].hash_ids == ((1, 3) if fmt == "mooncake" else ())
    # no window: the rows' span holds n gaps (1.25 s for 2 gaps → 3 × 0.625), so a repeat keeps the mean gap
    assert trace.period_s == pytest.approx(1.875)
    assert trace.mean_rate_rps == pytest.approx(3 / 1.875)
    assert len(trace.sha256) == 64


@pytest.mark.parametrize(
    "fmt, content, expected",
    [
        ("mooncake", "", "the trace is empty"),
        ("mooncake", '{"timestamp": 0, "input_length": 3, "output_length": 1}\nnot json\n', "line 2: not valid JSON"),
        # the parser's position is within the line: not "line 2 column 1" of a one-line buffer
        ("mooncake", '{"timestamp": 0, "input_length": 3,\n', "line 1: not valid JSON (unexpected end of data at column 36)"),
        ("mooncake", '{"timestamp": 0, "input_length": 3}\n', "line 1: missing 'output_length'"),
        ("mooncake", '{"timestamp": 0, "input_length": -3, "output_length": 1}\n', "line 1: 'input_length' must be a non-negative integer"),
        ("mooncake", '{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": "x"}\n', "line 1: 'hash_ids' must be a list"),
        ("azure", "", "the trace is empty"),
        ("azure", "TIMESTAMP,Context\n1,2\n", "line 1: the azure header needs TIMESTAMP, ContextTokens, GeneratedTokens; missing ContextTokens, GeneratedTokens"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n", "line 2: 'TIMESTAMP' is neither seconds nor a date-time"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n1,m,2\n", "line 2: 3 columns, the header has 4"),
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n1,m,2,x\n", "line 2: 'Response tokens' must be a non-negative integer"),
        # a length no model takes: its prompt was built mid-run, and 1e12 words raised MemoryError there
        ("mooncake", '{"timestamp": 0, "input_length": 1000000000000, "output_length": 1}\n',
         "line 1: 'input_length' is 1000000000000 tokens; a trace row may ask for at most 10,000,000"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,3,4\n2,3,10000001\n",
         "line 3: 'GeneratedTokens' is '10000001' tokens; a trace row may ask for at most 10,000,000"),
        # an infinite CSV length was an OverflowError traceback
        ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n1,m,inf,3\n", "line 2: 'Request tokens' is 'inf' tokens"),
    ],
)
def test_bad_files_are_one_line_naming_the_file_and_line(tmp_path, fmt, content, expected):
    path = tmp_path / "bad"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        read_trace(str(path), fmt)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_unsorted_timestamps_are_an_error_unless_sort_is_asked(tmp_path):
    rows = [(0.0, 5, 1, []), (2.0, 6, 1, []), (1.0, 7, 1, []), (3.0, 8, 1, [])]
    path = str(write(tmp_path, "burstgpt", rows))
    with pytest.raises(InputError, match=r"line 4: timestamp goes backwards \(earlier than line 3\).*sort: true"):
        read_trace(path, "burstgpt")
    trace = read_trace(path, "burstgpt", sort=True)
    assert [r.input_tokens for r in trace.rows] == [5, 7, 6, 8] and trace.sorted_rows
    assert trace.fingerprint()["sorted"] is True


def test_sort_takes_times_from_the_earliest_row_not_the_first(tmp_path):
    """Rows earlier than the file's first row are the window's start once sorted, not dropped.

    Times were taken from the first row, so with ``sort: true`` the rows dated
    before it had negative offsets and fell out of the window without a word
    (``skipped`` 0): 3 of these 6 rows were replayed.
    """
    rows = [(5.0, 5, 1, []), (1.0, 1, 1, []), (2.0, 2, 1, []), (3.0, 3, 1, []), (6.0, 6, 1, []), (7.0, 7, 1, [])]
    path = str(write(tmp_path, "mooncake", rows))
    trace = read_trace(path, "mooncake", sort=True)
    assert [r.input_tokens for r in trace.rows] == [1, 2, 3, 5, 6, 7] and trace.skipped == 0
    assert trace.offsets_s == pytest.approx([0.0, 1.0, 2.0, 4.0, 5.0, 6.0])
    assert [r.line for r in trace.rows] == [2, 3, 4, 1, 5, 6] and trace.sorted_rows
    # a window is seconds from the earliest row too: [1 s, 4.5 s) holds the rows at 2, 3 and 5 s
    window = read_trace(path, "mooncake", sort=True, start_s=1.0, duration_s=3.5)
    assert [r.input_tokens for r in window.rows] == [2, 3, 5] and window.period_s == 3.5
    assert window.offsets_s == pytest.approx([0.0, 1.0, 3.0])


AZURE_ACROSS_DST = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-03-12 01:59:50.0000000,10,5
2023-03-12 01:59:59.0000000,10,5
2023-03-12 03:00:01.0000000,10,5
2023-03-12 03:00:05.6805900,10,5
"""


@pytest.mark.parametrize("tz", ["UTC", "EST5EDT,M3.2.0,M11.1.0"])  # New York's rules, as POSIX spells them (no tzdata)
def test_azure_stamps_without_a_zone_are_utc_whatever_the_hosts_zone(tmp_path, tz):
    """Read in the host's zone, 2023-03-12 02:00 does not exist in New York: the hour vanished there
    (offsets 0, 9, 11, 15.68 s) and not on a UTC host (0, 9, 3611, 3615.68 s): one file, two replays."""
    path = tmp_path / "az.csv"
    path.write_text(AZURE_ACROSS_DST)
    code = ("import sys; from loadtest.workload.trace import read_trace; "
            "print(*read_trace(sys.argv[1], 'azure').offsets_s)")
    env = {**os.environ, "TZ": tz}
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, check=True)
    assert [float(x) for x in out.stdout.split()] == pytest.approx([0.0, 9.0, 3611.0, 3615.68059])


def test_azure_stamps_with_an_offset_keep_it_past_a_long_fraction(tmp_path):
    """``…46.6805900+02:00``: the digits past microseconds are cut, the offset is not."""
    path = tmp_path / "az.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900+02:00,10,5\n"
                    "2023-11-16 17:15:47.6805900+01:00,10,5\n2023-11-16T16:15:49Z,10,5\n")
    assert read_trace(str(path), "azure").offsets_s == pytest.approx([0.0, 1.0, 2.31941])


def test_window_max_requests_and_zero_lengths(tmp_path):
    rows = [(t * 0.5, 10, 0 if t == 3 else 2, []) for t in range(20)]  # one failed row (0 output), as in BurstGPT
    path = str(write(tmp_path, "burstgpt", rows))
    trace = read_trace(path, "burstgpt", start_s=1.0, duration_s=2.0)  # t in [1, 3): 1, 1.5 (skipped), 2, 2.5
    assert [r.t_s for r in trace.rows] == [1.0, 2.0, 2.5] and trace.skipped == 1
    assert trace.offsets_s == [0.0, 1.0, 1.5] and trace.period_s == 2.0
    capped = read_trace(path, "burstgpt", start_s=1.0, duration_s=5.0, max_requests=2)
    assert len(capped.rows) == 2 and capped.period_s == pytest.approx(1.0 * 2)  # span 1 s, 2 gaps
    # the file ends inside the window (rows at 8 … 9.5 s): the window is as long as its rows, plus one mean gap
    tail = read_trace(path, "burstgpt", start_s=8.0, duration_s=10.0)
    assert len(tail.rows) == 4 and tail.period_s == pytest.approx(2.0)
    with pytest.raises(InputError, match="1 usable request"):
        read_trace(path, "burstgpt", start_s=9.5)


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "burstgpt"])
def test_synth_writes_each_format_at_its_rate_with_its_prefix_structure(tmp_path, fmt):
    spec = SynthSpec(rate_rps=40, duration_s=50, burstiness=0.5, input_mean=100, input_stddev=20, output_mean=20,
                     prefix_groups=3, prefix_blocks=2, prefix_share=0.5, block_tokens=16, seed=7)
    rows = synth_rows(spec)
    assert rows == synth_rows(spec)  # the seed fixes the file
    path = tmp_path / f"s.{fmt}"
    write_trace(path, fmt, rows)
    trace = read_trace(str(path), fmt)
    assert len(trace.rows) == len(rows)
    assert 2000 * 0.85 < len(rows) < 2000 * 1.15  # 40 req/s × 50 s (bursty gaps: sd ≈ sqrt(n / shape))
    assert [r.input_tokens for r in trace.rows] == [r.input_tokens for r in rows]
    if fmt == "mooncake":
        firsts = [r.hash_ids[:2] for r in trace.rows if r.input_tokens > 32]
        shared = [h for h in firsts if h in {(0, 1), (2, 3), (4, 5)}]
        assert 0.4 < len(shared) / len(firsts) < 0.6  # prefix_share 0.5
        own = [i for r in trace.rows for i in r.hash_ids if i >= 6]
        assert len(own) == len(set(own))  # a request's own blocks are nobody else's


def test_prompts_share_exactly_the_named_blocks_and_differ_after_them():
    a = TraceRow(0, 40, 1, (1, 2, 3))
    b = TraceRow(0, 40, 1, (1, 2, 4))
    c = TraceRow(0, 20, 1, ())
    pa, pb = trace_prompt(a, "0", 16, "salt"), trace_prompt(b, "1", 16, "salt")
    wa, wb = pa.split(), pb.split()
    assert len(wa) == len(wb) == 40
    common = next(i for i, (x, y) in enumerate(zip(wa, wb)) if x != y)
    assert common == 32  # two 16-token blocks, and not one word more
    assert trace_prompt(a, "0", 16, "salt") == pa  # the same row and scope: the same prompt
    other_run = trace_prompt(a, "0", 16, "other").split()
    assert other_run[0] != wa[0]  # another run (or level, or repetition) shares nothing from the first word
    assert len(trace_prompt(c, "2", 16, "salt").split()) == 20


def test_replay_schedule_is_the_trace_over_the_speedup_and_workers_split_it_without_changing_it(tmp_path):
    trace = read_trace(str(write(tmp_path, "mooncake")), "mooncake")  # offsets 0, 0.5, 1.25; period 1.875
    offsets, arrivals = replay_offsets(trace, 2.0, 2.0, level=3)
    # the window repeats to fill 2 s at 2×: (r × 1.875 + offset) / 2, below 2 s
    assert offsets == pytest.approx([0.0, 0.25, 0.625, 0.9375, 1.1875, 1.5625, 1.875])
    assert [(a.row, a.rep, a.level) for a in arrivals] == [(0, 0, 3), (1, 0, 3), (2, 0, 3), (0, 1, 3), (1, 1, 3), (2, 1, 3), (0, 2, 3)]
    parts = [replay_offsets(trace, 2.0, 2.0, 3, streams=4, stream=k) for k in range(4)]
    merged = sorted((t, a.row, a.rep) for o, arr in parts for t, a in zip(o, arr))
    assert merged == sorted((t, a.row, a.rep) for t, a in zip(offsets, arrivals))
    assert max(len(o) for o, _ in parts) - min(len(o) for o, _ in parts) <= 1


def scenario_with_trace(path: Path, **load):
    return parse_scenario({
        "name": "t",
        "workload": {"trace": {"path": str(path), "format": "mooncake", "block_tokens": 4}},
        "load": {"speedups": [0.5, 1, 2], **load},
    })


def test_the_mode_runs_speedups_as_rates_and_refines_on_the_speedup(tmp_path):
    s = scenario_with_trace(write(tmp_path, "mooncake"))
    mode = load_mode(s)
    assert isinstance(mode, TraceReplay) and mode.name == "trace_replay"
    mean = 3 / 1.875
    assert mode.levels() == pytest.approx([0.5 * mean, mean, 2 * mean])
    assert "speedups 0.5×, 1×, 2×" in mode.describe()

    class R:
        def __init__(self, rate, passed):
            self.rate_rps, self.passed = rate, passed

    probe = mode.next_refine([R(mean, True), R(2 * mean, False)], None)
    assert probe == pytest.approx(1.5 * mean) and round(probe / mean, 3) == 1.5


def test_the_mode_names_an_azure_window_with_its_article(tmp_path):
    s = parse_scenario({"name": "t", "workload": {"trace": {"path": str(write(tmp_path, "azure")), "format": "azure"}},
                        "load": {"speedups": [1]}})
    assert "speedups 1× of an azure trace window (3 requests" in load_mode(s).describe()  # was "of a azure"


def test_rows_at_one_time_have_no_rate_unless_the_window_gives_its_length(tmp_path):
    """Rows all at one time made an invented 1 s per row; with a ``duration_s`` that the file
    runs past, the window's length is known and a burst in it is a rate."""
    same = str(write(tmp_path, "burstgpt", [(0.0, 5, 1, []), (0.0, 6, 1, [])], name="same.csv"))
    for window in ({}, {"duration_s": 10.0}):  # the file ends inside the window: no length of its own
        with pytest.raises(InputError, match=r"the window's 2 usable requests are all at one time \(lines 2 to 3\)"):
            read_trace(same, "burstgpt", **window)
    path = str(write(tmp_path, "burstgpt", [(0.0, 5, 1, []), (0.0, 6, 1, []), (4.0, 7, 1, [])]))
    with pytest.raises(InputError, match="all at one time"):
        read_trace(path, "burstgpt", max_requests=2)
    burst = read_trace(path, "burstgpt", duration_s=2.0)
    assert burst.period_s == 2.0 and burst.mean_rate_rps == 1.0


def test_trace_request_body_has_the_rows_lengths(tmp_path):
    s = scenario_with_trace(write(tmp_path, "mooncake"))
    w = Workload(s, salt="abc")
    planned = w.trace_request(TraceArrival(row=1, level=0, rep=0))
    body = json.loads(planned.body)
    assert body["max_tokens"] == 4 and planned.prompt_words == 12 and planned.prompt_source == "trace"
    assert len(body["messages"][0]["content"].split()) == 12


@pytest.mark.parametrize(
    "load, workload, expected",
    [
        ({"speedups": [1]}, {}, "load.speedups replays workload.trace"),
        ({"levels": [1]}, {"trace": True}, "workload.trace is replayed at load.speedups"),
        ({"speedups": [1], "rates": [1]}, {"trace": True}, "'speedups' (trace replay) replaces levels and rates"),
        ({"speedups": [1]}, {"trace": True, "shared_prefix": {"tokens": 4}}, "drop workload.shared_prefix"),
    ],
)
def test_scenario_mistakes_are_one_line(tmp_path, load, workload, expected):
    path = write(tmp_path, "mooncake")
    if workload.pop("trace", False):
        workload["trace"] = {"path": str(path), "format": "mooncake"}
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "t", "workload": workload, "load": load})
    assert expected in str(err.value)


def test_capacity_is_a_speedup_and_the_sentence_says_so():
    """Levels at 1×, 1.8× and 2× of a 4 req/s window; TTFT breaks at 2×."""
    plan = level_plan([1, 2, 3], 20.0)
    rows = []
    for lv, speedup, ttft in zip(plan, (1.0, 1.8, 2.0), (100.0, 150.0, 300.0)):
        lv["rate_rps"] = 4.0 * speedup
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 16.0, ttft_ms=ttft, itl_ms=10.0, chunks=8)
    run = run_dict(plan)
    run["trace"] = {"mean_rate_rps": 4.0}
    analysis = analyze(to_frame(rows), run, SloSpec.from_dict({"ttft_ms": {"p95": 200}}))
    cap = analysis.capacity
    assert [lv.speedup for lv in analysis.levels] == [1.0, 1.8, 2.0]
    assert (cap.speedup, cap.first_failing_speedup, cap.max_tested_speedup) == (1.8, 2.0, 2.0)
    assert cap.rate_rps == pytest.approx(7.2)
    assert cap.message.startswith("This endpoint holds 1.8× the traffic of the trace window within the SLOs; at 2× the p95 TTFT"), cap.message



def test_an_uncertain_replay_gives_both_figures_as_speedups():
    """1× passes, 1.5× straddles the limit, 2× fails: "holds 1× ..., and up to 1.5× ..." (the upper figure was a bare rate)."""
    plan = level_plan([1, 2, 3], 60.0)
    for lv, speedup in zip(plan, (1.0, 1.5, 2.0)):
        lv["rate_rps"] = 4.0 * speedup
    rows = closed_loop_rows(0, 1, plan[0]["start_wall"], 16.0, ttft_ms=100.0, itl_ms=10.0, chunks=8)
    # 1.5×: 40 TTFTs evenly 400..600 ms, p95 590 ms exactly at the limit: its interval straddles it
    rows += [request_row(request_id=f"a{i}", level=2, level_index=1, start_wall=plan[1]["start_wall"] + i,
                         chunk_ms=[float(t), t + 10.0]) for i, t in enumerate(np.linspace(400, 600, 40))]
    rows += closed_loop_rows(2, 3, plan[2]["start_wall"], 16.0, ttft_ms=2000.0, itl_ms=10.0, chunks=8)
    run = run_dict(plan)
    run["trace"] = {"mean_rate_rps": 4.0}
    cap = analyze(to_frame(rows), run, SloSpec.from_dict({"ttft_ms": {"p95": 590}})).capacity
    assert (cap.verdict, cap.speedup, cap.upper_bound_speedup) == ("uncertain", 1.0, 1.5)
    assert cap.message.startswith("This endpoint holds 1× the traffic of the trace window within the SLOs with "
                                  "confidence, and up to 1.5× the traffic of the trace window if the undecided "
                                  "level holds;"), cap.message

# -- the prefix cache: the mock's model and the per-level hit rate ---------------------------------

from loadtest.analysis.prefix_cache import responses_hit_rate, server_hit_rate  # noqa: E402
from loadtest.mock.prefix_cache import PrefixCache  # noqa: E402


def test_mock_prefix_cache_serves_leading_full_blocks_only_and_evicts_the_oldest():
    cache = PrefixCache(capacity_blocks=3, block_tokens=2)
    assert cache.lookup("a b c d e") == 0  # blocks (a b), (c d) cached; "e" is no full block
    assert cache.lookup("a b c d x y") == 4  # both leading blocks hit; (x y) is new
    assert cache.lookup("a b z z c d") == 2  # a block is keyed by its whole prefix: (c d) after (z z) is another
    assert (cache.queries, cache.hits) == (5 + 6 + 6, 6)
    # held now, oldest first: (a b), (a b|z z), (a b|z z|c d); one more block evicts (a b)
    assert cache.lookup("q q") == 0
    assert cache.lookup("a b c d") == 0


def samples(rows):
    import pandas as pd

    return pd.DataFrame(rows, columns=["wall", "metric", "value"])


def test_server_hit_rate_is_the_counters_increase_over_the_window():
    s = samples([
        (9.0, "vllm:prefix_cache_hits_total", 100.0), (9.0, "vllm:prefix_cache_queries_total", 1000.0),
        (12.0, "vllm:prefix_cache_hits_total", 400.0), (12.0, "vllm:prefix_cache_queries_total", 2000.0),
        (15.0, "vllm:prefix_cache_hits_total", 700.0), (15.0, "vllm:prefix_cache_queries_total", 2500.0),
    ])
    got = server_hit_rate(s, 10.0, 16.0)
    assert got["hit_rate"] == pytest.approx(600 / 1500) and got["metric"] == "vllm:prefix_cache_hits_total"
    assert server_hit_rate(s, 8.0, 16.0) is None  # no scrape before the window: its start is unknown
    gauge = samples([(11.0, "sglang:cache_hit_rate", 0.5), (13.0, "sglang:cache_hit_rate", 0.7)])
    assert server_hit_rate(gauge, 10.0, 16.0)["hit_rate"] == pytest.approx(0.6)
    assert server_hit_rate(samples([(11.0, "vllm:num_requests_running", 3.0)]), 10.0, 16.0) is None


def test_responses_hit_rate_counts_only_requests_that_report_it():
    import numpy as np

    got = responses_hit_rate(np.array([32.0, np.nan, 0.0]), np.array([64.0, 100.0, 64.0]))
    assert got == {"hit_rate": 0.25, "cached_tokens": 32, "prompt_tokens": 128, "requests": 2}
    assert responses_hit_rate(np.array([np.nan]), np.array([10.0])) is None


def test_a_capacity_level_that_replayed_part_of_the_window_says_so():
    """A trial: "holds 3.125× the traffic of the trace window" from a 3.5 s level that replayed the
    first 11 s of a 60 s window, offered 9.49 req/s where the window's mean at 3.125× is 12.97."""
    from types import SimpleNamespace

    from loadtest.analysis.trace_levels import partial_replay_caveat

    trace = {"period_s": 60.0, "mean_rate_rps": 4.15}

    def level(speedup, seconds, offered):
        return SimpleNamespace(speedup=speedup, status="pass", start_wall=1000.0, end_wall=1000.0 + seconds,
                               rate_rps=4.15 * speedup, open_loop={"offered_rps": offered})

    short = [level(2.0, 30.0, 8.3), level(3.125, 3.53, 9.49)]
    words = partial_replay_caveat(short, SimpleNamespace(speedup=3.125), trace)
    assert words == ("at 3.125× the level replayed only the first 11 s of the 60 s trace window (offered 9.49 req/s, "
                     "against 13 for the whole window at this speed): the capacity holds for that part of the trace; "
                     "levels of at least 19 s at it (min_level_duration_s) replay the whole window"), words
    assert partial_replay_caveat(short, SimpleNamespace(speedup=2.0), trace) is None  # 30 s at 2× covers 60 s
    assert partial_replay_caveat(short, SimpleNamespace(speedup=None), trace) is None  # no capacity speedup

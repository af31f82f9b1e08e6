"""Realistic workloads end to end: what the mock receives, and per-class capacity by its formula.

Each test runs the real ``loadtest run`` against a real ``loadtest mock`` that
logs every request body it receives (``--request-log``), so the assertions are
about the server's view: which prompts, in which order, with which history and
which shared prefixes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pandas as pd

from loadtest.mock.process import MockServer
from loadtest.mock.wire import TOKEN
from runkit import loadtest, summary, write_scenario

FAST_MOCK = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]


def received(log: Path) -> list[dict]:
    """Every request body the mock logged, in arrival order, minus the preflight (the first)."""
    bodies = [json.loads(line) for line in log.read_text().splitlines()]
    return bodies[1:]


def run(tmp_path: Path, mock_flags: list[str], *cli: str, **sections) -> tuple[dict, list[dict], pd.DataFrame]:
    log = tmp_path / "requests.log"
    with MockServer([*mock_flags, "--request-log", str(log)]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, **sections)
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), *cli, timeout=240)
    assert result.returncode == 0, result.stderr
    return summary(tmp_path / "run"), received(log), pd.read_parquet(tmp_path / "run" / "requests.parquet")


def test_sequential_dataset_reaches_the_server_exactly_in_order(tmp_path):
    rows = []
    for i in range(40):
        if i % 4 == 3:
            rows.append({"messages": [{"role": "system", "content": f"be brief {i}"},
                                      {"role": "user", "content": f"question number {i}?"}], "max_tokens": 2 + i % 3})
        else:
            rows.append({"prompt": f"prompt number {i}: say something", "max_tokens": 2 + i % 3})
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s, bodies, frame = run(
        tmp_path, FAST_MOCK,
        workload={"dataset": {"path": "prompts.jsonl", "format": "jsonl", "order": "sequential",
                              "use_output_lengths": True}},
        load={"levels": [1], "level_duration_s": 2, "warmup_s": 0.5},
    )
    assert len(bodies) > len(rows), "the test needs at least one pass over the dataset"
    for n, body in enumerate(bodies):
        row = rows[n % len(rows)]
        expected = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
        assert body["messages"] == expected, f"request {n}"
        assert body["max_tokens"] == row["max_tokens"]
    # Prompt tokens come from the server's usage (the mock counts words) and say so.
    assert set(frame["prompt_token_source"]) == {"usage"}
    assert frame["prompt_tokens"].iloc[0] == len("prompt number 0: say something".split())
    assert s["datasets"][0]["rows"] == 40 and len(s["datasets"][0]["sha256"]) == 64


def test_conversations_and_shared_prefixes_across_two_workers(tmp_path):
    """3-turn conversations behind 3 shared prefixes, from 2 worker processes.

    The mock must see each turn resend the previous turn's messages plus the
    answer it streamed (the mock's text is TOKEN × max_tokens), and only 3
    distinct system prompts. The records' class, turn and conversation id
    travel from the workers to the master's parquet file.
    """
    max_tokens = 5
    s, bodies, frame = run(
        tmp_path, FAST_MOCK, "--workers", "2",
        workload={"prompt_tokens": {"mean": 6, "stddev": 0}, "max_tokens": max_tokens,
                  "shared_prefix": {"tokens": 24, "groups": 3}, "conversation": {"turns": 3},
                  "classes": [{"name": "talk", "weight": 1}]},
        load={"levels": [2, 4], "level_duration_s": 3, "warmup_s": 0.5},
    )
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 3 and all(len(t.split()) == 24 for t in systems)

    answer = TOKEN * max_tokens
    by_history = {json.dumps(b["messages"]) for b in bodies}
    grown = 0
    for body in bodies:
        msgs = body["messages"]
        turn = (len(msgs) - 2) // 2 + 1  # system + (user, assistant) × (turn − 1) + user
        assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"
        if turn > 1:
            assert msgs[-2] == {"role": "assistant", "content": answer}
            previous = json.dumps(msgs[:-2])
            assert previous in by_history, "a later turn must extend a request the server saw"
            grown += 1
        assert turn <= 3
    assert grown > 10

    assert set(frame["class"].dropna()) == {"talk"} and frame["class"].notna().all()
    assert set(frame["turn"]) == {1, 2, 3}
    assert frame["worker"].nunique() == 2
    conv = frame.groupby("conversation_id")
    assert conv["worker"].nunique().max() == 1  # a conversation stays with its user
    # within a conversation, the prompt grows by the answer (5 words) and a new message (6 words)
    ok = frame[frame["ok"]].sort_values(["conversation_id", "turn"])
    steps = ok.groupby("conversation_id")["prompt_tokens"].diff().dropna()
    assert len(steps) > 10 and set(steps) == {max_tokens + 6}
    levels = [lv for lv in s["levels"] if lv["requests"]]
    assert all(set(lv["ttft_by_turn"]) <= {"1", "2", "3"} for lv in levels)
    assert "2" in levels[-1]["ttft_by_turn"] and "talk" in levels[-1]["classes"]


def test_class_slos_bind_at_different_concurrencies(tmp_path):
    """Two classes on one mock: d(c) = 10 + 20c ms per decode step (README "Capacity by hand").

    * chat (8 tokens), ITL p95 ≤ 120 ms: 10 + 20c ≤ 120 holds up to c = 5, fails at 6 (130 ms);
    * summarize (24 tokens), e2e p95 ≤ 1950 ms: e2e ≈ TTFT (d to 2d) + 23 d, i.e. 1.68–1.75 s
      at c = 3 and 2.16–2.25 s at c = 4, so it holds up to 3.

    Levels 2, 3, 4, 6 (5 is left out: 110 ms is too close to 120 for a 4 s level on a busy
    machine). The mix holds 3 users; summarize binds, on e2e_ms.p95, at 4; chat first fails at 6.
    """
    s, _, frame = run(
        tmp_path, ["--decode-base-ms", "10", "--decode-per-seq-ms", "20", "--prefill-per-token-ms", "0"],
        workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "classes": [
            {"name": "chat", "max_tokens": 8, "slo": {"itl_ms": {"p95": 120}}},
            {"name": "summarize", "max_tokens": 24, "slo": {"e2e_ms": {"p95": 1950}}},
        ]},
        load={"levels": [2, 3, 4, 6], "level_duration_s": 4, "warmup_s": 1},
        slo={"ttft_ms": {}, "itl_ms": {}, "max_error_rate": 0.01},
    )
    cap = s["capacity"]
    assert (cap["concurrency"], cap["first_failing"], cap["verdict"]) == (3, 4, "found"), cap
    assert (cap["binding_class"], cap["binding"]) == ("summarize", "e2e_ms.p95")
    chat_cap = cap["classes"]["chat"]
    assert (chat_cap["concurrency"], chat_cap["first_failing"], chat_cap["binding"]) == (4, 6, "itl_ms.p95")
    assert cap["classes"]["summarize"]["concurrency"] == 3
    assert "summarize class's p95 end-to-end latency" in cap["message"]
    levels = {lv["concurrency"]: lv for lv in s["levels"]}
    for c, lv in levels.items():
        chat, summ = lv["classes"]["chat"], lv["classes"]["summarize"]
        assert abs(chat["itl_ms"]["p50"] - (10 + 20 * c)) < 5
        assert chat["status"] == ("pass" if c <= 4 else "fail")
        if c < 6:  # at the last level the run's end cuts the long summarize requests: none is judged
            assert summ["status"] == ("pass" if c <= 3 else "fail")
        assert {ch["class"] for ch in lv["checks"]} == {"chat", "summarize", None}
        assert lv["status"] == ("pass" if c <= 3 else "fail")
    assert set(frame["class"]) == {"chat", "summarize"}
    assert "Per request class" in (tmp_path / "run" / "report.html").read_text()

    # Re-judged with a looser summarize SLO: it now holds to 4 (2.25 s) and fails at 6 (≈3.1 s).
    out = tmp_path / "run"
    result = loadtest("analyze", str(out), "--slo", "summarize.e2e_ms.p95=2400")
    assert result.returncode == 0, result.stderr
    rejudged = summary(out)
    cap = rejudged["capacity"]
    assert (cap["concurrency"], cap["first_failing"]) == (4, 6), cap
    assert rejudged["classes"]["summarize"]["slo"]["e2e_ms"] == {"p95": 2400.0}
    at_4 = next(lv for lv in rejudged["levels"] if lv["concurrency"] == 4)
    assert at_4["classes"]["summarize"]["status"] == "pass" and at_4["status"] == "pass"
    assert "per request class" in result.stdout and "summarize" in result.stdout
    bad = loadtest("analyze", str(out), "--slo", "summarise.e2e_ms.p95=2400")
    assert bad.returncode == 2 and "no request class named 'summarise'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

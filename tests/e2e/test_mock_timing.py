"""The mock keeps the model's time: ITL = base + per_seq x running, queueing beyond max_batch.

Chunks are timestamped on arrival by a raw-socket reader
(:mod:`tests/support/probe.py`), so the client adds next to nothing. The machine
may be shared: tolerances are a few ms around tens of ms.
"""

from __future__ import annotations

import asyncio
import statistics

import pytest

from loadtest.mock import MockServer
from support.probe import ProbeResult, probe

pytestmark = [pytest.mark.solo, pytest.mark.timeout(60)]

CHAT = "/v1/chat/completions"


def chat_body(max_tokens: int, prompt: str = "hello there") -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
    }


def run_streams(mock: MockServer, bodies: list[dict], stagger_s: float = 0.0) -> list[ProbeResult]:
    async def go() -> list[ProbeResult]:
        async def one(i: int, body: dict) -> ProbeResult:
            await asyncio.sleep(i * stagger_s)
            return await probe(mock.host, mock.port, CHAT, body, timeout=20)

        return await asyncio.gather(*(one(i, b) for i, b in enumerate(bodies)))

    results = asyncio.run(go())
    for r in results:
        assert r.status == 200 and r.complete and r.error is None
    return results


#: the ``mock`` fixture's server (tests/conftest.py): the ITL-bound model, step = 10 + 20 x running ms
MOCK_ARGS = ["--decode-base-ms", "10", "--decode-per-seq-ms", "20"]


@pytest.mark.parametrize(("streams", "expected_ms"), [(1, 30.0), (4, 90.0)])
def test_inter_chunk_gap_follows_the_batch(
    mock: MockServer, streams: int, expected_ms: float
) -> None:
    results = run_streams(mock, [chat_body(20)] * streams)
    gaps = [g for r in results for g in r.gaps_ms()]
    assert len(gaps) == streams * 19
    assert abs(statistics.median(gaps) - expected_ms) <= 3.0, sorted(gaps)


def test_ttft_is_one_step_plus_prefill() -> None:
    # 100 prompt words at 1 ms each: the admitting step lasts 10 + 20 + 100 = 130 ms,
    # the next ones 30 ms.
    with MockServer(
        ["--decode-base-ms", "10", "--decode-per-seq-ms", "20", "--prefill-per-token-ms", "1"]
    ) as mock:
        prompt = " ".join(["w"] * 100)
        # Five requests one after another, their median: one request's TTFT also holds the host's
        # wake-ups on both sides (2-5 ms here, and once 15 ms in a suite run), which is not the
        # mock's schedule; its decode steps keep to theirs.
        results = [run_streams(mock, [chat_body(5, prompt)])[0] for _ in range(5)]
        ttfts = [(r.content_times()[0] - r.t_start) * 1000 for r in results]
        assert 130 <= statistics.median(ttfts) <= 142, ttfts
        assert abs(statistics.median([g for r in results for g in r.gaps_ms()]) - 30) <= 3


def test_requests_beyond_max_batch_wait_for_a_slot() -> None:
    # Two slots, 10 tokens each, arrivals 5 ms apart. The first runs alone for one
    # 30 ms step, then the second joins (steps of 10 + 20 x 2 = 50 ms). The third
    # waits until the first finishes (~30 + 9 x 50 = 480 ms), takes its slot, and
    # gets its first token one 50 ms step later.
    with MockServer(
        ["--max-batch", "2", "--decode-base-ms", "10", "--decode-per-seq-ms", "20"]
    ) as mock:
        results = run_streams(mock, [chat_body(10)] * 3, stagger_s=0.005)
        t0 = results[0].t_start
        first = [r.content_times()[0] - t0 for r in results]
        last = [r.content_times()[-1] - t0 for r in results]
        assert first[0] < 0.045 and first[1] < 0.1
        slot_free = min(last[:2])
        assert 0.46 <= slot_free <= 0.52, last
        assert slot_free + 0.04 <= first[2] <= slot_free + 0.07, (first, last)
        # Its TTFT is about one whole request's duration.
        ttft_3 = results[2].content_times()[0] - results[2].t_start
        assert ttft_3 >= 0.9 * (results[0].content_times()[-1] - results[0].t_start)


def test_tokens_per_chunk_spaces_chunks_by_k_steps() -> None:
    with MockServer(
        ["--decode-base-ms", "10", "--decode-per-seq-ms", "0", "--tokens-per-chunk", "4"]
    ) as mock:
        results = [run_streams(mock, [chat_body(16)])[0] for _ in range(3)]
        for r in results:
            assert len(r.gaps_ms()) == 3
        gaps = [g for r in results for g in r.gaps_ms()]
        assert abs(statistics.median(gaps) - 40) <= 3, gaps
        assert all(abs(g - 40) <= 6 for g in gaps), gaps
        # The first content chunk waits for its 4 tokens (the median of three: one request's first
        # chunk also holds the host's wake-ups on both sides).
        firsts = [(r.content_times()[0] - r.t_start) * 1000 for r in results]
        assert 38 <= statistics.median(firsts) <= 50, firsts

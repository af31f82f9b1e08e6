"""The in-flight cross-check knows that a batched request is several sequences on the server.

llama-server runs each document of a rerank (each input of an embeddings batch) as a task in a
slot of its own, so at 4 users with 4 documents each its ``requests_processing +
requests_deferred`` reads 16 with no other traffic at all (measured on the real server:
tests/real/test_real_rerank.py's model, 4 slots, "4 users -> 16"). That must not be called other
traffic; 16 for 4 users of single-sequence requests still is, and so is more than 4 x the batch.
"""

from __future__ import annotations

from types import SimpleNamespace

from loadtest.analysis.server import ScrapeHealth, ServerView, SignalStats, crosscheck_warnings
from loadtest.analysis.signals import KNOWN_SIGNALS


def _view(running: float, waiting: float) -> ServerView:
    signals = [s for s in KNOWN_SIGNALS if s.metric in ("llamacpp:requests_processing", "llamacpp:requests_deferred")]
    stats = {"llamacpp:requests_processing": SignalStats(p50=running, n=10),
             "llamacpp:requests_deferred": SignalStats(p50=waiting, n=10)}
    return ServerView(url="http://127.0.0.1:9/metrics", signals=signals, levels={0: stats}, health={},
                      total=ScrapeHealth(scrapes=10))


def _level(requests_per_s: float, items_per_s: float | None) -> SimpleNamespace:
    return SimpleNamespace(index=0, concurrency=4, errors_by_kind={}, requests_per_s=requests_per_s,
                           items_per_s=items_per_s)


def test_four_documents_per_request_are_sixteen_in_flight_without_other_traffic():
    assert crosscheck_warnings(_view(4, 12), [_level(17.2, 68.7)]) == []


def test_single_sequence_requests_at_sixteen_in_flight_are_other_traffic():
    (warning,) = crosscheck_warnings(_view(4, 12), [_level(17.2, None)])
    assert "also serves other traffic" in warning and "4 users → 16" in warning


def test_more_than_the_batch_explains_is_still_other_traffic():
    (warning,) = crosscheck_warnings(_view(8, 20), [_level(17.2, 68.7)])  # 28 > 1.3 x 4 x 4 + 1
    assert "also serves other traffic" in warning

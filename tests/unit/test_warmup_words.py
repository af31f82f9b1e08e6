"""The warning for failed warm-up requests (preflight.failed_warmup_words): counted in run.json, and said."""

from __future__ import annotations

from loadtest.client.record import RequestRecord
from loadtest.preflight import failed_warmup_words


def _rec(kind: str | None = None, message: str | None = None) -> RequestRecord:
    rec = RequestRecord(start_wall=0.0, start_perf=0.0)
    if kind is not None:
        rec.fail(kind, message or "")
    return rec


def test_a_warm_up_that_all_answered_says_nothing():
    assert failed_warmup_words([_rec(), _rec()]) is None
    assert failed_warmup_words([]) is None


def test_failed_warm_up_requests_are_counted_by_kind_with_the_commonest_message():
    warm = [_rec(), _rec("rate_limited", "HTTP 429: quota"), _rec("rate_limited", "HTTP 429: quota"),
            _rec("timeout", "read timed out after 30 s")]
    words = failed_warmup_words(warm)
    assert words is not None and words.startswith("warning: 3 of 4 warm-up requests failed")
    assert '(rate_limited 2, timeout 1, the commonest "HTTP 429: quota")' in words
    assert "first level may meet the same" in words


def test_a_long_message_is_cut():
    words = failed_warmup_words([_rec("http_5xx", "x" * 1000)])
    assert words is not None and "x" * 200 in words and "x" * 201 not in words


def test_summary_warnings_keep_the_count_from_run_json():
    import pandas as pd

    from loadtest.analysis.caveats import run_caveats

    said = run_caveats({"warmup_requests": {"sent": 5, "failed": 2}}, pd.DataFrame())
    assert said == ["2 of 5 warm-up requests failed (not measured); the first level may have met the same"]
    assert run_caveats({"warmup_requests": {"sent": 5, "failed": 0}}, pd.DataFrame()) == []
    assert run_caveats({}, pd.DataFrame()) == []  # an older run folder: no warm-up record

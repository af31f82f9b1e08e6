"""Failed requests grouped by their message, numbers aside (analysis/failures.py): the report's table and the
terminal's ``errors:`` line."""

from __future__ import annotations

import pandas as pd

from loadtest.analysis.failures import MESSAGE_CHARS, errors_line, message_groups


def _frame(rows: list[tuple[bool, str | None, str | None]], measured: bool = True) -> pd.DataFrame:
    return pd.DataFrame({"failed": [f for f, _, _ in rows], "error_kind": [k for _, k, _ in rows],
                         "error": [m for _, _, m in rows], "measured": [measured] * len(rows)})


def test_ten_refusals_of_ten_lengths_are_one_group_shown_by_its_commonest_message():
    rows = [(True, "http_4xx", f"HTTP 400: this model's maximum context length is 4096 tokens, you asked {4100 + i}")
            for i in range(10)]
    rows += [(True, "http_4xx", "HTTP 400: this model's maximum context length is 4096 tokens, you asked 4100")]
    rows += [(True, "timeout", "read timed out after 30 s")] * 3 + [(False, None, None)] * 20
    groups = message_groups(_frame(rows))
    assert [(g.kind, g.count, g.messages) for g in groups] == [("http_4xx", 11, 10), ("timeout", 3, 1)]
    assert groups[0].message.endswith("you asked 4100")  # the commonest of its messages (twice)


def test_a_kind_without_a_message_and_a_long_message():
    groups = message_groups(_frame([(True, None, None), (True, "http_5xx", "x" * 1000)]))
    assert {(g.kind, g.message[:3]) for g in groups} == {("unknown", ""), ("http_5xx", "xxx")}
    assert max(len(g.message) for g in groups) == MESSAGE_CHARS
    assert message_groups(_frame([(False, None, None)])) == [] and message_groups(pd.DataFrame()) == []


def test_the_terminal_line_counts_the_measured_failures_and_quotes_the_commonest():
    rows = [(True, "rate_limited", f"HTTP 429: retry after {i} s") for i in range(5)] + [(True, "timeout", "timed out")]
    rows += [(False, None, None)] * 14
    frame = pd.concat([_frame(rows), _frame([(True, "http_5xx", "warm-up failure")] * 50, measured=False)])
    line = errors_line(frame, 20)
    assert line == ('errors: 6 of 20 measured requests failed; the commonest, 5 times (rate_limited, 5 messages alike '
                    'but for their numbers): "HTTP 429: retry after 0 s"; 1 other kind of message in the report'), line
    assert errors_line(_frame([(False, None, None)] * 3), 3) is None


def test_the_reports_errors_section_shows_a_group_once_with_how_many_messages_it_holds():
    from types import SimpleNamespace

    from loadtest.report.sections import errors_section

    rows = [(True, "http_4xx", f"HTTP 400: context length exceeded: {4100 + i} tokens") for i in range(10)]
    level = SimpleNamespace(errors_by_kind={"http_4xx": 10}, cancelled=0, load_text="4", requests=30, errors=10,
                            rate_rps=None, load=4.0, refine=False)
    html = errors_section(SimpleNamespace(levels=[level], requests=_frame(rows)))
    assert html.count("context length exceeded") == 1, html
    assert "(10 messages alike but for their numbers)" in html


def test_hex_ids_are_alike_and_the_terminal_counts_every_other_group():
    rows = [(True, "http_5xx", f"HTTP 502: upstream {i:012x}a failed") for i in range(100, 105)]
    rows += [(True, f"kind_{k}", "x") for k in range(6)]
    groups = message_groups(_frame(rows))
    assert (groups[0].count, groups[0].messages) == (5, 5), groups[0]
    assert errors_line(_frame(rows), 11).endswith("; 6 other kinds of message in the report")

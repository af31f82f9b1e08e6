"""Capacity: the highest concurrency such that every level up to it *passes* the SLOs.

Levels are taken in concurrency order (refine levels included, wherever they
were run). A level counts only when its verdict is a decided ``pass``: an
``uncertain`` level (an interval straddles a limit, or too few samples) is not
a pass, so the capacity is never read off a coin flip. The answer comes with:

* the *first failing* level and the *binding* SLO, i.e. the check that failed
  there (if several failed, the one furthest over its limit by ratio), with its
  value and limit;
* ``upper_bound``, the optimistic reading: the highest level below the first
  failure, counting undecided levels as holding. It equals ``concurrency`` when
  every level up to the first failure was decided;
* throughput and goodput at capacity, which is what sizing replicas needs;
* a verdict that says how far to trust it: ``found``, ``at_least`` (nothing
  failed: the endpoint holds at least the highest tested level),
  ``below_minimum`` (even the lowest level fails), ``uncertain`` (an undecided
  level sits between the capacity and the first failure), ``client_saturated``
  (the load generator was the bottleneck at a level that decides the answer),
  ``host_contended`` (the host it ran on was busy with other work there) or ``no_data``;
* one human sentence (:attr:`Capacity.message`), which gives both numbers when
  they differ.

In open loop (rate levels) the same rule runs on rates: the capacity is the
highest rate such that every rate up to it passes, reported as
``rate_rps`` (with ``first_failing_rate_rps`` …) and the mean requests in
flight there; the concurrency fields stay None.

Levels without data are skipped (a crashed worker must not hide the levels
around it). Levels above the first failure do not change the answer.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from loadtest.analysis.failures import kinds_text
from loadtest.analysis.offered import offered_note
from loadtest.analysis.results import Capacity, CapacityVerdict, Check, LevelResult, fmt_rate
from loadtest.analysis.slo import METRIC_LABELS, SloSpec
from loadtest.analysis.verdict import ERROR_RATE_CHECK, SUSTAINED_CHECK, VALID_OUTPUT_CHECK


def find_capacity(
    levels: Sequence[LevelResult], slo: SloSpec, confidence: float = 0.95, *, class_name: str | None = None
) -> Capacity:
    """Derive the capacity from evaluated levels (any order); ``confidence`` is the intervals' level.

    ``class_name``: the levels are one request class's, judged on its own requests by its own SLO
    (``capacity.classes``). The message then speaks for that class, never for "this endpoint": the
    class may hold a level with certainty where the run as a whole (every class) is undecided.
    """
    usable = sorted((lv for lv in levels if lv.status != "no_data"), key=lambda lv: lv.load)
    if not usable:
        return Capacity(
            concurrency=None,
            verdict="no_data",
            message="No request was measured: every level was empty or shorter than its warmup, "
            "so the capacity is unknown.",
        )

    held = 0  # how many levels, from the lowest, pass
    while held < len(usable) and usable[held].status == "pass":
        held += 1
    cap = usable[held - 1] if held else None
    blocker = usable[held] if held < len(usable) else None  # the first level that did not pass
    fail_at = next((i for i, lv in enumerate(usable) if lv.status == "fail"), None)
    first_failing = usable[fail_at] if fail_at is not None else None
    below_fail = usable if fail_at is None else usable[:fail_at]
    optimistic = below_fail[-1] if below_fail else None
    undecided = [lv for lv in below_fail if lv.status == "uncertain"]
    # the levels the answer rests on: up to the first non-pass, and on to the first failure
    deciding = usable[: max(held, len(below_fail)) + 1]
    saturated = [lv for lv in deciding if lv.client_saturated]
    contended = [lv for lv in deciding if lv.host_contended]

    binding = binding_check(first_failing) if first_failing else None
    verdict: CapacityVerdict
    if saturated:
        verdict = "client_saturated"
    elif contended:
        verdict = "host_contended"
    elif blocker is not None and blocker.status == "uncertain":
        verdict = "uncertain"
    elif cap is None:
        verdict = "below_minimum"
    elif blocker is None:
        verdict = "at_least"
    else:
        verdict = "found"

    result = Capacity(
        concurrency=cap.concurrency if cap else None,
        verdict=verdict,
        message="",
        first_failing=first_failing.concurrency if first_failing else None,
        binding=binding.name if binding else None,
        binding_class=binding.class_name if binding else None,
        binding_value=binding.value if binding else None,
        binding_limit=binding.limit if binding else None,
        binding_ratio=binding.ratio if binding else None,
        requests_per_s=cap.requests_per_s if cap else None,
        output_tokens_per_s=cap.output_tokens_per_s if cap else None,
        goodput_rps=cap.goodput_rps if cap else None,
        input_tokens_per_s=cap.input_tokens_per_s if cap else None,
        items_per_s=cap.items_per_s if cap else None,
        certain_concurrency=cap.concurrency if cap else None,
        upper_bound=optimistic.concurrency if optimistic else None,
        max_tested=usable[-1].concurrency,
        uncertain_levels=[lv.concurrency for lv in undecided],
        saturated_levels=[lv.concurrency for lv in levels if lv.client_saturated],
        contended_levels=[lv.concurrency for lv in levels if lv.host_contended],
    )
    if any(lv.rate_rps is not None for lv in usable):
        _as_rates(result, cap, first_failing, optimistic, usable, undecided, levels)
    if any(lv.speedup is not None for lv in usable):
        result.speedup = cap.speedup if cap else None
        result.first_failing_speedup = first_failing.speedup if first_failing else None
        result.upper_bound_speedup = optimistic.speedup if optimistic else None
        result.max_tested_speedup = usable[-1].speedup
    result.message = _message(result, cap, first_failing, binding, undecided, saturated or contended, slo, confidence,
                              _Words(class_name))
    return result


def _as_rates(result, cap, first_failing, optimistic, usable, undecided, levels) -> None:
    """Open loop: the answer is a rate; the concurrency readings do not apply."""
    result.rate_rps = cap.rate_rps if cap else None
    result.first_failing_rate_rps = first_failing.rate_rps if first_failing else None
    result.upper_bound_rate_rps = optimistic.rate_rps if optimistic else None
    result.max_tested_rate_rps = usable[-1].rate_rps
    result.mean_in_flight = cap.open_loop.get("mean_in_flight") if cap and cap.open_loop else None
    result.offered_rate_rps = cap.open_loop.get("offered_rps") if cap and cap.open_loop else None
    result.sent_rate_rps = cap.open_loop.get("sent_rps") if cap and cap.open_loop else None
    result.concurrency = result.certain_concurrency = result.upper_bound = None
    result.first_failing = result.max_tested = None
    result.uncertain_levels = []
    result.saturated_levels = []
    result.contended_levels = []


def binding_check(level: LevelResult) -> Check | None:
    """The failed check furthest over its limit (ratio value/limit) at ``level``."""
    failed = [c for c in level.checks if c.verdict == "fail"]
    if not failed:
        return None
    return max(failed, key=lambda c: (c.ratio if not math.isnan(c.ratio) else -1.0))


# -- the human sentence ---------------------------------------------------------------------


def _users(n: int) -> str:
    return f"{n} concurrent user" + ("" if n == 1 else "s")


def _amount(value: float, like: LevelResult) -> str:
    """``value`` in the unit of ``like``'s mode: "12.5 req/s" or "8 concurrent users"."""
    if like.speedup is not None and like.rate_rps:
        return f"{value / like.rate_rps * like.speedup:g}× the traffic of the trace window"
    return f"{fmt_rate(value)} req/s" if like.rate_rps is not None else _users(int(value))


def _at(level: LevelResult) -> str:
    """How a sentence names a level after "at": "16", "12.5 req/s" or "2×" (trace replay)."""
    if level.speedup is not None:
        return f"{level.speedup:g}×"
    return f"{fmt_rate(level.rate_rps)} req/s" if level.rate_rps is not None else str(level.concurrency)


def _max_tested(cap: Capacity) -> str:
    if cap.max_tested_speedup is not None:
        return f"{cap.max_tested_speedup:g}× the trace window"
    return f"{fmt_rate(cap.max_tested_rate_rps)} req/s" if cap.max_tested_rate_rps is not None else str(cap.max_tested)


def fmt_ms(value: float) -> str:
    """Milliseconds with sensible precision: 1,300 / 130 / 13.2 / 1.32."""
    if math.isinf(value):
        return "∞"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_pct(value: float) -> str:
    """A rate as a percentage: 0.05% / 0.5% / 2.0% / 19.6%."""
    return f"{value * 100:.2g}%" if value < 0.01 else f"{value * 100:.1f}%"


def confidence_pct(confidence: float) -> str:
    """``"95%"``, ``"98.75%"``, ``"98.33%"``: a confidence as every page and message spells it."""
    return f"{confidence * 100:.4g}%"


def level_reasons(levels: Sequence[LevelResult]) -> list[str]:
    """The levels' client/host reasons, each kind once: levels whose reasons differ only in their
    figures (the host busy at 9 and at 10 users) give the first level's, with the others named."""
    groups: dict[str, list[LevelResult]] = {}
    for lv in levels:
        reason = (lv.client or {}).get("reason")
        if reason:
            groups.setdefault(re.sub(r"\d+(?:\.\d+)?", "#", str(reason)), []).append(lv)
    out = []
    for same in groups.values():
        text = str(same[0].client["reason"])
        if len(same) > 1:
            text += f" (at {same[0].load:g}; alike at {', '.join(f'{lv.load:g}' for lv in same[1:])})"
        out.append(text)
    return out


def ci_label(confidence: float) -> str:
    """``"95% CI"``, ``"98.75% CI"``."""
    return f"{confidence_pct(confidence)} CI"


def describe_check(check: Check, *, with_ci: bool = False, confidence: float = 0.95) -> str:
    """``"p95 ITL is 130 ms against a 120 ms limit"`` (no leading article)."""
    if check.metric == SUSTAINED_CHECK:  # a rate whose queue grows (sustained.py): its reason in words
        return check.reason
    if check.metric in (ERROR_RATE_CHECK, VALID_OUTPUT_CHECK):
        whose = f"{check.class_name} class's " if check.class_name else ""
        if check.metric == ERROR_RATE_CHECK:
            text = f"{whose}error rate is {fmt_pct(check.value)} against a {check.limit * 100:g}% budget"
        else:
            text = f"{whose}valid output rate is {fmt_pct(check.value)} against a {check.limit * 100:g}% floor"
        if with_ci:
            text += f" ({ci_label(confidence)} {fmt_pct(check.ci[0])}–{fmt_pct(check.ci[1])})"
        return text
    label = f"{check.percentile} {METRIC_LABELS.get(check.metric, check.metric)}"
    if check.class_name:
        label = f"{check.class_name} class's {label}"
    if math.isinf(check.value):
        share = (1 - float(check.percentile[1:]) / 100) * 100 if check.percentile else 0
        value = f"unbounded (more than {share:g}% of requests failed or were cut after waiting past the limit)"
    else:
        value = f"{fmt_ms(check.value)} ms"
    ci = ""
    if with_ci:
        lo, hi = check.ci
        ci = f" ({ci_label(confidence)} {fmt_ms(lo)}–{fmt_ms(hi)} ms)"
    return f"{label} is {value}{ci} against a {check.limit:g} ms limit"


def _error_kinds(check: Check, level: LevelResult) -> str:
    """What the failures were, when the error budget binds: `` (rate_limited 12, timeout 2)``.

    A 16.7% error rate reads differently as 429s (a rate limiter in front: a quota, not the
    server's capacity) than as timeouts or 5xx; the kinds are in summary.json, and belong here too.
    """
    if check.metric != ERROR_RATE_CHECK or check.class_name or not level.errors_by_kind:
        return ""
    return f" ({kinds_text(level.errors_by_kind)})"


def _offered(words: "_Words", level: LevelResult | None) -> str:
    """The level's offered-rate note for the endpoint's sentence; none in a class's.

    Why none: a class's level is the class's share of the arrivals, and the note set that share
    against the whole level's nominal rate (a trial's chat class read "holds 2.5 req/s (its window
    was offered 1.44 req/s)" where the level's window was offered 1.80, and its 3 req/s level 2.7
    where the endpoint's sentence said 3.3). The endpoint's sentence, printed beside it, names the
    window's offered rate.
    """
    return "" if words.class_name else offered_note(level)


class _Words:
    """Who a capacity message speaks for: the endpoint (every class together), or one class alone."""

    def __init__(self, class_name: str | None = None) -> None:
        self.class_name = class_name
        #: The sentence's subject: "This endpoint" / "The chat class, judged on its own requests,".
        self.subject = f"The {class_name} class, judged on its own requests," if class_name else "This endpoint"
        #: What it holds: "the SLOs" / "its SLO".
        self.slos = "its SLO" if class_name else "the SLOs"
        #: Whose SLOs a level fails or no level holds: "the SLOs" / "the chat class's SLO".
        self.whose_slos = f"the {class_name} class's SLO" if class_name else "the SLOs"
        #: The subject inside a sentence: "the endpoint" / "the chat class".
        self.inner = f"the {class_name} class" if class_name else "the endpoint"


def _message(
    cap: Capacity,
    cap_level: LevelResult | None,
    first_failing: LevelResult | None,
    binding: Check | None,
    uncertain: list[LevelResult],
    saturated: list[LevelResult],
    slo: SloSpec,
    confidence: float,
    words: _Words | None = None,
) -> str:
    words = words or _Words()
    fail_part = (
        f"at {_at(first_failing)}{_offered(words, first_failing)} the {describe_check(binding)}"
        f"{_error_kinds(binding, first_failing)}"
        if first_failing and binding else ""
    )
    if cap.verdict == "found":
        assert cap_level is not None
        return f"{words.subject} holds {cap_level.label}{_offered(words, cap_level)} within {words.slos}; {fail_part}."
    if cap.verdict == "at_least":
        if slo.is_empty:
            return f"No SLOs were defined, so every level passes: capacity ≥ max tested ({_max_tested(cap)})."
        return (f"{words.subject} held every tested level within {words.slos}: capacity ≥ max tested ({_max_tested(cap)})"
                f"{_offered(words, cap_level)}.")
    if cap.verdict == "below_minimum":
        assert first_failing is not None
        return (
            f"Even the lowest tested level ({first_failing.label}) fails {words.whose_slos}: "
            f"the {describe_check(binding) + _error_kinds(binding, first_failing) if binding else 'SLOs fail'}."
        )
    if cap.verdict == "uncertain":
        return _uncertain_message(cap, uncertain, fail_part, confidence, words, cap_level)
    if cap.verdict in ("client_saturated", "host_contended"):
        at = ", ".join(_at(lv) for lv in saturated)
        reasons = level_reasons(saturated)
        why = f" ({'; '.join(reasons)})" if reasons else ""
        if cap_level is None:
            # no level passed: a failure at the lowest, or only undecided levels (an embeddings run on a
            # busy host read "even the lowest level fails" over a lowest level that was uncertain)
            lowest_failed = first_failing is not None and not any(u.load < first_failing.load for u in uncertain)
            face = "even the lowest level fails" if lowest_failed else "no level passed with confidence"
        elif first_failing is None:
            face = f"capacity ≥ max tested ({_max_tested(cap)})"
        else:
            face = f"{words.inner} holds {cap_level.label}{_offered(words, cap_level)}"
        unit = 'rate' if cap.rate_rps is not None or cap.max_tested is None else 'concurrency'
        if cap.max_tested_speedup is not None:
            unit = 'speedup'
        if cap.verdict == "host_contended":
            return (f"At {unit} {at} {'; '.join(reasons) or 'the host was busy'}, so results there are not "
                    f"trustworthy; taken at face value, {face}.")
        if all(lv.client_near_limit for lv in saturated):  # a quiet client whose own error spans a limit
            return (f"At {unit} {at} a verdict is within the client's own timing error of its limit{why}, though "
                    f"the client was not busy; taken at face value, {face}.")
        return (
            f"The load generator was saturated at {unit} {at}{why}, so results there are not "
            f"trustworthy; taken at face value, {face}."
        )
    return "The capacity is unknown."


def _uncertain_message(
    cap: Capacity, undecided: list[LevelResult], fail_part: str, confidence: float, words: _Words | None = None,
    cap_level: LevelResult | None = None,
) -> str:
    """Both numbers: what holds with confidence, and what would hold if the undecided levels do; the
    rate held names what its window was offered, where that differs, as the found verdict's does."""
    words = words or _Words()
    level = undecided[0]
    doubt = next((c for c in level.checks if c.verdict in ("uncertain", "no_data")), None)
    if doubt is not None and doubt.verdict == "uncertain":
        reason = f", {doubt.reason}" if doubt.reason else ""
        why = f"at {_at(level)} the {describe_check(doubt, with_ci=True, confidence=confidence)}{reason}"
    elif doubt is not None:
        why = f"at {_at(level)} there is no {doubt.name} sample"
    else:
        why = f"at {_at(level)} a check is inconclusive"
    held, upper = (cap.rate_rps, cap.upper_bound_rate_rps) if level.rate_rps is not None else (cap.concurrency, cap.upper_bound)
    if held is not None:
        offered = _offered(words, cap_level) if cap_level is not None else ""
        holds = f"{words.subject} holds {_amount(held, level)}{offered} within {words.slos} with confidence"
    else:
        holds = f"No tested level holds {words.whose_slos} with confidence"
    if upper is not None and upper != held:
        # in the held figure's unit (a trace replay's rate read "up to 6.16389" beside "1.562× the traffic")
        holds += f", and up to {_amount(upper, level)} if the undecided {'levels hold' if len(undecided) > 1 else 'level holds'}"
    tail = f"; {fail_part}" if fail_part else ""
    if level.cut_short_by is not None:
        # not too close to a limit: stopped before a look could decide it (its checks' own words say how far)
        ran = max(0.0, level.end_wall - level.start_wall)
        return (f"{holds}; the verdict is uncertain because {level.cut_short_by} stopped the run "
                f"{ran:.1f} s into its level of {level.label}, before a look could decide it: {why}{tail}. "
                "A run left to finish that level can decide it.")
    return f"{holds}; the verdict is uncertain: {why}{tail}. Longer levels (load.max_level_duration_s) can decide it."

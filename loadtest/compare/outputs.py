"""A comparison for the places CI shows results: compare.json, JUnit XML, Markdown, the terminal.

Every output is rendered from the same :class:`~loadtest.compare.engine.Comparison`,
so they never disagree, and every one carries the warnings (a different SLO,
model or tool version).

* **JUnit**: one ``testcase`` per check (``itl_ms.p95 @ 4 users``; at a rate
  ``@ 4 req/s``, a trace speedup ``@ 1.5×``; ``capacity``) in one ``testsuite``. A check that fails the gate is a
  ``failure`` whose message holds its numbers; an inconclusive check that
  holds the gate is a ``failure`` under ``--inconclusive fail`` and
  ``skipped`` otherwise; the rest pass.
* **Markdown**: the verdict, the warnings, and only the checks worth a look
  (regressions, inconclusive ones, improvements), capped so it fits
  ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import json
import math
import os
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loadtest.analysis.capacity import confidence_pct
from loadtest import __version__
from loadtest.compare.capacity import CapacityBounds, capacity_words
from loadtest.compare.change import Change, fmt_change, shown_verdict
from loadtest.compare.engine import Comparison
from loadtest.compare.level_keys import CAPACITY_KEY, MODE_OF_UNIT, USERS
from loadtest.compare.rules import ABSOLUTE, COMPLETED_SHARE
from loadtest.compare.noise import fmt_band, fmt_interval, unknown_noise_words
from loadtest.report.summary import clean

MARKDOWN_ROWS = 25
COMPARE_FORMAT = 1


# -- compare.json -----------------------------------------------------------------------------


def change_dict(change: Change) -> dict[str, Any]:
    return {
        "name": change.name,
        "check": change.check,
        "kind": change.kind,
        "level": change.level,
        "baseline": change.baseline,
        "candidate": change.candidate,
        "change": change.change,
        "ci": list(change.ci),
        "relative": change.relative,
        "tolerance": change.tolerance,
        "verdict": change.verdict,
        "may_regress": change.may_regress,
        "gating": change.gating,
        "fails_gate": change.fails_gate,
        "holds_gate": change.holds_gate,
        "message": change.message,
        # the two kinds of noise side by side (run-to-run from the history, see compare/noise.py)
        "within_ci": list(change.within_ci) if change.within_ci is not None else None,
        "noise_ci": list(change.noise_ci) if change.noise_ci is not None else None,
        "noise_runs": change.noise_runs,
        "noise": change.noise or None,
        "within_noise_only": change.within_noise_only,
    }


def _side_dict(side) -> dict[str, Any]:
    cap = side.summary.get("capacity") or {}
    capacity = {
        "concurrency": cap.get("concurrency"),
        "verdict": cap.get("verdict"),
        "message": cap.get("message"),
        "bounds": side.bounds.to_dict(),
    }
    if side.unit != USERS:  # a rate run's capacity, in the summary's own key; bounds in the same unit
        capacity = {CAPACITY_KEY[side.unit]: cap.get(CAPACITY_KEY[side.unit]), **capacity}
    return {
        "path": side.label,
        "name": side.name,
        "started_wall": side.started_wall,
        "records": side.records,
        "capacity": capacity,
    }


def comparison_dict(cmp: Comparison) -> dict[str, Any]:
    rules = cmp.rules
    out = {
        "format": COMPARE_FORMAT,
        "tool_version": __version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "outcome": cmp.outcome,
        "exit_code": cmp.exit_code,
        "headline": cmp.headline,
        # what checks[].level and the capacity count: a rate run says so (a closed loop's are users, as always)
        **({"load_mode": MODE_OF_UNIT[cmp.unit]} if cmp.unit != USERS else {}),
        "confidence": cmp.confidence,
        "baseline": _side_dict(cmp.baseline),
        "candidate": _side_dict(cmp.candidate),
        "fingerprint": cmp.fingerprint,
        "slo": cmp.slo,
        "rules": {
            "tolerance": rules.tolerance,
            "error_rate_tolerance": rules.error_rate_tolerance,
            "per_check": rules.per_check,
            "fail_on": sorted(rules.fail_on),
            "inconclusive": rules.inconclusive,
        },
        "counts": {v: sum(1 for c in cmp.changes if c.verdict == v)
                   for v in ("regression", "inconclusive", "improvement", "unchanged")},
        "warnings": list(cmp.warnings),
        "baselines": list(cmp.baselines),
        "candidates": list(cmp.candidates),
        "history_runs": cmp.history_runs,
        "noise_confidence": cmp.noise_confidence,
        # the smallest changes that would fail the gate with these reference runs (compare/reach.py)
        "detectable": cmp.detectable,
        "checks": [change_dict(c) for c in cmp.changes],
        "cost": cmp.cost,
        # the compared runs that did not complete (run.json complete: false), as "candidate runs/x"
        "incomplete": list(cmp.incomplete),
    }
    return clean(out)


def write_json(path: Path, cmp: Comparison) -> Path:
    return write_text(path, json.dumps(comparison_dict(cmp), indent=2, allow_nan=False, ensure_ascii=False) + "\n")


# -- JUnit ----------------------------------------------------------------------------------


def junit_xml(cmp: Comparison) -> str:
    suite = ET.Element("testsuite", name=f"loadtest compare: {cmp.candidate.name or 'run'}")
    failures = skipped = 0
    for change in cmp.changes:
        case = ET.SubElement(suite, "testcase", classname=f"loadtest.compare.{change.kind}", name=change.name, time="0")
        if change.fails_gate or (change.holds_gate and cmp.rules.inconclusive == "fail"):
            failures += 1
            node = ET.SubElement(case, "failure", message=change.message, type=change.verdict)
            node.text = _case_detail(cmp, change)
        elif change.holds_gate:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"inconclusive: {change.message}")
        elif change.verdict == "regression":  # a regression --fail-on does not watch
            ET.SubElement(case, "system-out").text = f"not gated (--fail-on): {change.message}"
        elif change.within_noise_only:  # passes, but not as "unchanged": the noise is too wide to tell
            ET.SubElement(case, "system-out").text = f"{shown_verdict(change)}: {change.message}"
    lines = [f"warning: {w}" for w in cmp.warnings] + ([f"cost: {cmp.cost['sentence']}"] if cmp.cost else [])
    if lines:
        ET.SubElement(suite, "system-out").text = "\n".join(lines)
    suite.set("tests", str(len(cmp.changes)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _case_detail(cmp: Comparison, change: Change) -> str:
    lines = [
        change.message,
        f"baseline: {runs_text(cmp.baseline.label, cmp.baselines)}",
        f"candidate: {runs_text(cmp.candidate.label, cmp.candidates)}",
    ]
    lines += [f"warning: {w}" for w in cmp.warnings]
    return "\n".join(lines)


def write_junit(path: Path, cmp: Comparison) -> Path:
    return write_text(path, junit_xml(cmp))


# -- Markdown -------------------------------------------------------------------------------


def reference_runs_text(cmp: Comparison) -> str:
    """Where the run-to-run noise came from, and whether that is enough to know it.

    One text for compare.md and compare.html: the Markdown said "from 1 reference run(s)" without
    the page's "too few to know it", so a reader of the pull-request comment could take a held
    check's noise for measured.
    """
    few = "" if cmp.history_runs >= cmp.min_history else "; too few to know it: give --history"
    # the reference runs are the baselines and the history's runs; the candidates are judged, not counted
    baselines = len(cmp.baselines) or 1
    history = max(0, cmp.history_runs - baselines)
    return (f"{cmp.history_runs} reference run(s) of this workload ({baselines} baseline(s) and {history} from "
            f"--history; judged: {len(cmp.candidates) or 1} candidate(s){few})")

_ICONS = {"regression": "🔴", "inconclusive": "🟡", "improvement": "🟢", "unchanged": "⚪"}


def markdown(cmp: Comparison, *, rows: int = MARKDOWN_ROWS) -> str:
    icon = {"regression": "🔴", "inconclusive": "🟡", "pass": "🟢"}[cmp.outcome]
    b, c = cmp.baseline, cmp.candidate
    lines = [
        f"### {icon} loadtest compare: {c.name or 'run'}",
        "",
        f"**{cmp.headline}** Exit code {cmp.exit_code}.",
        "",
        f"{_side('Baseline', b.label, cmp.baselines)} ({_when(b.started_wall)}), "
        f"{_side('candidate', c.label, cmp.candidates)} ({_when(c.started_wall)}); "
        f"{confidence_pct(cmp.confidence)} intervals, tolerance {cmp.rules.tolerance * 100:g}% "
        f"(error rate {cmp.rules.error_rate_tolerance * 100:g} pp).",
        "",
    ]
    for warning in cmp.warnings:
        lines.append(f"> ⚠️ {warning}")
    if cmp.warnings:
        lines.append("")
    if cmp.cost:
        lines += [f"💲 Cost: {cmp.cost['sentence']}", ""]
    # as the terminal counts and lists them: a change past the tolerance that only the run-to-run noise
    # calls unchanged is named apart and shown (the headline speaks of it; the table had dropped it)
    noise_only = [ch for ch in cmp.changes if ch.verdict == "unchanged" and ch.within_noise_only]
    counts = {v: sum(1 for ch in cmp.changes if ch.verdict == v) for v in _ICONS}
    counts["unchanged"] -= len(noise_only)
    line = " · ".join(f"{_ICONS[v]} {n} {v}" for v, n in counts.items())
    if noise_only:
        line += f" · {_ICONS['unchanged']} {len(noise_only)} past the tolerance but within the run-to-run noise"
    lines += [line, ""]
    if cmp.history_runs:
        lines += [f"Run-to-run noise from {reference_runs_text(cmp)}.", ""]
    notable = [ch for ch in cmp.changes if ch.verdict != "unchanged" or ch.within_noise_only]
    noise = any(ch.noise_ci is not None for ch in cmp.changes)
    if notable:
        extra = " within-run | run-to-run noise |" if noise else ""
        lines += ["| | check | baseline | candidate | change [CI] |" + extra + " gate |",
                  "|---|---|---|---|---|" + ("---|---|" if noise else "") + "---|"]
        for ch in notable[:rows]:
            gate = "fails" if ch.fails_gate else ("holds" if ch.holds_gate else "")
            sides = f" {fmt_interval(ch.within_ci, ch.relative)} | {fmt_band(ch.noise_ci, ch.relative)} |" if noise else ""
            icon = _ICONS.get(ch.verdict, '') + (f" {shown_verdict(ch)}" if ch.within_noise_only else "")
            lines.append(
                f"| {icon} | {ch.name} | {_value(ch, ch.baseline, cmp.baseline.bounds)} | "
                f"{_value(ch, ch.candidate, cmp.candidate.bounds)} | {fmt_change(ch)} |{sides} {gate} |"
            )
        if len(notable) > rows:
            lines.append(f"\n… and {len(notable) - rows} more in compare.json.")
    return "\n".join(lines) + "\n"


def runs_text(label: str, paths: list[str]) -> str:
    """A side as the outputs name it: its run, or a group's runs (``run-01, run-02 of s3://…/nightly-…``).

    Why: for ``run --repeat 2`` the Markdown named ``…/run-01`` alone as the candidate, and only a
    warning said the verdict was on two runs."""
    if len(paths) < 2:
        return label
    parents = {p.rstrip("/").rpartition("/")[0] for p in paths}
    if len(parents) == 1 and "" not in parents:
        return f"{', '.join(p.rstrip('/').rpartition('/')[2] for p in paths)} of {parents.pop()}"
    return ", ".join(paths)


def _side(word: str, label: str, paths: list[str]) -> str:
    """``candidate `x` `` for one run; ``candidates `run-01, run-02 of x` `` for a group (its first run's time follows)."""
    return f"{word}{'s' if len(paths) > 1 else ''} `{runs_text(label, paths)}`"


def _value(change: Change, value: float | None, bounds: CapacityBounds | None = None) -> str:
    if value is None or math.isnan(value):
        return "–"
    if change.kind == "capacity" and bounds is not None and value == 0:
        return capacity_words(0, bounds)  # below its lowest level, not "0"
    if math.isinf(value):
        return "∞"
    if change.check == COMPLETED_SHARE:  # of the sends
        return f"{value * 100:.1f}%"
    if change.kind == "latency":
        return f"{value:.1f} ms"
    if change.kind == "throughput":
        return f"{value:,.1f} tok/s"
    if change.kind in ABSOLUTE:  # the error rate, the valid-output rate
        return f"{value * 100:.2f}%"
    return f"{value:g}"


def _when(wall: float | None) -> str:
    if wall is None:
        return "time unknown"
    return datetime.fromtimestamp(wall, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def write_markdown(path: Path, cmp: Comparison) -> Path:
    return write_text(path, markdown(cmp))


# -- terminal -------------------------------------------------------------------------------


def terminal_text(cmp: Comparison, *, rows: int = 15) -> str:
    lines = [cmp.headline]
    lines += [f"warning: {w}" for w in cmp.warnings]
    if cmp.cost:
        lines.append(f"cost: {cmp.cost['sentence']}")
    # a change beyond the tolerance that only the run-to-run noise calls unchanged is shown too
    shown = [ch for ch in cmp.changes if ch.verdict != "unchanged" or ch.within_noise_only][:rows]
    # Without a history every held speed check ends with the same words on the unknown noise: on
    # each of 14 lines they buried the figures. Said once under the list, each line keeps a mark.
    said = [ch.unknown_noise for ch in shown]
    repeated = {reason for reason in said if reason and said.count(reason) > 1}
    for ch, reason in zip(shown, said):
        mark = "FAIL" if ch.fails_gate else ("HOLD" if ch.holds_gate else "    ")
        message = ch.message
        if reason in repeated:
            message = message.replace(unknown_noise_words(reason), "; run-to-run noise unknown (below)")
        lines.append(f"  {mark} {shown_verdict(ch):<12} {message}")
    for reason in sorted(repeated):
        lines.append(f"  (below) run-to-run noise unknown: {reason}")
    noise_only = len(cmp.within_noise_only)
    unchanged = sum(1 for ch in cmp.changes if ch.verdict == "unchanged") - noise_only
    tail = f"; {noise_only} within the run-to-run noise only" if noise_only else ""
    lines.append(f"  {unchanged} of {len(cmp.changes)} checks unchanged within tolerance{tail}")
    return "\n".join(lines)


def write_text(path: Path, text: str) -> Path:
    """Write atomically (a reader never sees half a file), creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path

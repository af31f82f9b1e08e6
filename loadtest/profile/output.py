"""A profile's outputs: ``profile.json``, the terminal table and ``report.html`` (its own section).

Why one module: all three say the same things from one dict
(:func:`profile_dict`), so they cannot disagree. The plain-words sentences
come from :func:`loadtest.analysis.decode_fit.describe_decode` and
:func:`loadtest.analysis.prefill_fit.describe_prefill`, with the bound on each
side of the knee from the roofline when the hardware and model are known.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from rich.table import Table

from loadtest import __version__
from loadtest.analysis.bounds import slot_limit
from loadtest.analysis.decode_fit import describe_decode
from loadtest.analysis.prefill_fit import describe_prefill
from loadtest.analysis.roofline import Ceilings, ModelSize, fit_bound, read_decode, read_prefill
from loadtest.profile.runner import ProfileData
from loadtest.records import replace_text
from loadtest.run_files import REPORT_HTML
from loadtest.redact import public_url, scrub
from loadtest.report.page import PAGE_STYLE as page_style
from loadtest.report.plotting import figure_html
from loadtest.report.summary import clean

PROFILE_JSON = "profile.json"


def _r(value: float | None, digits: int = 4) -> float | None:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), digits)


def profile_dict(data: ProfileData, ceilings: Ceilings | None, model: ModelSize | None) -> dict[str, Any]:
    """Everything the profile found, JSON-safe."""
    roof = ceilings is not None and model is not None
    fleet = data.fleet
    prefill = None
    if data.prefill is not None:
        p = data.prefill
        prefill = {
            # a slope whose interval reaches zero has no rate to quote (1000 / 0.0001 ms is no 10M tokens/s)
            "fixed_ms": _r(p.fixed_ms), "ms_per_token": _r(p.ms_per_token, 5),
            "tokens_per_s": _r(p.tokens_per_s, 1) if p.measurable else None, "measurable": p.measurable,
            "fixed_ms_ci": [_r(x) for x in p.fixed_ci], "ms_per_token_ci": [_r(x, 5) for x in p.ms_per_token_ci],
            "tokens_per_s_ci": [_r(x, 1) for x in p.tokens_per_s_ci],
            "quadratic_ms_per_token2": _r(p.quadratic_ms_per_token2, 9), "quadratic_matters": p.quadratic_matters,
            "rms_ms": _r(p.rms_ms), "n": p.n, "points": p.points,
        }
        own = data.server_prefill
        prefill["server_ms_per_token"] = _r(own.ms_per_token, 5) if own else None
        prefill["server_agreement"] = _r(p.ms_per_token / own.ms_per_token - 1, 4) if own and own.ms_per_token > 0 else None
        reading = read_prefill(ceilings, model, p.ms_per_token) if roof and p.measurable else None
        prefill["roofline"] = reading.to_dict() if reading else None
        prefill["bound"] = reading.bound if reading else None
    decode = None
    sentences = []
    if data.decode is not None:
        d = data.decode
        context = data.context_tokens if math.isfinite(data.context_tokens) else 0.0
        points = []
        for pt in d.points:
            users = data.users.get(pt.sequences)
            serving = data.serving.get(pt.sequences, fleet.replicas)
            row = {"sequences": pt.sequences, "itl_p50_ms": _r(pt.itl_p50_ms), "itl_p95_ms": _r(pt.itl_p95_ms),
                   "tpot_p50_ms": _r(pt.tpot_p50_ms),
                   # the endpoint's (a fleet's: every replica's), and one replica's at this batch
                   "tokens_per_s": _r(pt.tokens_per_s, 1),
                   "tokens_per_s_per_replica": _r(fleet.tokens_per_s(pt.tokens_per_s, users, serving), 1),
                   # the replicas the level ran on: its sequences and tokens/s per replica are over this count
                   "replicas": serving,
                   "users": users, "fitted_ms": _r(d.step_ms(pt.sequences)),
                   "side": d.side(pt.sequences)}
            ctx = data.contexts.get(pt.sequences, context)
            reading = read_decode(ceilings, model, pt.itl_p50_ms, pt.sequences, ctx) if roof else None
            if reading is not None:
                row.update(reading.to_dict())
            else:
                row["bound"] = fit_bound(d, pt.sequences)
            row["bound_basis"] = "roofline" if reading is not None else "fit"
            points.append(row)
        low = [r for r in points if r["side"] == "flat"]
        high = [r for r in points if r["side"] == "steep"]
        bound_low = _majority(low) if roof and low else None
        bound_high = _majority(high) if roof and high else None
        decode = {
            "fixed_ms": _r(d.fixed_ms), "per_seq_ms": _r(d.per_seq_ms),
            "compute_ms_per_seq": _r(d.compute_ms_per_seq), "compute_intercept_ms": _r(d.compute_intercept_ms),
            "knee_sequences": _r(d.knee_sequences, 2), "rms_ms": _r(d.rms_ms), "context_tokens": _r(context, 1),
            # false: the step grows at least as fast as the batch, fixed_ms is no cost and every fit bound is
            # compute (DecodeFit.batching_pays); exact: no more batch sizes than parameters, rms_ms 0 by construction
            "batching_pays": d.batching_pays, "exact_fit": d.exact,
            "bound_below_knee": bound_low, "bound_above_knee": bound_high,
            # one user's ms per generated token as the server counts it (TPOT: a request's mean gap)
            "ms_per_token_1": _r(data.one_user.tpot_p50_ms if data.one_user is not None else math.nan),
            "points": points,
            "server_ms_per_token_1": _r(data.server_ms_per_token_1),
            "server_running_check": data.running_check,
        }
        decode["slots"], decode["slots_source"], slots_words = _slots(data)
        sentences.append(describe_decode(d, bound_low, bound_high))
        if slots_words:
            sentences.append(slots_words)
    if fleet.sentence():
        sentences.insert(0, fleet.sentence())
    if data.prefill is not None:
        text = describe_prefill(data.prefill)
        if prefill and prefill.get("bound"):
            text += f" ({prefill['bound']}-bound, {prefill['roofline']['efficiency']:.0%} of the compute floor)"
        sentences.append(text)
    target = data.scenario.target
    return clean({
        "format": 1,
        "name": data.scenario.name,
        "tool_version": __version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "target": {"base_url": public_url(target.base_url), "model": target.model, "api": target.api},
        # how many replicas the users were spread over (1: one server), and how that was learned
        "replicas": fleet.replicas,
        "replicas_source": fleet.source,
        "wall_s": _r(data.wall_s, 1),
        "complete": not data.interrupted,
        "runs": data.runs,
        "server_facts": data.server_facts,
        "hardware": None if ceilings is None else {
            "label": ceilings.label, "hbm_gbps": ceilings.bandwidth_bps / 1e9, "tflops": ceilings.flops / 1e12,
        },
        "model": None if model is None else {
            "params": model.params, "bytes_per_weight": _r(model.bytes_per_weight),
            "kv_bytes_per_token": model.kv_bytes_per_token,
        },
        "prefill": prefill,
        "decode": decode,
        "summary": sentences,
        "notes": data.notes,
    })


def _slots(data: ProfileData) -> tuple[float | None, str | None, str | None]:
    """(``decode.slots``, ``decode.slots_source``, the summary's sentence): where the ladder's batch stopped
    growing (``ladder``), else what the server says (``server``: llama.cpp's ``/props`` ``total_slots``).

    Why both: the ladder stops once the step has doubled, which on a server whose step grows with its
    batch is long before its slots (a 1-thread llama-server with 4 slots stopped at 2 sequences), so the
    batch never shows them; the server's own count still bounds every --max-batch.
    """
    seen = slot_limit(data.batches)
    told = data.server_facts.get("slots")
    if seen is not None:
        differs = f" (the server says {told}: /props total_slots)" if told and abs(told - seen) >= 1 else ""
        return seen, "ladder", (
            f"the server ran at most about {seen:g} sequences at once (its slots or batch limit){differs}: "
            "levels with more users queued for a slot, so the decode curve ends there, and a larger "
            "--max-batch measures nothing more")
    if told:
        return float(told), "server", (
            f"the server has {told} slots (its /props total_slots): it decodes at most {told} sequences at once, "
            f"so a --max-batch above {told} measures nothing more")
    return None, None, None


def _majority(rows: list[dict[str, Any]]) -> str | None:
    counts: dict[str, int] = {}
    for r in rows:
        if r.get("bound"):
            counts[r["bound"]] = counts.get(r["bound"], 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


def write_profile_json(folder: Path, profile: dict[str, Any]) -> Path:
    path = folder / PROFILE_JSON
    replace_text(path, scrub(json.dumps(profile, indent=2, allow_nan=False)) + "\n")
    return path


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "—" if value is None else format(value, spec)


def decode_fit_line(decode: dict[str, Any]) -> str:
    """The terminal's ``decode fit:`` line: the fitted numbers only where the model holds, and whether the
    points can check it.

    Why: a 1-thread llama.cpp server's fit read "fixed -1.55 ms + 2.627 ms/seq" (rms 0.0) as if both were
    found. A fixed cost below zero is no cost: the step grows faster than the batch and the line
    ``fixed + per_seq × n`` does not describe it (``batching_pays``, the rule the points' bound and the
    summary's sentence read too); and a fit through as many points as it has parameters passes through
    each of them whatever the curve, so its zero error says nothing (``exact_fit``).
    """
    n = len(decode.get("points") or [])
    if decode.get("batching_pays") is False:
        text = (f"decode fit: each added sequence costs {_fmt(decode['per_seq_ms'], '.3f')} ms; no fixed cost: the "
                "line's intercept falls below zero, which no cost can, so the model fixed + per-sequence × batch "
                "does not hold here (the step grows faster than the batch; see the sentence below)")
    else:
        text = (f"decode fit: fixed {_fmt(decode['fixed_ms'])} ms + {_fmt(decode['per_seq_ms'], '.3f')} ms/seq; "
                f"past the knee {_fmt(decode.get('compute_ms_per_seq'), '.3f')} ms/seq; "
                f"knee {_fmt(decode.get('knee_sequences'), '.1f')} sequences")
    if decode.get("exact_fit"):
        text += (f"; {n} batch size{'s' if n != 1 else ''} for as many fitted numbers: the fit passes through each "
                 "point (rms 0 by construction), so nothing checks it")
    return text


def _decode_columns(fleet: bool) -> tuple[str, ...]:
    """The decode table's columns; against a fleet the users beside each replica's sequences, and one
    replica's tokens/s (the endpoint's beside a replica's batch and step read as twice the throughput)."""
    if fleet:
        return ("users", "sequences per replica", "ITL p50 ms", "ITL p95 ms", "fitted ms", "tokens/s per replica",
                "bound", "efficiency")
    return ("sequences", "ITL p50 ms", "ITL p95 ms", "fitted ms", "tokens/s", "bound", "efficiency")


def _decode_cells(p: dict[str, Any], fleet: int) -> list[str]:
    """One point's cells; ``fleet``: the fleet's replicas where more than one, else 0."""
    eff = p.get("efficiency")
    tokens = p.get("tokens_per_s_per_replica") if fleet else p["tokens_per_s"]
    cells = [f"{p['sequences']:g}", _fmt(p["itl_p50_ms"]), _fmt(p["itl_p95_ms"]), _fmt(p["fitted_ms"]),
             _fmt(tokens, ".0f"), p.get("bound") or "—", "—" if eff is None else f"{eff:.0%}"]
    if fleet:
        # a level that ran on fewer replicas than the fleet's (one down) says on how many
        on = f" on {p['replicas']:g}" if p.get("replicas") and p["replicas"] < fleet else ""
        cells.insert(0, "—" if p.get("users") is None else f"{p['users']:g}{on}")
    return cells


def print_profile(profile: dict[str, Any], console: Any) -> None:
    """The terminal table: decode points with their bound, the fits, the sentences."""
    d = profile.get("decode")
    if d:
        fleet = (profile.get("replicas") or 1) > 1
        table = Table(title="decode: step time against batch size" + (f" (per replica: {profile['replicas']} replicas)" if fleet else ""))
        for col in _decode_columns(fleet):
            table.add_column(col, justify="right")
        for p in d["points"]:
            table.add_row(*_decode_cells(p, profile["replicas"] if fleet else 0))
        console.print(table)
        console.print(decode_fit_line(d))
    p = profile.get("prefill")
    if p:
        table = Table(title="prefill: TTFT against prompt length (1 user)")
        for col in ("prompt tokens", "TTFT p50 ms", "requests"):
            table.add_column(col, justify="right")
        for pt in p["points"]:
            table.add_row(str(pt["prompt_tokens"]), _fmt(pt["ttft_p50_ms"], ".1f"), str(pt["n"]))
        console.print(table)
        lo, hi = p["ms_per_token_ci"]
        slope = p["ms_per_token"]
        if slope is not None and slope > 0 and lo is not None and lo > 0:  # PrefillFit.measurable
            # an intercept below zero is no fixed cost (the curve bends upward): the slope alone, as describe_prefill
            fixed = (f"{_fmt(p['fixed_ms'], '.1f')} ms + " if (p.get("fixed_ms") or 0) >= 0 else "")
            console.print(
                f"prefill fit: {fixed}{_fmt(slope, '.4f')} ms/token "
                f"(95% CI {_fmt(lo, '.4f')}–{_fmt(hi, '.4f')}); {_fmt(p['tokens_per_s'], ',.0f')} tokens/s"
                + ("" if fixed else "; no fixed cost: the line's intercept is below zero (the curve bends upward)")
            )
        else:  # a flat or falling line: "-0.000 ms/token (nan tokens/s)" said nothing
            console.print(
                f"prefill fit: TTFT does not rise with prompt length ({_fmt(slope, '+.4f')} ms/token, 95% CI "
                f"{_fmt(lo, '.4f')}–{_fmt(hi, '.4f')}): prefill is too cheap to measure at these lengths"
            )
    if p and p.get("server_ms_per_token") is not None:
        console.print(f"the server's own timings of the same requests: prefill {p['server_ms_per_token']:.4f} ms/token")
    if d and d.get("server_ms_per_token_1") is not None:
        console.print(f"the server's own timings at one user: {d['server_ms_per_token_1']:.3f} ms per generated token")
    for sentence in profile.get("summary") or []:
        console.print(f"[bold]{sentence}[/]")
    for note in profile.get("notes") or []:
        console.print(f"[yellow]note:[/] {note}")


def _decode_figure(d: dict[str, Any], fleet: bool = False) -> go.Figure:
    xs = [p["sequences"] for p in d["points"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[p["itl_p50_ms"] for p in d["points"]], mode="markers", name="ITL p50 (measured)"))
    fig.add_trace(go.Scatter(x=xs, y=[p["fitted_ms"] for p in d["points"]], mode="lines", name="two-segment fit"))
    if any(p.get("memory_floor_ms") is not None for p in d["points"]):
        fig.add_trace(go.Scatter(x=xs, y=[max(p.get("memory_floor_ms") or 0, p.get("compute_floor_ms") or 0) for p in d["points"]],
                                 mode="lines", line=dict(dash="dot"), name="roofline floor"))
    if d.get("knee_sequences") is not None:
        fig.add_vline(x=d["knee_sequences"], line_dash="dash", line_color="#9a6700")
    fig.update_layout(title="Decode step (ITL) against batch size", xaxis_title="sequences decoding together" + (" (per replica)" if fleet else ""),
                      yaxis_title="ms per step", height=420)
    return fig


def _prefill_figure(p: dict[str, Any]) -> go.Figure:
    xs = [pt["prompt_tokens"] for pt in p["points"]]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[pt["ttft_p50_ms"] for pt in p["points"]], mode="markers", name="TTFT p50 (measured)"))
    fig.add_trace(go.Scatter(x=xs, y=[p["fixed_ms"] + p["ms_per_token"] * x for x in xs], mode="lines", name="linear fit"))
    fig.update_layout(title="Prefill: TTFT against prompt length, 1 user", xaxis_title="prompt tokens",
                      yaxis_title="TTFT ms", height=420)
    return fig


def profile_section(profile: dict[str, Any], figure_html: Any) -> str:
    """The ``<section id="profile">`` of a report: sentences, fits, figures, the per-point table."""
    e = html.escape
    parts = ["<section id='profile' class='profile'><h2>Why it is slow: prefill and decode</h2>"]
    parts += [f"<p class='headline'>{e(s)}</p>" for s in profile.get("summary") or []]
    d = profile.get("decode")
    if d:
        fleet = (profile.get("replicas") or 1) > 1
        parts.append(figure_html(_decode_figure(d, fleet)))
        rows = "".join(
            "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in _decode_cells(p, profile["replicas"] if fleet else 0))
            + "</tr>" for p in d["points"]
        )
        head = "".join(f"<th>{e(col)}</th>" for col in _decode_columns(fleet))
        parts.append(f"<table class='levels'><tr>{head}</tr>{rows}</table>")
    p = profile.get("prefill")
    if p:
        parts.append(figure_html(_prefill_figure(p)))
    parts += [f"<p class='how'>note: {e(n)}</p>" for n in profile.get("notes") or []]
    parts.append("</section>")
    return "\n".join(parts)


def write_profile_html(folder: Path, profile: dict[str, Any]) -> Path:
    title = html.escape(f"{profile.get('name') or 'loadtest'}: profile")
    runs = "".join(f"<li><a href='{html.escape(r)}/report.html'>{html.escape(r)}</a></li>" for r in profile.get("runs") or [])
    body = (
        f"<h1>{title}</h1>" + profile_section(profile, figure_html)
        + f"<h2>Runs</h2><ul>{runs}</ul>"
    )
    bundle = get_plotlyjs()
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>{page_style}</style>"
        f"<script type='text/javascript'>{bundle}</script></head><body>{scrub(body)}</body></html>\n"
    )
    path = folder / REPORT_HTML
    replace_text(path, page)
    return path

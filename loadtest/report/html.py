"""``report.html``: one self-contained page for the person who must size the deployment.

Reading order follows the decision: the verdict and what it means in replicas
first, then why (latency percentiles against concurrency with the SLO lines
and confidence bands), then what it buys (throughput, goodput, the knee), and
last the evidence a sceptic wants (distributions, the run's timeline, errors,
warnings, the exact scenario).

The file works offline and from an e-mail attachment: plotly.js is inlined
once in ``<head>`` (~4.8 MB) and every figure reuses it. Figure data is kept
small (≤ 2000 points per level and metric for distributions, ≤ 1500 time bins
for the timeline), so even a 100k-request run stays well under 8 MB.
"""

from __future__ import annotations

from pathlib import Path

from plotly.offline import get_plotlyjs

from loadtest.analysis.results import Analysis
from loadtest.records import replace_text
from loadtest.run_files import REPORT_HTML
from loadtest.redact import scrub
from loadtest.report.figures import (
    distribution_figure,
    knee_figure,
    latency_figure,
    throughput_figure,
    timeline_figure,
)
from loadtest.report.page import PAGE_STYLE, PRINT_SCRIPT
from loadtest.report.page import esc as _e
from loadtest.report.plotting import figure_html, load_words
from loadtest.report.sections import (
    errors_section,
    header,
    levels_table,
    plain_verdict,
    scenario_section,
    warnings_section,
)
from loadtest.report.cache_figure import has_prefix_cache, prefix_cache_figure
from loadtest.report.image_figure import has_images, image_figure
from loadtest.report.server_view import server_section
from loadtest.report.why_html import why_section
from loadtest.report.workload_figures import class_figure, has_classes, has_turns, turn_figure


__all__ = ["REPORT_HTML", "plain_verdict", "render_html", "write_html"]



def render_html(analysis: Analysis) -> str:
    """The whole report as one HTML string (plotly.js inlined once)."""
    has_data = any(lv.status != "no_data" for lv in analysis.levels)
    unary = analysis.unary  # embeddings, rerank, score: no stream to plot
    figures = []
    if has_data:
        figures = [
            (f"Latency against {load_words(analysis.levels)[2]}", latency_figure(analysis),
             "Each point is a level; a point above its dashed SLO line fails it. Lines: percentiles per level. Shaded: the confidence interval of each percentile an SLO uses "
             "(blocks of time resampled; its level is in the checks table). "
             "Dashed horizontal: SLO limits. Green dashed: capacity; red dotted: first failing level."),
        ]
        if has_prefix_cache(analysis):
            figures.append(("Prefix cache and TTFT", prefix_cache_figure(analysis),
                            "Green dotted (right axis): the share of prompt tokens the server served from its prefix "
                            "cache at each level (from its counters, else from the responses' cached_tokens). A hit "
                            "rate that falls as TTFT climbs is a cache evicted by the load: every miss is a prefill."))
        if has_images(analysis) and not unary:
            figures.append(("TTFT against images", image_figure(analysis),
                            "Images are prefill: a request's TTFT grows with its images' count and size. Left: TTFT "
                            "p50 (solid) and p95 (dotted) by images per request, a line per level. Right: each "
                            "request's TTFT against its images' encoded size (URLs, of unknown size, left out)."))
        if has_classes(analysis):
            figures.append(("Per request class", class_figure(analysis),
                            "Each class is judged by its own SLO; a level holds only if every class does. "
                            "The class whose curve crosses its own dashed limit first binds the capacity."))
        if has_turns(analysis) and not unary:
            figures.append(("TTFT by conversation turn", turn_figure(analysis),
                            "Later turns resend the history (earlier prompts and the answers streamed), "
                            "so their prefill is longer."))
        figures.append(
            ("Throughput and goodput", throughput_figure(analysis),
             "Goodput counts only requests that met every per-request limit; the gap to requests/s is "
             "traffic that was served too slowly to count."))
        if not unary:
            figures += _streaming_figures(analysis)
    figures.append(("Timeline", timeline_figure(analysis),
                    f"Grey steps: the {load_words(analysis.levels)[0]} in force (right axis); blue: requests started "
                    "per second; red bars: "
                    "failed requests. Shaded spans are warmups, not measured."))
    body = [f"<h1>{_e(analysis.name or 'Load test')}: capacity report</h1>", header(analysis)]
    body.append("<h2>Per level</h2>" + levels_table(analysis))
    if unary:
        api = (analysis.target or {}).get("api")
        body.append(f"<p class='how'><b>Not streamed:</b> {_e(NOT_STREAMED.replace('embeddings', str(api), 1))}</p>")
    return _page(analysis, body, figures, has_data)


#: Why an embeddings (rerank, score) report has fewer plots (and empty TTFT/ITL/TPOT panels).
NOT_STREAMED = (
    "target.api is embeddings: each answer is one JSON body, with no first token and no gaps between tokens. "
    "Latency is end to end (and TTFB); throughput is input tokens/s and items/s (inputs, documents or pairs; the per-level table and "
    "summary.json: levels[].input_tokens_per_s, levels[].items_per_s). The streaming-only plots (latency "
    "against output tokens/s, TTFT/ITL distributions, TTFT by turn) are left out, and the TTFT, ITL and "
    "TPOT panels of the latency figure stay empty."
)


def _streaming_figures(analysis: Analysis) -> list:
    """The figures that need a stream: TTFT/ITL against tokens/s and their distributions."""
    return [
        ("Latency against throughput", knee_figure(analysis),
         "Each point is a level, placed by the tokens/s it delivered and its latency. The knee: beyond it, "
         "more load adds latency but few tokens/s."),
        ("Distributions", distribution_figure(analysis),
         "One box per level: the line is the median, the box the middle half of the samples, the whiskers "
         "the spread; a box that climbs and widens from level to level is a queue forming."),
    ]


def _page(analysis: Analysis, body: list[str], figures: list, has_data: bool) -> str:
    body.append(why_section(analysis))
    for title, fig, note in figures:
        how = f"<p class='how'><b>How to read this:</b> {_e(note)}</p>" if note else ""
        body.append(f"<section class='figure'><h2>{_e(title)}</h2>{how}{figure_html(fig)}</section>")
    if has_data:
        body.append("<h2>Server view</h2>" + server_section(analysis, figure_html))
    body.append("<h2>Errors (measured windows)</h2>" + errors_section(analysis))
    body.append("<h2>Warnings</h2>" + warnings_section(analysis))
    body.append("<h2>Scenario</h2>" + scenario_section(analysis))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(analysis.name or 'loadtest')}: capacity report</title>"
        f"<style>{PAGE_STYLE}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script>"
        "</head><body>" + "\n".join(body) + PRINT_SCRIPT + "</body></html>\n"
    )


def write_html(run_dir: Path | str, analysis: Analysis) -> Path:
    """Write ``report.html`` atomically into the run folder."""
    path = Path(run_dir) / REPORT_HTML
    # Error messages and URLs must hold no secret; plotly's own bundle is left as it is.
    bundle = get_plotlyjs()
    replace_text(path, bundle.join(scrub(part) for part in render_html(analysis).split(bundle)))
    return path


# -- shared with loadtest.compare (its pages look and load like this one) ---------------------

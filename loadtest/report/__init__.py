"""Analysis → files and screens: ``summary.json``, ``report.html``, the terminal table.

Reports only read an :class:`~loadtest.analysis.Analysis`; they never
recompute a metric, so every output agrees with every other.
"""

from __future__ import annotations

from pathlib import Path

from loadtest.analysis.results import Analysis
from loadtest.report.autoscaling_yaml import AUTOSCALING_YAML, write_autoscaling_yaml
from loadtest.report.html import REPORT_HTML, render_html, write_html
from loadtest.report.summary import SUMMARY_JSON, summary_dict, write_summary
from loadtest.report.terminal import print_summary

__all__ = [
    "AUTOSCALING_YAML",
    "REPORT_HTML",
    "SUMMARY_JSON",
    "print_summary",
    "render_html",
    "summary_dict",
    "write_html",
    "write_reports",
    "write_summary",
]


def write_reports(run_dir: Path | str, analysis: Analysis, *, html: bool = True) -> dict[str, Path]:
    """Write ``summary.json``, ``autoscaling.yaml`` (and ``report.html``) into ``run_dir``; return their paths by kind."""
    run_dir = Path(run_dir)
    paths = {"summary": write_summary(run_dir, analysis), "autoscaling": write_autoscaling_yaml(run_dir, analysis)}
    if html:
        paths["html"] = write_html(run_dir, analysis)
    return paths

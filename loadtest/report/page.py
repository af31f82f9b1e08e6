"""The look every self-contained page shares: its CSS, its print script and HTML escaping.

``report.html``, ``compare.html``, the history page and the profile page use
the same style sheet, so a reader moving between them sees one tool.
"""

from __future__ import annotations

import html
from typing import Any


def esc(value: Any) -> str:
    """HTML-escaped text; ``None`` is the empty string."""
    return html.escape("" if value is None else str(value))


PAGE_STYLE = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:0 auto;max-width:1200px;
padding:16px 24px;color:#1f2328}
h1{font-size:1.5em;margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #d0d7de;padding-bottom:.2em}
.verdict{border-left:8px solid;padding:8px 16px;background:#f6f8fa;border-radius:6px}
.cap{font-size:2.2em;font-weight:700}.message{font-size:1.15em}
.facts th{text-align:left;padding-right:16px;color:#57606a;font-weight:600}.facts td{padding:2px 0}
table.grid{border-collapse:collapse;margin:8px 0;font-size:.9em}
table.grid th,table.grid td{border:1px solid #d0d7de;padding:3px 8px}table.grid th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}.dim{color:#6e7781}
.warnings li{color:#9a6700;margin:4px 0}pre{background:#f6f8fa;padding:12px;overflow:auto;font-size:.85em}
.calc{margin-top:10px;padding-top:8px;border-top:1px solid #d0d7de}.calc input{width:7em}
.headline{font-size:1.3em;font-weight:600;margin:.3em 0}.how{color:#57606a;margin:.2em 0 .4em}
@media print{
  @page{size:A4;margin:12mm}
  body{max-width:none;padding:0;font-size:10pt}
  *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
  .modebar-container,.calc{display:none!important}
  .verdict{background:none}
  h2{break-after:avoid}
  section.figure,.js-plotly-plot,table.grid tr,.verdict{break-inside:avoid}
  pre{white-space:pre-wrap;font-size:8pt}
}
"""

#: Plotly sizes figures to the window; a printed page is narrower, so figures are re-laid out
#: for printing and back afterwards ("Save as PDF" gives whole figures, not cut ones).
PRINT_SCRIPT = """<script>
(function () {
  function plots() { return Array.prototype.slice.call(document.querySelectorAll('.js-plotly-plot')); }
  var opened = [];
  window.addEventListener('beforeprint', function () {
    plots().forEach(function (p) { Plotly.relayout(p, {width: 700}); });
    opened = Array.prototype.filter.call(document.querySelectorAll('details'), function (d) { return !d.open; });
    opened.forEach(function (d) { d.open = true; });  // a printout shows what a click would
  });
  window.addEventListener('afterprint', function () {
    plots().forEach(function (p) { Plotly.relayout(p, {width: null, autosize: true}); Plotly.Plots.resize(p); });
    opened.forEach(function (d) { d.open = false; });
  });
})();
</script>"""

"""The web UI's charts page (``/loadtest/charts``): percentiles per level, drawn with plotly.js.

The page polls ``/loadtest/levels`` (:meth:`loadtest.load.webui.WebControl.levels_payload`)
and draws each metric it names (``metric_labels``: TTFT and ITL, or end-to-end latency for a
kind that is not streamed, with ``note`` saying why) against the level; plotly.js is served by
the same UI (:func:`plotly_js`), so the page works without a network.
"""

from __future__ import annotations

from plotly.offline import get_plotlyjs

_PLOTLY_JS: str | None = None


def plotly_js() -> str:
    """plotly.js, read once (the charts page loads it from this UI: no CDN)."""
    global _PLOTLY_JS
    if _PLOTLY_JS is None:
        _PLOTLY_JS = get_plotlyjs()
    return _PLOTLY_JS


CHARTS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>loadtest: levels against the SLOs</title><link rel="icon" href="data:,">
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
#status{font-size:1.1rem;margin:.5rem 0 1rem}
.plot{height:380px;max-width:1000px}
.how{color:#555;margin:.2rem 0 0}
a{color:#0b63c5}
</style>
<script src="./plotly.js"></script></head>
<body>
<h1>loadtest: <span id="name"></span></h1>
<div id="status">waiting for the run…</div>
<p class="how">Each point is a finished level: the percentile of its requests against its load (users, or the offered rate of an open-loop or trace level). Dashed lines are the SLO limits; a point above its line fails it.</p>
<p class="how" id="note"></p>
<div id="charts"></div>
<p><a href="../">Back to Locust's web UI</a></p>
<script>
const COLORS = {p50: "#1f77b4", p95: "#ff7f0e", p99: "#d62728"};
function draw(data) {
  document.getElementById("name").textContent = data.scenario;
  const cur = data.current ? `level ${data.current.index + 1}: ${data.current.label} (${data.current.elapsed_s.toFixed(0)} s)` : "none";
  let status = `phase: ${data.phase}; in force: ${cur}; next: ${data.next === null ? "none" : data.next}`;
  const el = document.getElementById("status");
  el.textContent = status;
  if (data.report) {
    el.textContent = `${data.verdict} `;
    const a = document.createElement("a"); a.href = "./report"; a.textContent = "Open the report"; el.appendChild(a);
  }
  document.getElementById("note").textContent = data.note || "";  // a kind that is not streamed: why no TTFT/ITL
  // a level's load: its users, or for an open-loop or trace level its offered rate (such a level holds no users)
  const load = l => (l.rate_rps === null || l.rate_rps === undefined) ? l.concurrency : l.rate_rps;
  const done = data.levels.filter(l => l.finished).sort((a, b) => load(a) - load(b));
  const rates = data.levels.some(l => l.rate_rps !== null && l.rate_rps !== undefined);
  for (const metric of Object.keys(data.metric_labels)) {  // one chart per metric the server sends
    if (!document.getElementById(metric)) {
      const div = document.createElement("div"); div.id = metric; div.className = "plot";
      document.getElementById("charts").appendChild(div);
    }
    const traces = [], shapes = [];
    for (const pct of done.length ? Object.keys(done[0][metric]) : []) {  // the percentiles the server sends
      traces.push({x: done.map(load), y: done.map(l => l[metric][pct]), name: pct,
                   mode: "lines+markers", line: {color: COLORS[pct]}});
    }
    const limits = data.slo[metric] || {};
    for (const [pct, limit] of Object.entries(limits)) {
      traces.push({x: [Math.min(...data.planned, ...done.map(load)), Math.max(...data.planned, ...done.map(load))],
                   y: [limit, limit], name: `SLO ${pct} ≤ ${limit} ms`, mode: "lines",
                   line: {color: COLORS[pct] || "#000", dash: "dash"}});
    }
    Plotly.react(metric, traces, {title: {text: `${data.metric_labels[metric]} per finished level`},
      xaxis: {title: {text: rates ? "offered rate (requests/s)" : "concurrent users"}, type: "log", tickvals: done.map(load)},
      yaxis: {title: {text: "ms"}, rangemode: "tozero"}, margin: {t: 40}});
  }
}
async function tick() {
  try { const r = await fetch("./levels"); if (r.ok) draw(await r.json()); } catch (e) {}
  setTimeout(tick, 2000);
}
tick();
</script></body></html>
"""

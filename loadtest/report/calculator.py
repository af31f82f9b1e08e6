"""The report's replicas calculator: peak users or requests/s in, replicas out, in the page's own script.

Apart from :mod:`loadtest.report.sections` (one idea per module): it sizes the way the cost
forecast and autoscaling.yaml's maxReplicas do, so it reads the same per-replica share and
headroom they read.
"""

from __future__ import annotations

import math

from loadtest.analysis.results import Analysis
from loadtest.analysis.run_cost import measured_replicas
from loadtest.report.page import esc as _e


def replicas_calculator(analysis: Analysis) -> str:
    """A two-field replica estimate, sized as the forecast and autoscaling.yaml's maxReplicas are.

    Peak users over one replica's capacity (a fleet's, split over its replicas) less the
    headroom, and peak req/s over one replica's goodput at capacity less the headroom, both
    rounded up (:func:`loadtest.analysis.cost.replicas_for`): the page and ``--peak-users``
    must give the same count for the same peak.
    """
    cap = analysis.capacity
    if cap.concurrency is None or cap.verdict == "no_data":
        return ""
    replicas = measured_replicas(analysis)
    headroom = getattr(analysis.autoscaling, "headroom", None)
    headroom = 0.2 if headroom is None else float(headroom)
    goodput = cap.goodput_rps if cap.goodput_rps is not None and math.isfinite(cap.goodput_rps) else 0.0
    users_each = cap.concurrency / replicas * (1.0 - headroom)
    good_each = goodput / replicas * (1.0 - headroom)
    basis = (f"each replica at most {users_each:.3g} users or {good_each:.3g} req/s: its share of the "
             f"capacity{f' of {replicas} replicas' if replicas > 1 else ''}, less the {headroom:.0%} headroom")
    return f"""
<div class="calc">
  <b>Replicas needed</b> (assumes identical replicas and an even load balancer; {_e(basis)}):
  peak concurrent users <input id="calc-users" type="number" min="0" value="{cap.concurrency * 4}">
  → <span id="calc-users-out"></span>;
  peak requests/s <input id="calc-rps" type="number" min="0" step="any" value="{max(1, round(goodput * 4, 1))}">
  → <span id="calc-rps-out"></span>
</div>
<script>
(function() {{
  var users = {users_each:.6f}, good = {good_each:.6f};
  function need(load, each) {{ return load <= 0 ? 0 : Math.max(1, Math.ceil(load / each - 1e-9)); }}
  function upd() {{
    var u = parseFloat(document.getElementById('calc-users').value) || 0;
    var r = parseFloat(document.getElementById('calc-rps').value) || 0;
    document.getElementById('calc-users-out').textContent = users > 0 ? need(u, users) + ' replicas' : 'n/a';
    document.getElementById('calc-rps-out').textContent = good > 0 ? need(r, good) + ' replicas' : 'n/a';
  }}
  document.getElementById('calc-users').addEventListener('input', upd);
  document.getElementById('calc-rps').addEventListener('input', upd);
  upd();
}})();
</script>"""

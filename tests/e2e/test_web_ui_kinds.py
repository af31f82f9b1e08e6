"""The live web UI of a kind that is not streamed: its data endpoint and levels tab carry e2e, not TTFT/ITL.

Run in a child interpreter: the web UI imports Locust, whose gevent patches must stay out of
pytest's process. The UI's own objects (WebControl over a parsed scenario, the run's level spans
and live progress) build the payload the charts page draws and the rows of the Levels tab.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.untimed

_CHILD = """
import json, sys, time
from loadtest.load.levels import LevelSpan
from loadtest.load.progress import LevelProgress, RunProgress
from loadtest.load.webui import WebControl
from loadtest.scenario import parse_scenario

api = sys.argv[1]
slo = {"e2e_ms": {"p95": 250}, "ttft_ms": None, "itl_ms": None} if api != "chat" else {"ttft_ms": {"p95": 800}}
scenario = parse_scenario({"name": "k", "target": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api": api},
                           "workload": {"batch_size": 4} if api != "chat" else {}, "load": {"levels": [2, 4]}, "slo": slo})
progress = RunProgress()
level = progress.levels[0] = LevelProgress(2)
level.requests = 20
level.e2e.extend(float(v) for v in range(10, 30))
now = time.time()
control = WebControl(scenario, [LevelSpan(0, 2, now - 3, now, decision={"verdict": "pass", "ended": "decided"})], progress)
payload = control.levels_payload()
print(json.dumps({"payload": payload, "rows": control._table_rows(), "table": control.metrics.level_table(),
                  "title": control.metrics.title()}, default=str))
"""


def _ui(api: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, api], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_embeddings_run_charts_e2e_against_its_slo_and_says_why():
    ui = _ui("embeddings")
    payload = ui["payload"]
    assert payload["metric_labels"] == {"e2e_ms": "end-to-end latency"}
    assert payload["slo"] == {"e2e_ms": {"p95": 250.0}}
    assert "target.api is embeddings" in payload["note"] and "no TTFT or ITL" in payload["note"]
    (level,) = payload["levels"]
    assert "ttft_ms" not in level and "itl_ms" not in level
    assert 10 < level["e2e_ms"]["p50"] < level["e2e_ms"]["p95"] < 30
    keys = [c["key"] for c in ui["table"]]
    assert "e2e_p95" in keys and not any(k.startswith(("ttft_", "itl_")) for k in keys)
    assert ui["rows"][0]["e2e_p95"] == f"{level['e2e_ms']['p95']:.1f}"
    assert ui["title"] == "Charts: end-to-end latency per level against the SLOs"


def test_a_chat_run_still_charts_ttft_and_itl():
    payload = _ui("chat")["payload"]
    assert list(payload["metric_labels"]) == ["ttft_ms", "itl_ms"] and payload["note"] is None
    assert payload["slo"] == {"ttft_ms": {"p95": 800.0}}

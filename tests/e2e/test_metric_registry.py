"""The metric registry is the one list: every surface shows what its flags say, and nothing else.

Each test reads a real surface (the scenario schema, the --slo parser, a real
summary.json, the terminal table, the report's HTML, the web UI's table) built
from a synthetic run, and compares what it shows with the registry's flags.
A metric added to the registry without its computation, or a surface that
keeps a list of its own, fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from rich.console import Console

from loadtest.analysis import analyze_run
from loadtest.analysis.slo import SloSpec
from support.synthetic import write_sample_run
from loadtest.errors import InputError
from loadtest.metric_registry import BY_NAME, LATENCY_METRICS, METRICS, PERCENTILES, SLO_METRICS, names, shown
from loadtest.report.html import render_html
from loadtest.report.summary import summary_dict
from loadtest.report.terminal import build_table
from loadtest.scenario import parse_scenario

#: Nothing here measures time: it runs in make test's parallel pass.
pytestmark = pytest.mark.untimed

PACKAGE = Path(__file__).resolve().parents[2] / "loadtest"


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return analyze_run(write_sample_run(tmp_path_factory.mktemp("run")))


def test_every_slo_metric_is_a_scenario_key_and_an_override_and_nothing_else():
    for name in (m.name for m in METRICS):
        block = {name: {"p95": 100}}
        override = f"{name}.p95=100"
        if BY_NAME[name].slo:
            scenario = parse_scenario({"name": "x", "load": {"levels": [1]}, "slo": block})
            assert [c.name for c in scenario.slo.checks] == [f"{name}.p95"]
            assert [c.name for c in SloSpec.from_dict({}).with_overrides([override]).checks] == [f"{name}.p95"]
        else:
            with pytest.raises(InputError, match=f"slo.{name}: unknown SLO metric"):
                parse_scenario({"name": "x", "load": {"levels": [1]}, "slo": block})
            with pytest.raises(InputError, match="unknown metric"):
                SloSpec.from_dict({}).with_overrides([override])
    # the scenario's stored form names every SLO metric (the schema), in registry order
    dumped = parse_scenario({"name": "x", "load": {"levels": [1]}}).model_dump()["slo"]
    assert list(dumped) == [*SLO_METRICS, "max_error_rate"]


def test_every_percentile_is_an_slo_percentile_and_a_reported_one(analysis):
    summary = summary_dict(analysis)
    level = summary["levels"][0]
    for metric in LATENCY_METRICS:
        assert [k for k in level[metric] if k in PERCENTILES or k.startswith("p")] == list(PERCENTILES)
    for pct in PERCENTILES:
        assert SloSpec.from_dict({"itl_ms": {pct: 50}}).checks[0].percentile == pct
    with pytest.raises(InputError, match="unknown percentile 'p42'"):
        SloSpec.from_dict({"itl_ms": {"p42": 50}})


def test_summary_has_a_stats_block_per_latency_metric_and_a_definition_per_metric(analysis):
    summary = summary_dict(analysis)
    level = summary["levels"][0]
    for m in METRICS:
        assert summary["definitions"][m.name] == m.definition
        assert (m.name in level) and (isinstance(level[m.name], dict) == (m.kind == "latency")), m.name
    assert summary["definitions"]["percentiles"]


def _header_cells(table) -> list[str]:
    return [str(c.header) for c in table.columns]


def test_terminal_columns_are_the_terminal_metrics(analysis):
    headers = _header_cells(build_table(analysis))
    latency = [h for h in headers if re.match(r"^\S+ p\d\d$", h)]
    assert [h.split()[0] for h in latency] == [BY_NAME[m].label for m in names(terminal=True)]
    Console(width=200, record=True).print(build_table(analysis))  # it renders


def test_report_table_and_figures_show_the_report_metrics(analysis):
    page = render_html(analysis)
    heads = re.findall(r"<th>([^<]+ p\d\d)</th>", page)
    expected = [f"{m.short_label} {pct}" for m in METRICS for pct in m.report_table]
    assert heads[: len(expected)] == expected
    for m in shown("report_figure"):
        assert f"{m.label} (" in page, m.name
    for m in METRICS:
        if m.kind == "latency" and not (m.report_figure or m.report_table or m.report_knee or m.per_class):
            assert f"{m.label} p" not in page and f"{m.label} (" not in page, m.name


_WEB_UI_CHILD = """
import json
from loadtest.load import webui
print(json.dumps({"keys": [c["key"] for c in webui.LEVEL_TABLE], "charts": list(webui.CHART_METRICS),
                  "percentiles": webui.SHOWN_PERCENTILES}))
"""


def test_web_ui_shows_the_web_ui_metrics():
    """In a child interpreter: the web UI imports Locust, whose gevent patches must stay out of pytest's process."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _WEB_UI_CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    webui = json.loads(out.stdout.strip().splitlines()[-1])
    keys = [key for key in webui["keys"] if re.match(r".+_p\d\d$", key)]
    assert keys == [f"{m.name.removesuffix('_ms')}_{pct}" for m in shown("web_ui") for pct in m.web_ui_table]
    assert tuple(webui["charts"]) == tuple(m.name for m in shown("web_ui"))
    assert webui["percentiles"] == {p: q * 100 for p, q in PERCENTILES.items() if p in ("p50", "p95", "p99")}


#: Modules that may still spell out several metric names, each for a reason that is not a list of
#: metrics to show or accept: the registry itself, and computations over raw record columns.
COMPUTATION = {
    "metric_registry.py",
    # cuts a request at its level's hold end: the raw timestamps of the record that the cut changes
    "analysis/hold_cut.py",
    # warns that e2e and TPOT need whole requests at one level: a property of those two computations
    "analysis/caveats.py",
}


def _metric_tuples(path: Path) -> list[tuple[int, list[str]]]:
    """Literal tuples/lists/sets of two or more metric names in a module (a list of its own)."""
    latency = set(LATENCY_METRICS)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            hits = [i for i in items if i in latency]
            if len(hits) >= 2 and len(hits) == len(items):
                found.append((node.lineno, hits))
    return found


@pytest.mark.parametrize("area", ["analysis", "report", "compare", "scenario", "load/webui.py"])
def test_no_module_keeps_its_own_list_of_metrics(area):
    root = PACKAGE / area
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    lists = {
        str(f.relative_to(PACKAGE)): hits
        for f in files
        if str(f.relative_to(PACKAGE)) not in COMPUTATION and (hits := _metric_tuples(f))
    }
    assert not lists, f"metric lists outside the registry: {lists}"

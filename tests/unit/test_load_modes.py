"""Load modes are types (loadtest/load/modes.py), chosen once: nothing else asks ``load.open_loop``.

Each mode is checked against the scenario it comes from (levels, the most
users at once, its one-line description, how refine bisects), and the package
is scanned: a branch on ``<load>.open_loop`` outside modes.py fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from loadtest.analysis.refine import next_refine_level, next_refine_rate
from loadtest.load.live import level_label
from loadtest.load.modes import ClosedLoop, OpenLoop, load_mode
from loadtest.run_record import RunRecord
from loadtest.scenario import parse_scenario

PACKAGE = Path(__file__).resolve().parents[2] / "loadtest"


def _scenario(**load):
    return parse_scenario({
        "name": "modes", "target": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "workload": {"max_tokens": 8}, "load": {"level_duration_s": 2, "warmup_s": 0, **load},
    })


class _Level:
    """What refine reads of an analysed level: its rate and whether it passed."""

    def __init__(self, rate_rps, passed):
        self.rate_rps, self.passed = rate_rps, passed


def test_closed_loop_levels_users_and_description_come_from_the_scenario():
    mode = load_mode(_scenario(start=2, step=2, max=8, step_mode="multiply"))
    assert isinstance(mode, ClosedLoop) and mode.name == "closed_loop"
    assert mode.levels() == [2, 4, 8] and mode.max_users() == 8
    assert mode.describe() == "levels 2, 4, 8"


def test_open_loop_levels_users_and_description_come_from_the_scenario():
    mode = load_mode(_scenario(rates=[1, 2.5], max_in_flight=40, arrival="poisson"))
    assert isinstance(mode, OpenLoop) and mode.name == "open_loop"
    assert mode.levels() == [1.0, 2.5] and mode.max_users() == 40
    assert mode.describe() == "rates 1, 2.5 req/s (poisson arrivals)"


def test_a_planned_level_is_named_as_its_span_will_be_by_the_live_views_label():
    """What the web UI names its next level with: the (concurrency, rate) the shape's span records, so
    the label is the terminal's (live.level_label), never "0 users" for a rate."""
    closed = load_mode(_scenario(levels=[2, 8]))
    assert [closed.level_load(level) for level in closed.levels()] == [(2, None), (8, None)]
    assert [level_label(*closed.level_load(level)) for level in closed.levels()] == ["2 users", "8 users"]
    assert level_label(1, None) == "1 user"
    opened = load_mode(_scenario(rates=[1, 2.5]))
    assert [opened.level_load(level) for level in opened.levels()] == [(0, 1.0), (0, 2.5)]
    assert [level_label(*opened.level_load(level)) for level in opened.levels()] == ["1 req/s", "2.5 req/s"]
    assert level_label(*opened.level_load(6.0), 3.0) == "2× the trace window"  # a trace replay's rate level


def test_each_mode_refines_on_its_own_axis():
    closed = [(8, True), (16, False)]
    assert load_mode(_scenario(levels=[8, 16])).next_refine(closed, None) == next_refine_level(closed) == 12
    rates = [_Level(4.0, True), _Level(8.0, False)]
    opened = load_mode(_scenario(rates=[4, 8]))
    assert opened.next_refine(rates, 0.5) == next_refine_rate(rates, 0.5)
    assert 4.0 < opened.next_refine(rates, 0.5) < 8.0


def test_every_mode_name_is_one_the_run_record_accepts():
    allowed = RunRecord.model_fields["load_mode"].annotation.__args__
    for cls in (ClosedLoop, OpenLoop):
        assert cls.name in allowed
        RunRecord(load_mode=cls.name)  # would raise for a name the record does not define


def open_loop_branches(source: str) -> list[int]:
    """Lines that read ``<something>.load.open_loop`` or ``load.open_loop`` (the boolean the modes replace)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "open_loop":
            value = node.value
            named_load = (isinstance(value, ast.Name) and value.id == "load") or (
                isinstance(value, ast.Attribute) and value.attr == "load")
            if named_load:
                out.append(node.lineno)
    return out


def test_only_the_modes_module_asks_whether_the_load_is_open_loop():
    assert open_loop_branches("if scenario.load.open_loop:\n    pass\nx = load.open_loop\n") == [1, 3]
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py")) if path.name != "modes.py" or path.parent.name != "load"
        for line in open_loop_branches(path.read_text(encoding="utf-8"))
    ]
    assert not found, "branch on the load mode through loadtest.load.modes.load_mode(), not load.open_loop:\n" + "\n".join(found)

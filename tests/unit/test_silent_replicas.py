"""A fleet with a replica down, as pure functions over synthetic samples (no sockets).

The trial that found it: 2 replicas declared behind nginx least_conn, one killed; nginx sent every
request to the other, whose /metrics answered every scrape with the whole load in its running
gauge, while every scrape of the dead one was refused. The run said "no replica reported running
requests", split 32 users as "16 a replica", fitted the decode curve on half the batches, and only
warned that scrapes failed "(the load was not affected)". Here the same samples are built by hand:
a replica is either up with a running gauge, or down (only ``up`` = 0 with a refusal).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze
from loadtest.analysis.fleet import Imbalance, imbalance_sentence
from loadtest.analysis.silent_replicas import LevelReporting, answered_frame, serving_replicas, silent_in
from loadtest.analysis.slo import SloSpec
from loadtest.report.summary import summary_dict
from loadtest.scrape.sources import replica_ids
from loadtest.scrape.store import UP
from support.synthetic import itl_bound_fleet_run, to_frame

LEVELS = [2, 4, 6, 8]
LEVEL_S = 10.0
REFUSED = '{"error":"cannot connect (ConnectError: [Errno 111] Connection refused)"}'
URLS = ["http://127.0.0.1:9000/metrics", "http://127.0.0.1:9001/metrics"]
DOWN = "127.0.0.1:9001"

#: running requests of replica ``r`` at ``c`` users (None: its metrics refuse the scrape)
Running = Callable[[int, int], "float | None"]


def _analyze(running: Running, urls=URLS, declared: int | None = 2, gauge: bool = True):
    """Closed loop, ITL = 10·c ms (SLO: ITL p95 ≤ 65, so capacity 6, first failing 8)."""
    rows, run = itl_bound_fleet_run(LEVELS, LEVEL_S)
    plan = run["levels"]
    run["server_metrics"] = {"enabled": True, "url": None, "urls": urls, "interval_s": 0.5, "signals": []}
    if declared:
        run["target"] = {**(run.get("target") or {}), "replicas": declared}
    samples = []
    for lv in plan:
        c = lv["concurrency"]
        for t in np.arange(lv["start_wall"] + 0.25, lv["end_wall"], 0.5):
            for r, rid in enumerate(replica_ids(urls)):
                value = running(c, r)
                if value is None:
                    samples.append({"wall": t, "metric": UP, "labels": REFUSED, "value": 0.0, "type": "gauge",
                                    "replica": rid})
                    continue
                metrics = [("vllm:num_requests_running", value), ("vllm:num_requests_waiting", 0.0)] if gauge else []
                for metric, v in metrics + [("vllm:kv_cache_usage_perc", value / 16), (UP, 1.0)]:
                    samples.append({"wall": t, "metric": metric, "labels": "{}", "value": v, "type": "gauge",
                                    "replica": rid})
    a = analyze(to_frame(rows), run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=pd.DataFrame(samples),
                resamples=200)
    return a, summary_dict(a)


def _one_carries_all(c: int, r: int) -> float | None:
    return float(c) if r == 0 else None


def _level(s, c):
    return next(lv for lv in s["levels"] if lv["concurrency"] == c)


def test_a_replica_down_is_named_first_with_its_url_and_what_it_does_to_the_figures():
    _, s = _analyze(_one_carries_all)
    first = s["warnings"][0]
    assert f"replica {DOWN} (http://{DOWN}/metrics) never answered its metrics" in first, first
    assert "Connection refused" in first and "may be down" in first
    consequence = next(w for w in s["warnings"] if "ran the whole load" in w)
    # it says which figures follow the gauges and which still divide by the declared count, and by how much
    assert "divide by the declared 2 (target.replicas)" in consequence
    assert "1 replica held all 6 users, not 3 a replica" in consequence
    assert "count 2× the replicas that served" in consequence
    assert "declare target.replicas: 1" in consequence
    # the refusals are that replica's warning, not "those moments have no server view (the load was not affected)"
    assert not [w for w in s["warnings"] if "the load was not affected" in w], s["warnings"]
    assert s["server_metrics"]["silent_replicas"] == [{
        "id": DOWN, "url": f"http://{DOWN}/metrics", "scrapes": s["server_metrics"]["silent_replicas"][0]["scrapes"],
        "answered": 0, "error": "cannot connect (ConnectError: [Errno 111] Connection refused)", "levels": LEVELS}]
    assert s["server_metrics"]["scrapes"]["failed"] > 0  # still counted


def test_the_live_replicas_gauge_is_read_and_the_split_per_replica_follows_it():
    a, s = _analyze(_one_carries_all)
    for c in LEVELS:
        level = _level(s, c)
        assert level["server"]["vllm:num_requests_running"]["p50"] == c  # was null: no round had both replicas
        assert level["silent_replicas"] == [DOWN] and level["replicas_serving"] == 1
        assert level["bound"] is None or level["bound"]["sequences"] == pytest.approx(c, abs=0.5)
    message = s["autoscaling"]["fleet_message"]
    assert "no replica reported" not in message, message
    assert f"at 6 users {DOWN} did not answer its metrics, and the 1 replica that did ran 6 requests, the whole load" in message
    limit = s["capacity_limit"]
    assert limit["users"] == 8 and "at 8 users (all on 1 of the 2 replicas" in limit["sentence"], limit
    assert "4 a replica" not in limit["sentence"]
    # the planning figures keep the declared count, and the warning above says so
    assert s["target"]["replicas"] == 2 and s["capacity"]["per_replica"] == 3
    assert s["autoscaling"]["target_concurrency_per_replica"] == 2


def test_a_replica_serving_with_its_metrics_unreachable_keeps_the_even_split():
    # the other replica reports its half: the silent one served, only its metrics did not answer
    _, s = _analyze(lambda c, r: c / 2 if r == 0 else None)
    for c in LEVELS:
        assert _level(s, c)["silent_replicas"] == [DOWN] and _level(s, c)["replicas_serving"] is None
        assert _level(s, c)["server"]["vllm:num_requests_running"]["p50"] == c / 2  # the one that answered
    assert "seems to have served all the same" in " ".join(s["warnings"])
    assert not [w for w in s["warnings"] if "ran the whole load" in w]
    # the in-flight shortfall is not blamed on "something queues in between": the silent replica says why
    assert not [w for w in s["warnings"] if "something queues in between" in w]
    message = s["autoscaling"]["fleet_message"]
    assert "no replica reported" not in message and "cannot show a balance alone" in message, message
    assert "at 8 users (4 a replica)" in s["capacity_limit"]["sentence"]


def test_without_a_running_gauge_it_cannot_be_told_and_the_run_says_so():
    _, s = _analyze(_one_carries_all, gauge=False)
    assert f"replica {DOWN}" in s["warnings"][0]
    assert any("cannot be told" in w and "as if it did" in w for w in s["warnings"]), s["warnings"]
    assert all(lv["replicas_serving"] is None for lv in s["levels"])


def test_a_replica_that_stops_answering_is_named_from_that_level_on():
    # both serve evenly up to 4 users; from 6 on one is gone and the other holds all
    _, s = _analyze(lambda c, r: c / 2 if c <= 4 else (float(c) if r == 0 else None))
    first = s["warnings"][0]
    assert f"replica {DOWN} (http://{DOWN}/metrics) stopped answering its metrics at 6 users" in first, first
    assert _level(s, 4)["silent_replicas"] == [] and _level(s, 4)["replicas_serving"] is None
    assert _level(s, 4)["imbalance"] == 1.0
    assert _level(s, 6)["replicas_serving"] == 1 and _level(s, 8)["replicas_serving"] == 1
    assert s["server_metrics"]["silent_replicas"][0]["levels"] == [6, 8]


def test_a_healthy_fleet_has_no_silent_replica():
    _, s = _analyze(lambda c, r: c / 2)
    assert all(lv["silent_replicas"] == [] and lv["replicas_serving"] is None for lv in s["levels"])
    assert s["server_metrics"]["silent_replicas"] == []
    assert not [w for w in s["warnings"] if "may be down" in w]


def test_one_replica_listed_and_answering_has_nothing_silent():
    _, s = _analyze(lambda c, r: float(c), urls=URLS[:1], declared=None)
    assert all(lv["silent_replicas"] == [] and lv["replicas_serving"] is None for lv in s["levels"])


# -- the pure pieces ------------------------------------------------------------------------------------


def test_silent_means_scraped_in_the_window_and_never_answered():
    up = pd.DataFrame({"wall": [0, 0, 1, 1, 2], "metric": UP, "labels": "{}", "value": [1, 0, 0, 0, 1],
                       "type": "gauge", "replica": ["a", "b", "a", "b", "a"]})
    frame = answered_frame(up, ["a", "b", "c"])
    assert silent_in(frame, 0, 3) == ["b"]  # a answered once; c was never scraped: not silent
    assert silent_in(frame, 1, 2) == ["a", "b"]
    assert silent_in(frame, 5, 9) == []


@pytest.mark.parametrize("live,total,in_flight,client,serving", [
    (1, 2, 32, 32, 1),     # the whole load on the one that answered
    (1, 2, 12, 16, 1),     # at the midpoint (0.75 of it): carried
    (1, 2, 11, 16, None),  # below it: about its share
    (1, 2, 8, 16, None),   # its share: the silent one served
    (2, 3, 9, 9, 2),       # 2 of 3 held all 9
    (2, 3, 6, 9, None),    # 2 of 3 held their two thirds
    (1, 2, 1, 1, None),    # one request: any replica holds all of it
    (1, 2, None, 16, None),  # no gauge
    (2, 2, 16, 16, None),  # nobody silent
])
def test_who_carried_the_load(live, total, in_flight, client, serving):
    assert serving_replicas(live, total, in_flight, client) == serving


def test_the_balance_sentence_names_the_silent_replica_and_the_balance_among_the_others():
    rep = LevelReporting(live=["a", "b"], silent=["c"], in_flight=6, client_in_flight=9)
    text = imbalance_sentence(3, 9, Imbalance(ratio=1.2, busiest=3.6, mean=3, n=10), reporting=rep)
    assert text.startswith("3 replicas; at 9 users c did not answer its metrics; among the 2 that did, the busiest ran 3.6")
    assert "no replica reported" not in imbalance_sentence(2, 9, None, reporting=LevelReporting(["a"], ["b"], 4, 9))
    # every replica silent: then indeed none reported
    everyone = LevelReporting(live=["a", "b"], silent=["a", "b"])
    assert "no replica reported running requests" in imbalance_sentence(2, 9, None, reporting=everyone)


def test_a_shortfall_where_requests_failed_is_no_sign_that_the_silent_replica_served():
    """Seen behind nginx: the live replica's 2 slots full at 3 users and the third request refused (429)
    read 2 of 3 in flight, about an even share; a refused request holds no slot, so it cannot be told."""
    from types import SimpleNamespace

    from loadtest.analysis.silent_replicas import ReplicaScrapes, silence_warnings

    levels = [SimpleNamespace(index=0, concurrency=2, rate_rps=None, load=2.0),
              SimpleNamespace(index=1, concurrency=3, rate_rps=None, load=3.0)]
    reporting = {0: LevelReporting(["a"], ["b"], in_flight=2, client_in_flight=2, serving=1),
                 1: LevelReporting(["a"], ["b"], in_flight=2, client_in_flight=3, failed=True)}
    scrapes = {"a": ReplicaScrapes(20, 20), "b": ReplicaScrapes(20, 0, "refused", [0, 1])}
    out = silence_warnings(reporting, scrapes, levels, {"b": "http://b/metrics"}, 2, "declared", levels[0])
    assert out[0].startswith("server metrics: replica b (http://b/metrics) never answered its metrics (20 scrapes, none")
    assert "at 2 users the replicas that answered ran the whole load" in out[1]
    assert "1 replica held all 2 users, not 1 a replica" in out[1]
    assert "at 3 users whether a replica whose metrics did not answer served cannot be told" in out[2]
    assert not [w for w in out if "seems to have served" in w]
    reporting[1].failed = False  # the same count with every request served: a share
    assert "seems to have served" in " ".join(silence_warnings(reporting, scrapes, levels, {}, 2, "declared", levels[0]))

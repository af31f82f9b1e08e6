"""Fleets as pure functions over synthetic samples: per replica, fleet sum, per-pod thresholds,
imbalance, the mixed-replica check, the Prometheus query and the scenario's new fields."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze
from loadtest.analysis.fleet import imbalance_sentence, resolve_replicas
from loadtest.analysis.slo import SloSpec
from loadtest.report.summary import summary_dict
from loadtest.scenario._target import Target
from loadtest.scrape.mixed import mixed_sources
from loadtest.scrape.prometheus import matrix_columns, series_query, step_for
from loadtest.scrape.sources import replica_ids
from loadtest.scrape.store import UP
from support.synthetic import itl_bound_fleet_run, to_frame

LEVELS = [2, 4, 6, 8]
LEVEL_S = 10.0


def _fleet_run(shares: list[float], replicas_declared: int | None = None, round_s: float = 0.5):
    """Closed loop where ITL = 10·c ms; replica r runs c × shares[r] requests (shares sum to 1)."""
    rows, run = itl_bound_fleet_run(LEVELS, LEVEL_S)
    plan = run["levels"]
    urls = [f"http://127.0.0.1:{9000 + i}/metrics" for i in range(len(shares))]
    run["server_metrics"] = {"enabled": True, "url": None, "urls": urls, "interval_s": round_s, "signals": []}
    if replicas_declared:
        run["target"] = {**(run.get("target") or {}), "replicas": replicas_declared}
    ids = replica_ids(urls)
    samples = []
    for lv in plan:
        c = lv["concurrency"]
        for t in np.arange(lv["start_wall"] + 0.25, lv["end_wall"], round_s):
            for rid, share in zip(ids, shares):
                running = c * share
                for metric, value in (("vllm:num_requests_running", running), ("vllm:num_requests_waiting", 0.0),
                                      ("vllm:kv_cache_usage_perc", running / 16), (UP, 1.0)):
                    samples.append({"wall": t, "metric": metric, "labels": "{}", "value": value,
                                    "type": "gauge", "replica": rid})
    return to_frame(rows), run, pd.DataFrame(samples)


def _analyze(shares, **kw):
    requests, run, samples = _fleet_run(shares, **kw)
    return analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=samples, resamples=200)


def test_an_even_fleet_sums_running_keeps_per_pod_thresholds_and_reports_balance():
    a = _analyze([0.5, 0.5])
    s = summary_dict(a)
    assert s["capacity"]["concurrency"] == 6  # 60 ms at 6 users, 80 at 8
    lv6 = next(lv for lv in s["levels"] if lv["concurrency"] == 6)
    assert lv6["server"]["vllm:num_requests_running"]["p50"] == 6  # the fleet's sum, as for one server
    assert [r["id"] for r in lv6["server"]["replicas"]] == ["127.0.0.1:9000", "127.0.0.1:9001"]
    assert all(r["signals"]["vllm:num_requests_running"]["p50"] == 3 for r in lv6["server"]["replicas"])
    assert lv6["imbalance"] == 1.0
    assert s["target"]["replicas"] == 2 and s["target"]["replicas_source"] == "metrics"
    assert s["capacity"]["per_replica"] == 3
    running = next(x for x in s["autoscaling"]["signals"] if x["role"] == "running")
    assert running["at_capacity"]["p50"] == 3  # per pod, as an HPA averages
    assert running["threshold"] == pytest.approx(3 * 0.8)
    assert s["autoscaling"]["per"] == "pod" and s["autoscaling"]["replicas"] == 2
    assert s["autoscaling"]["target_concurrency_per_replica"] == 2  # floor(6 / 2 × 0.8)
    assert "2 replicas; at 6 users the busiest ran 3" in s["autoscaling"]["fleet_message"]
    assert "evenly" in s["autoscaling"]["message"]
    assert not [w for w in s["warnings"] if "several processes" in w]


def test_an_uneven_fleet_has_its_imbalance_and_lower_per_pod_thresholds():
    a = _analyze([0.75, 0.25])
    s = summary_dict(a)
    lv6 = next(lv for lv in s["levels"] if lv["concurrency"] == 6)
    assert lv6["imbalance"] == 1.5  # 4.5 over a mean of 3
    imb = s["autoscaling"]["imbalance_at_capacity"]
    assert imb == {"ratio": 1.5, "busiest_mean": 4.5, "mean": 3.0, "n": imb["n"]} and imb["n"] >= 10
    assert "the balancer, not the servers, set the capacity" in s["autoscaling"]["fleet_message"]


def test_one_replica_missing_from_a_round_leaves_that_round_out_of_the_fleet_sum():
    requests, run, samples = _fleet_run([0.5, 0.5])
    first_round = samples["wall"].min()
    drop = (samples["wall"] == first_round) & (samples["replica"] == "127.0.0.1:9001")
    a = analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=samples[~drop], resamples=50)
    wall, value = a.server.series["vllm:num_requests_running"]
    assert first_round not in wall and (value == np.array(value)).all()
    lv2 = a.server.stats(0, "vllm:num_requests_running")
    assert lv2.max == 2  # never 1: a half-seen round is not a fleet figure


def test_declared_replicas_win_and_a_disagreement_is_a_warning():
    assert resolve_replicas(3, 2) == (3, "declared", resolve_replicas(3, 2)[2])
    assert "declares 3 replicas, but the server metrics come from 2" in resolve_replicas(3, 2)[2]
    assert resolve_replicas(None, 2) == (2, "metrics", None)
    assert resolve_replicas(None, None) == (None, None, None)
    s = summary_dict(_analyze([0.5, 0.5], replicas_declared=3))
    assert s["target"]["replicas"] == 3 and s["target"]["replicas_source"] == "declared"
    assert any("declares 3 replicas" in w for w in s["warnings"])


def test_imbalance_sentence_reads_plainly():
    from loadtest.analysis.fleet import Imbalance

    text = imbalance_sentence(3, 27, Imbalance(ratio=11 / 9, busiest=11, mean=9, n=20))
    assert text.startswith("3 replicas; at 27 users the busiest ran 11 requests while the mean was 9")
    assert "the balancer, not the servers, set the capacity" in text
    assert imbalance_sentence(1, 27, None) == ""


# -- the mixed-replica check -------------------------------------------------------------------------


def _single_url(values_by_scrape: list[tuple[float, float]]) -> pd.DataFrame:
    rows = []
    for i, (start, counter) in enumerate(values_by_scrape):
        rows.append({"wall": float(i), "metric": "process_start_time_seconds", "labels": "{}", "value": start,
                     "type": "gauge", "replica": ""})
        rows.append({"wall": float(i), "metric": "vllm:request_success_total", "labels": "{}", "value": counter,
                     "type": "counter", "replica": ""})
    return pd.DataFrame(rows)


def test_a_url_answered_by_two_processes_is_found_by_its_start_time():
    alternating = _single_url([(100.0 + i % 2, 10.0 * i) for i in range(8)])
    assert "process_start_time_seconds changed 7 times (2 processes)" in mixed_sources(alternating)[""]


def test_a_counter_going_backwards_twice_is_mixing_but_a_restart_is_not():
    no_start = _single_url([(0, c) for c in [5, 9, 3, 12, 4, 15]])
    no_start = no_start[no_start["metric"] != "process_start_time_seconds"]
    assert "went backwards 2 times" in mixed_sources(no_start)[""]
    restart = _single_url([(100.0, 5), (100.0, 9), (200.0, 0), (200.0, 3), (200.0, 8)])
    assert mixed_sources(restart) == {}


def test_the_mixed_warning_says_what_to_configure():
    requests, run, _ = _fleet_run([1.0])
    run["server_metrics"] = {"enabled": True, "url": "http://127.0.0.1:8000/metrics", "interval_s": 1, "signals": []}
    samples = _single_url([(100.0 + i % 2, 10.0 * i) for i in range(8)])
    a = analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=samples, resamples=50)
    warning = next(w for w in a.warnings if "several processes" in w)
    assert "http://127.0.0.1:8000/metrics" in warning
    assert "target.metrics.urls" in warning and "target.metrics.prometheus" in warning
    # the two processes' start times count the replicas behind the balancer, and a warning says so: the
    # capacity is theirs together, so the plan is in replicas of half of it (a trial's 3-replica fleet
    # was planned as one replica: 6 replicas where 17 were needed)
    target = summary_dict(a)["target"]
    assert (target["replicas"], target["replicas_source"]) == (2, "processes")
    assert any("2 processes answered the one metrics URL" in w for w in a.warnings)
    # only a counter going backwards: mixed, no count, and the figures are said to take one replica
    counters = samples[samples["metric"] != "process_start_time_seconds"].copy()
    counters.loc[counters["metric"] == "vllm:request_success_total", "value"] = [5, 9, 3, 12, 4, 15, 2, 20]
    b = analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=counters, resamples=50)
    assert summary_dict(b)["target"]["replicas"] is None
    assert any("replicas behind the metrics URL are unknown" in w and "target.replicas" in w for w in b.warnings)


# -- Prometheus and the scenario -------------------------------------------------------------------------


def test_the_prometheus_query_selects_every_signal_with_the_selector():
    q = series_query(["vllm:num_requests_running", "up"], 'job="mock"')
    assert q == '{__name__=~"vllm:num_requests_running|up",job="mock"}'
    assert series_query(["up"], '{job="a", pod=~"v-.*"}') == '{__name__=~"up",job="a", pod=~"v-.*"}'
    assert step_for(0, 100, 1.0) == 1.0 and step_for(0, 100_000, 1.0) == 10.0


def test_a_matrix_becomes_rows_one_replica_per_pod_or_instance():
    result = [
        {"metric": {"__name__": "vllm:num_requests_running", "instance": "10.0.0.1:8000", "pod": "vllm-0"},
         "values": [[1.0, "3"], [2.0, "4"]]},
        {"metric": {"__name__": "up", "instance": "10.0.0.2:8000"}, "values": [[1.0, "1"]]},
    ]
    cols = matrix_columns(result, None)
    assert cols["replica"] == ["vllm-0", "vllm-0", "10.0.0.2:8000"]
    assert cols["value"] == [3.0, 4.0, 1.0] and cols["metric"][2] == "up"
    assert json.loads(cols["labels"][0]) == {"instance": "10.0.0.1:8000", "pod": "vllm-0"}
    assert matrix_columns(result, "instance")["replica"][0] == "10.0.0.1:8000"


def test_replica_ids_are_host_and_port_or_the_whole_url():
    assert replica_ids(["http://a:1/metrics", "http://b:1/metrics"]) == ["a:1", "b:1"]
    assert replica_ids(["http://a:1/m1", "http://a:1/m2"]) == ["http://a:1/m1", "http://a:1/m2"]


def _scenario(metrics):
    return Target.model_validate({"base_url": "http://127.0.0.1:8000/v1", "metrics": metrics})


def test_the_scenario_takes_one_source_of_metrics():
    assert _scenario({"urls": ["http://127.0.0.1:1/metrics"]}).metrics.urls == ["http://127.0.0.1:1/metrics"]
    p = _scenario({"prometheus": {"url": "http://127.0.0.1:9090/", "selector": 'job="x"'}}).metrics.prometheus
    assert p.url == "http://127.0.0.1:9090" and p.selector == 'job="x"'
    for bad in ({"url": "http://a/metrics", "urls": ["http://b/metrics"]}, {"urls": ["ftp://a"]},
                {"urls": ["http://a/m", "http://a/m"]}, {"prometheus": {"url": "http://p", "selector": "{job=\"x\""}}):
        with pytest.raises(Exception):
            _scenario(bad)


def test_the_report_shows_each_replica_and_the_imbalance_per_level():
    from loadtest.report.html import render_html

    page = render_html(_analyze([0.75, 0.25]))
    assert "<h3>Replicas</h3>" in page and "Imbalance per level" in page
    assert "2 replicas against time" in page and "127.0.0.1:9000 running" in page
    assert "the balancer, not the servers, set the capacity" in page
    assert "Scraped 2 replicas (127.0.0.1:9000, 127.0.0.1:9001)" in page


def test_a_fleets_cost_is_priced_per_replica_and_forecast_in_replicas_of_one_share():
    """The price is per replica, the capacity a fleet's: 2 replicas holding 6 users together were
    priced as one replica serving all of it (half the $/token), and the forecast planned replicas
    of 6 users each (half the replicas a peak needs)."""
    from loadtest.compare.cost import cost_change

    requests, run, samples = _fleet_run([0.5, 0.5])
    run["cost_options"] = {"usd_per_hour": 4.0, "peak_users": 36}
    fleet = summary_dict(analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=samples,
                                 resamples=200))
    single_run = json.loads(json.dumps(run))
    single_run["server_metrics"] = {**run["server_metrics"], "urls": run["server_metrics"]["urls"][:1]}
    one = samples[samples["replica"] == samples["replica"].iloc[0]].copy()
    single = summary_dict(analyze(requests, single_run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=one,
                                  resamples=200))
    assert fleet["target"]["replicas"] == 2 and single["target"]["replicas"] == 1
    assert fleet["capacity"]["concurrency"] == single["capacity"]["concurrency"] == 6
    # the same tokens at twice the hourly cost
    assert fleet["cost"]["usd_per_million_output_tokens"] == pytest.approx(
        2 * single["cost"]["usd_per_million_output_tokens"])
    # 36 users at 3 × 0.8 = 2.4 per replica: 15 replicas (one server holding 6: 6 × 0.8 = 4.8, 8 replicas)
    assert fleet["cost"]["forecast"]["per_replica"] == pytest.approx(2.4)
    assert fleet["cost"]["forecast"]["peak_replicas"] == 15 and single["cost"]["forecast"]["peak_replicas"] == 8
    # compare re-plans each side in replicas of its own share
    replan = cost_change(single, fleet)["forecast"]
    assert replan["replicas"] == {"baseline": 8, "candidate": 15}
    # the price stays the one given, per replica (the fleet's summary said $8/h "per replica"), and the
    # re-plan prices its replicas at it: the same monthly bill as the run's own forecast
    assert (fleet["cost"]["usd_per_hour"], fleet["cost"]["replicas"], fleet["cost"]["usd_per_hour_fleet"]) == (4.0, 2, 8.0)
    assert (single["cost"]["usd_per_hour"], single["cost"]["replicas"]) == (4.0, 1)
    assert replan["monthly_usd_static"]["candidate"] == pytest.approx(fleet["cost"]["forecast"]["monthly_usd_static"])


def test_a_fleets_report_and_manifest_split_the_capacity_over_its_replicas():
    """The page's "At capacity" line called the fleet's 19.9 req/s "per replica", its replicas
    calculator divided a peak by the fleet's capacity (4 replicas for 64 users where
    ``--peak-users 64`` planned 10), and autoscaling.yaml's first line read "16 concurrent users
    per replica" for 2 replicas. Each now gives the endpoint's figure and one replica's share, and
    the calculator sizes as the forecast does (one replica's share less the headroom)."""
    import re

    from loadtest.report.autoscaling_yaml import render_autoscaling_yaml
    from loadtest.report.html import render_html

    requests, run, samples = _fleet_run([0.5, 0.5])
    run["cost_options"] = {"peak_users": 36}
    analysis = analyze(requests, run, SloSpec.from_dict(run["scenario"]["slo"]), server_samples=samples, resamples=200)
    cap = analysis.capacity
    assert analysis.autoscaling.replicas == 2 and cap.concurrency == 6
    page = render_html(analysis)
    at = re.search(r"At capacity</th><td>([^<]*)<", page).group(1)
    assert "for the 2 replicas" in at and f"{cap.requests_per_s / 2:.2f} req/s" in at and "per replica" not in at
    # the calculator's users per replica: 6 / 2 × 0.8 = 2.4, the forecast's (36 users: 15 replicas)
    assert "var users = 2.400000" in page
    manifest = render_autoscaling_yaml(analysis)
    assert "Capacity: 6 concurrent users for the 2 replicas (3 per replica)" in manifest.replace("\n# ", " ")
    assert f"maxReplicaCount: {math.ceil(36 / 2.4)}" in manifest  # 15, as --peak-users plans it


def test_a_balanced_url_is_not_also_said_to_queue_in_between():
    """Two replicas behind one metrics URL: each scrape reads one replica's half of the users. The
    mixed warning names that; the in-flight shortfall warning ("something queues in between ...")
    came too, guessing at the cause the first had found."""
    requests, run, samples = _fleet_run([0.5, 0.5])
    run["server_metrics"] = {"enabled": True, "url": "http://127.0.0.1:8000/metrics", "interval_s": 0.5, "signals": []}
    starts = samples[samples["metric"] == UP].assign(metric="process_start_time_seconds", type="gauge")
    second = (starts["replica"] != starts["replica"].iloc[0]).to_numpy()
    starts["value"] = np.where(second, 101.0, 100.0)
    one_url = pd.concat([samples, starts]).reset_index(drop=True)
    # the balancer's scrapes alternate: the second replica answers the round after the first
    one_url["wall"] += np.where(one_url["replica"] != one_url["replica"].iloc[0], 0.25, 0.0)
    one_url = one_url.sort_values("wall", kind="stable").assign(replica="").reset_index(drop=True)
    slo = SloSpec.from_dict(run["scenario"]["slo"])
    mixed = analyze(requests, run, slo, server_samples=one_url, resamples=50).warnings
    assert any("several processes" in w for w in mixed)
    assert not any("something queues in between" in w for w in mixed)
    # one process seeing half the users is still something in between
    lone = one_url[one_url["metric"] != "process_start_time_seconds"]
    lone = lone.drop_duplicates(["wall", "metric"]).reset_index(drop=True)
    single = analyze(requests, run, slo, server_samples=lone, resamples=50).warnings
    assert any("something queues in between" in w for w in single)

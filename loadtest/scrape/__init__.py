"""The server's own view during a run: scrape its Prometheus ``/metrics`` beside the load.

``store``    the on-disk format (``server_metrics.parquet``: wall time, metric, labels, value)
``scraper``  one scrape: fetch, parse with prometheus_client, rows (plus Prometheus's own
             ``up``/``scrape_duration_seconds``/``scrape_samples_scraped`` per scrape)
``process``  the scraper as a child process of ``loadtest run``, off the load's hot path
``sources``  one URL, one URL per replica (``target.metrics.urls``), and the replicas' ids
``prometheus`` the replicas' signals from a Prometheus server (query_range, after the run)
``mixed``    does one URL's scrapes come from several processes (a balancer in front)?

The analysis side (joining samples to levels on wall time) lives in
:mod:`loadtest.analysis.server`.
"""

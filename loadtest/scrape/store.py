"""``server_metrics.parquet``: every sample the scraper read, one row per sample.

Columns: ``wall`` (time.time() seconds, the midpoint of the scrape), ``metric``
(the sample's name as exposed, e.g. ``vllm:num_requests_running`` or
``..._bucket``), ``labels`` (the sample's labels as canonical JSON, sorted keys),
``value`` and ``type`` (the family's declared type: gauge, counter, histogram,
unknown ...) and ``replica`` (which replica the sample is from: the id of its URL in
``target.metrics.urls``, or its pod/instance in Prometheus; empty for the single default URL,
and null in files from before fleets). With several URLs, every URL is scraped in one round
and the round's samples share one ``wall`` (the round's midpoint), so a fleet figure sums
replicas seen at the same moment. Each scrape also adds Prometheus's own per-scrape series: ``up``
(1 ok, 0 failed; a failure carries its reason in the ``error`` label),
``scrape_duration_seconds`` and ``scrape_samples_scraped``.

Like requests.parquet, rows are flushed as small fsynced part files (at least
once a second), so a killed run keeps what was scraped; :func:`read_samples`
falls back to the parts when the merged file was never written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from loadtest.records import PartFiles, read_parts

if TYPE_CHECKING:  # the scraper child writes with Arrow alone and never imports pandas (start-up time)
    import pandas as pd

SERVER_METRICS_PARQUET = "server_metrics.parquet"
PARTS_DIR = "server_metrics.parts"

SCHEMA = pa.schema(
    [
        pa.field("wall", pa.float64()),
        pa.field("metric", pa.string()),
        pa.field("labels", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("type", pa.string()),
        pa.field("replica", pa.string()),
    ]
)

#: Synthetic per-scrape series, named as Prometheus names its own.
UP = "up"
SCRAPE_DURATION = "scrape_duration_seconds"
SCRAPE_SAMPLES = "scrape_samples_scraped"


def error_of(labels: str) -> str:
    """A failed scrape's reason, from its ``up`` sample's labels (``failed`` when it gives none)."""
    try:
        return str(json.loads(labels).get("error") or "failed")
    except (ValueError, AttributeError):
        return "failed"


class SampleWriter(PartFiles):
    """Scraped samples as durable part files, merged into ``server_metrics.parquet`` at the end."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, PARTS_DIR, SERVER_METRICS_PARQUET, SCHEMA)

    def write_columns(self, columns: dict[str, list]) -> None:
        if columns.get("wall"):
            if "replica" not in columns:
                columns = {**columns, "replica": [""] * len(columns["wall"])}
            self.write(pa.Table.from_pydict(columns, schema=SCHEMA))


def read_samples(run_dir: Path) -> pd.DataFrame | None:
    """The run's scraped samples (None when the run did not scrape), also from a killed run."""
    run_dir = Path(run_dir)
    merged = run_dir / SERVER_METRICS_PARQUET
    if merged.exists():
        frame = pq.ParquetFile(merged).read().to_pandas()
    elif (run_dir / PARTS_DIR).is_dir():
        frame = read_parts(run_dir / PARTS_DIR, SCHEMA).to_pandas()
    else:
        return None
    if "replica" not in frame:
        frame["replica"] = None  # written before fleets: one URL
    frame["replica"] = frame["replica"].fillna("").astype(str)
    return frame

"""``server_metrics.parquet``: every sample the scraper read, one row per sample.

Columns: ``wall`` (time.time() seconds, the midpoint of the scrape), ``metric``
(the sample's name as exposed, e.g. ``vllm:num_requests_running`` or
``..._bucket``), ``labels`` (the sample's labels as canonical JSON, sorted keys),
``value`` and ``type`` (the family's declared type: gauge, counter, histogram,
unknown ...). Each scrape also adds Prometheus's own per-scrape series: ``up``
(1 ok, 0 failed; a failure carries its reason in the ``error`` label),
``scrape_duration_seconds`` and ``scrape_samples_scraped``.

Like requests.parquet, rows are flushed as small fsynced part files (at least
once a second), so a killed run keeps what was scraped; :func:`read_samples`
falls back to the parts when the merged file was never written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SERVER_METRICS_PARQUET = "server_metrics.parquet"
PARTS_DIR = "server_metrics.parts"

SCHEMA = pa.schema(
    [
        pa.field("wall", pa.float64()),
        pa.field("metric", pa.string()),
        pa.field("labels", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("type", pa.string()),
    ]
)

#: Synthetic per-scrape series, named as Prometheus names its own.
UP = "up"
SCRAPE_DURATION = "scrape_duration_seconds"
SCRAPE_SAMPLES = "scrape_samples_scraped"


class SampleWriter:
    """Appends rows as durable part files; :meth:`close` merges them into one Parquet file."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.parts = self.run_dir / PARTS_DIR
        self.parts.mkdir(parents=True, exist_ok=True)
        self._n = 0

    def write(self, columns: dict[str, list]) -> None:
        if not columns["wall"]:
            return
        table = pa.Table.from_pydict(columns, schema=SCHEMA)
        path = self.parts / f"{self._n:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        tmp.rename(path)
        self._n += 1

    def close(self) -> Path:
        out = self.run_dir / SERVER_METRICS_PARQUET
        tmp = out.with_suffix(".tmp")
        pq.write_table(_read_parts(self.parts), tmp)
        tmp.rename(out)
        for part in sorted(self.parts.glob("*.parquet")):
            part.unlink()
        try:
            self.parts.rmdir()
        except OSError:
            pass
        return out


def _read_parts(parts: Path) -> pa.Table:
    files = sorted(parts.glob("*.parquet")) if parts.is_dir() else []
    if not files:
        return SCHEMA.empty_table()
    return pa.concat_tables([pq.ParquetFile(f).read().cast(SCHEMA) for f in files])


def has_samples(run_dir: Path) -> bool:
    run_dir = Path(run_dir)
    return (run_dir / SERVER_METRICS_PARQUET).exists() or (run_dir / PARTS_DIR).is_dir()


def read_samples(run_dir: Path) -> pd.DataFrame | None:
    """The run's scraped samples (None when the run did not scrape), also from a killed run."""
    run_dir = Path(run_dir)
    merged = run_dir / SERVER_METRICS_PARQUET
    if merged.exists():
        return pq.ParquetFile(merged).read().to_pandas()
    if (run_dir / PARTS_DIR).is_dir():
        return _read_parts(run_dir / PARTS_DIR).to_pandas()
    return None

"""Reading a big run's records without holding its chunk lists: the scalars at once, the lists in batches.

:func:`loadtest.records.read_requests` converts every column to pandas,
chunk lists included: 100M chunk timestamps become a million numpy arrays,
~7 GB with what the analysis then derives from them. The analyzer needs the
lists only once, in record order, so here they stay on disk until read:

* :func:`read_scalars`: every column but the lists, as a DataFrame (what
  ``read_requests`` gives, less ``chunk_ms`` / ``chunk_tokens`` / ``chunk_sent_ms``);
* :func:`chunk_batches`: the ``chunk_ms`` and ``chunk_tokens`` of the same
  records, in the same order, as Arrow record batches of about
  :data:`BATCH_CHUNKS` chunks each (a new read on every call).

Both read ``requests.parquet``, or the part files of a run that was killed
before they were merged, exactly as ``read_requests`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loadtest.records import PARTS_DIR, REQUESTS_PARQUET, SCHEMA, _conform

#: The list columns; the analysis streams the first two and never reads the third.
LIST_COLUMNS = ("chunk_ms", "chunk_tokens", "chunk_sent_ms")
CHUNK_COLUMNS = LIST_COLUMNS[:2]
#: Chunks per batch: about 16 MB per float column, small next to the ITL samples the analysis keeps.
BATCH_CHUNKS = 2**21
#: Fewest rows per batch (records with thousands of chunks still come a few hundred at a time).
MIN_BATCH_ROWS = 256
#: Parquet read buffer: the reader then decodes page by page instead of loading a whole
#: column chunk (a run's merged file has row groups of up to a million records, ~800 MB of chunk_ms).
READ_BUFFER = 1 << 20


def _merged(run_dir: Path) -> Path | None:
    path = Path(run_dir) / REQUESTS_PARQUET
    return path if path.exists() else None


def _parts(run_dir: Path) -> list[Path]:
    parts = Path(run_dir) / PARTS_DIR
    return sorted(parts.glob("*.parquet")) if parts.is_dir() else []


def _open(path: Path) -> pq.ParquetFile:
    return pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER)


def read_scalars(run_dir: Path) -> pd.DataFrame:
    """Every record column but the chunk lists, as ``read_requests`` would give them.

    Like ``read_requests``: the merged file's columns as they are stored, the
    part files' cast to :data:`SCHEMA` (a column the format gained later is null).
    """
    merged = _merged(run_dir)
    if merged is not None:
        source = _open(merged)
        return source.read(columns=[n for n in source.schema_arrow.names if n not in LIST_COLUMNS]).to_pandas()
    schema = pa.schema([f for f in SCHEMA if f.name not in LIST_COLUMNS])
    tables = []
    for path in _parts(run_dir):
        table = pq.ParquetFile(path).read(columns=[n for n in pq.read_schema(path).names if n not in LIST_COLUMNS])
        for field in schema:
            if field.name not in table.column_names:
                table = table.append_column(field, pa.nulls(table.num_rows, field.type))
        tables.append(table.select(schema.names).cast(schema))
    return (pa.concat_tables(tables) if tables else schema.empty_table()).to_pandas()


def chunk_batches(run_dir: Path) -> Iterator[pa.RecordBatch]:
    """``chunk_ms`` and ``chunk_tokens`` of every record, in record order, a batch at a time.

    A file without one of the columns (an older format) yields batches
    without it; the analysis reads an absent list as empty.
    """
    merged = _merged(run_dir)
    for path in [merged] if merged is not None else _parts(run_dir):
        source = _open(path)
        if source.metadata.num_rows == 0:
            continue
        # without either list (an older format), some column still gives the batches their rows
        present = [n for n in CHUNK_COLUMNS if n in source.schema_arrow.names] or source.schema_arrow.names[:1]
        rows = max(MIN_BATCH_ROWS, min(1 << 20, int(BATCH_CHUNKS / max(_chunks_per_row(source), 1.0))))
        yield from source.iter_batches(batch_size=rows, columns=present, use_threads=False)


def _chunks_per_row(source: pq.ParquetFile) -> float:
    """Mean chunk_ms entries per record, from the file's footer (no data read)."""
    meta = source.metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    leaf = next((i for i, path in enumerate(names) if path.startswith("chunk_ms.")), None)
    if leaf is None:
        return 1.0
    values = sum(meta.row_group(g).column(leaf).num_values for g in range(meta.num_row_groups))
    return values / meta.num_rows


def read_level(run_dir: Path, level_index: int) -> pd.DataFrame:
    """Every column of one level's records, in record order: ``read_requests`` less the other levels' rows.

    What the live judge reads at each look (:mod:`loadtest.analysis.decide_worker`): the running
    level only, so a look late in a long run does not read and convert every earlier level's
    chunk lists again. A part file (one flush) or row group whose ``level_index`` statistics
    exclude the level is skipped from its footer, unread.
    """
    level_index = int(level_index)
    merged = _merged(run_dir)
    if merged is not None:
        return _level_rows(pq.ParquetFile(merged), level_index).to_pandas()
    tables = [_conform(_level_rows(pq.ParquetFile(path), level_index), SCHEMA) for path in _parts(run_dir)]
    return (pa.concat_tables(tables) if tables else SCHEMA.empty_table()).to_pandas()


def _level_rows(source: pq.ParquetFile, level_index: int) -> pa.Table:
    """The rows of ``level_index`` in the row groups whose statistics may hold it."""
    meta = source.metadata
    names = source.schema_arrow.names
    if "level_index" not in names:
        return source.schema_arrow.empty_table()
    leaf = [meta.schema.column(i).path for i in range(meta.num_columns)].index("level_index")
    groups = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(leaf).statistics
        if stats is None or not stats.has_min_max or stats.min <= level_index <= stats.max:
            groups.append(g)
    if not groups:
        return source.schema_arrow.empty_table()
    table = source.read_row_groups(groups)
    return table.filter(pc.equal(table["level_index"], level_index))

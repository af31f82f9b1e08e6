"""The on-disk format of a run: a folder with ``run.json`` and ``requests.parquet``.

``requests.parquet`` holds one row per request (failures included). Chunk arrival
times and their token counts are list columns, so any metric can be recomputed
later with any definition. ``run.json`` holds the resolved scenario (secrets
removed), versions, host facts and each level's start and end.

The writer appends a row group at least once a second, so a run that is killed
keeps what it measured: a Parquet file whose footer was never written is
recovered by :func:`read_requests`, which falls back to the per-flush part files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from loadtest.redact import scrub_any
from loadtest.run_files import PARTS_DIR, REQUESTS_PARQUET, RUN_JSON

if TYPE_CHECKING:  # the frames are Arrow's to_pandas(): pandas loads only in a process that reads them
    import pandas as pd


#: Columns every records file has held since the first format: a Parquet file without one of them
#: is not a run's records (another table copied over it, a file of another tool), whatever its name.
REQUIRED_COLUMNS = ("request_id", "level_index", "start_wall", "e2e_ms", "ok")

#: One row per request. Times are milliseconds relative to the request's own
#: ``perf_counter`` start unless the name says otherwise.
SCHEMA = pa.schema(
    [
        pa.field("request_id", pa.string()),      # "<worker>-<seq>", unique in a run
        pa.field("worker", pa.string()),          # "local" or the Locust worker id
        pa.field("user", pa.int32()),             # user index within its worker
        pa.field("level", pa.int32()),            # concurrency level in force when the request started
        pa.field("level_index", pa.int32()),      # position of that level in the run (0-based)
        pa.field("warmup", pa.bool_()),           # started in the first warmup_s of its level
        pa.field("start_wall", pa.float64()),     # time.time() at send, seconds (timeline only)
        pa.field("ttfb_ms", pa.float64()),        # first response byte (NaN if none)
        pa.field("ttft_ms", pa.float64()),        # first chunk with generated content (NaN if none)
        pa.field("e2e_ms", pa.float64()),         # request end (success or failure)
        pa.field("chunk_ms", pa.list_(pa.float64())),   # arrival of each content chunk
        pa.field("chunk_tokens", pa.list_(pa.int32())), # tokens carried by each content chunk
        pa.field("chunk_sent_ms", pa.list_(pa.float64())),  # server's send time per chunk, when it stamps them (loadtest mock --stamp-chunks); else empty
        pa.field("prompt_tokens", pa.int32()),    # null when unknown
        pa.field("completion_tokens", pa.int32()),
        pa.field("token_source", pa.string()),    # "usage" | "continuous_usage" | "chunks"
        pa.field("status", pa.int32()),           # HTTP status, 0 when no response
        pa.field("ok", pa.bool_()),
        pa.field("error_kind", pa.string()),      # null | see loadtest.client.record.ERROR_KINDS
        pa.field("error", pa.string()),           # message (secrets scrubbed), null when ok
        pa.field("reasoning_tokens", pa.int32()), # hidden or streamed reasoning tokens, when usage says; else null
        pa.field("resends", pa.int32()),          # resent on a fresh connection after a stale keep-alive one (0/1)
        pa.field("class", pa.string()),           # request class (workload.classes[].name), null without classes
        pa.field("turn", pa.int32()),             # turn within its conversation (1-based), null outside conversations
        pa.field("conversation_id", pa.string()), # "<worker>-<user>-<n>", null outside conversations
        pa.field("prompt_token_source", pa.string()),  # "usage" (server's count) | "estimate" (word count sent) | "trace" (the trace row's length)
        # open loop only (null in closed loop): the level's offered rate, when the request was due
        # (time.time(), seconds) and how late it went out (send perf_counter − scheduled, ms;
        # null for an arrival ``dropped`` at max_in_flight, which was never sent)
        pa.field("rate_rps", pa.float64()),
        pa.field("scheduled_wall", pa.float64()),
        pa.field("schedule_lag_ms", pa.float64()),
        # the server's own per-request timings where it sends them (llama.cpp ``timings``), else null:
        # prompt processing in ms, and ms per generated token (loadtest profile cross-checks with them)
        pa.field("server_prompt_ms", pa.float64()),
        pa.field("server_predicted_per_token_ms", pa.float64()),
        # the answer passed its structured-output check (tool-call JSON valid against the tool's
        # parameters, or output valid against response_format); null when nothing was checked
        pa.field("output_valid", pa.bool_()),
        pa.field("items", pa.int32()),            # inputs in the request (embeddings: its batch); null for chat/completions
        pa.field("images", pa.int32()),           # images sent (workload.images), null without
        pa.field("image_bytes", pa.int64()),      # their encoded bytes (before base64), null without
        # prompt tokens the server served from its prefix cache, when it says (usage.prompt_tokens_details
        # .cached_tokens, or llama.cpp timings.cache_n); else null
        pa.field("cached_tokens", pa.int32()),
        # the prompt's length by the workload's own count: its one-token words sent (a dataset's words,
        # a conversation's history), or the trace row's length; compared with the server's count
        # (prompt_tokens, from usage) in summary.json's prompt_tokens. Null for records of older runs
        pa.field("prompt_tokens_asked", pa.int32()),
    ]
)

COLUMNS = SCHEMA.names


def records_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build an Arrow table in :data:`SCHEMA` from record dicts (missing keys become null)."""
    rows = list(rows)
    columns = {name: [row.get(name) for row in rows] for name in COLUMNS}
    return pa.Table.from_pydict(columns, schema=SCHEMA)


class PartFiles:
    """Appends Arrow tables to a run folder as part files; each flush is durable on its own.

    Each :meth:`write` puts a small part file (``<parts_dir>/NNNNNN.parquet``) and
    fsyncs it, so a SIGKILL loses at most what came since the last flush.
    :meth:`close` merges the parts into one Parquet file and removes them.
    Used for the request records and for the scraped server metrics.
    """

    def __init__(self, run_dir: Path, parts_dir: str, merged: str, schema: pa.Schema) -> None:
        self.run_dir = Path(run_dir)
        self.parts = self.run_dir / parts_dir
        self.parts.mkdir(parents=True, exist_ok=True)
        self.merged = merged
        self.schema = schema
        #: The next part file's number: a writer that takes over from another (the record writer
        #: process, :mod:`loadtest.load.sink_worker`) goes on from where that one got to.
        self.next_part = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        path = self.parts / f"{self.next_part:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        try:
            pq.write_table(table, tmp)
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        except OSError as err:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial file (and frees its space)
            err.filename = err.filename or str(path)  # Arrow's errors name no file
            raise
        tmp.rename(path)
        self.next_part += 1

    def close(self) -> Path:
        """Merge the part files into the merged file (also when there are none)."""
        out = self.run_dir / self.merged
        table = read_parts(self.parts, self.schema)
        tmp = out.with_suffix(".tmp")
        try:
            pq.write_table(table, tmp)
        except OSError as err:
            tmp.unlink(missing_ok=True)  # the parts stay: they are the records
            err.filename = err.filename or str(out)
            raise
        tmp.rename(out)
        for part in sorted(self.parts.glob("*.parquet")):
            part.unlink()
        try:
            self.parts.rmdir()
        except OSError:
            pass
        return out


class RequestWriter(PartFiles):
    """The request records: ``requests.parts/`` while the run goes, ``requests.parquet`` at its end."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, PARTS_DIR, REQUESTS_PARQUET, SCHEMA)


def read_parts(parts: Path, schema: pa.Schema) -> pa.Table:
    files = sorted(parts.glob("*.parquet")) if parts.is_dir() else []
    if not files:
        return schema.empty_table()
    return pa.concat_tables([_conform(pq.ParquetFile(f).read(), schema) for f in files])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast to ``schema``; columns added to the format later are null in older files."""
    for field in schema:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(schema.names).cast(schema)


def _read_parts(parts: Path) -> pa.Table:
    return read_parts(parts, SCHEMA)


def read_requests(run_dir: Path) -> pd.DataFrame:
    """Read a run's records as a DataFrame, also from a run that was killed mid-way."""
    run_dir = Path(run_dir)
    merged = run_dir / REQUESTS_PARQUET
    table = pq.ParquetFile(merged).read() if merged.exists() else _read_parts(run_dir / PARTS_DIR)
    return table.to_pandas()


def write_run_json(run_dir: Path, run: Mapping[str, Any]) -> None:
    """Write ``run.json`` atomically (it is rewritten as levels start and end)."""
    path = Path(run_dir) / RUN_JSON
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(scrub_any(json.loads(json.dumps(run, default=str))), indent=2, sort_keys=False))
    except OSError:
        tmp.unlink(missing_ok=True)  # the previous run.json stays whole
        raise
    tmp.rename(path)


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: through a temporary file, removed if the write fails.

    A reader (CI reading summary.json) never sees half a file, and a full disk
    leaves the previous version and no partial temporary behind.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        # name the file being written (a folder in its place, a full disk), not the temporary
        err.filename, err.filename2 = str(path), None
        raise


def count_records(run_dir: Path) -> int:
    """How many records a run folder holds (from the Parquet footers, without reading the rows)."""
    run_dir = Path(run_dir)
    merged = run_dir / REQUESTS_PARQUET
    files = [merged] if merged.exists() else sorted((run_dir / PARTS_DIR).glob("*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """run.json read through its model (:mod:`loadtest.run_record`): every defined key present."""
    # start-up time: the scraper and record-writer children import this module for the part files,
    # never for run.json, and the model's pydantic classes cost them 0.1 s before their first write
    from loadtest.run_record import normalized

    return normalized(json.loads((Path(run_dir) / RUN_JSON).read_text()))

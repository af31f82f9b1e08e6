"""A flushed batch decodes to the records that went in, chunk lists included (loadtest/load/batch.py).

decode_table reads the flat chunk arrays through numpy views of their bytes (one copy, no
per-float Python objects under the GIL); the lists must come out exactly as they were added.
"""

from __future__ import annotations

import time
from array import array

from loadtest.client.record import RequestRecord
from loadtest.load.batch import RecordBuffer, decode_table
from loadtest.records import SCHEMA


def test_a_batch_decodes_to_its_records_chunk_lists_included():
    chunks = [[], [60.0], [60.5, 70.25, 80.0]]
    tokens = [[], [3], [1, 2, 1]]
    sent = [[], [], [59.0, 69.0, 79.5]]
    buffer = RecordBuffer("local")
    for i, (ms, tok, sent_ms) in enumerate(zip(chunks, tokens, sent)):
        rec = RequestRecord(start_wall=time.time(), start_perf=0.0, ttft_ms=ms[0] if ms else float("nan"),
                            e2e_ms=100.0, chunk_ms=array("d", ms), chunk_tokens=array("i", tok),
                            chunk_sent_ms=array("d", sent_ms), completion_tokens=sum(tok), status=200)
        buffer.add(rec, user=i, level=3, level_index=0, warmup=False)
    table = decode_table(buffer.take())
    assert table.schema == SCHEMA
    assert table["chunk_ms"].to_pylist() == chunks
    assert table["chunk_tokens"].to_pylist() == tokens
    assert table["chunk_sent_ms"].to_pylist() == sent
    assert table["request_id"].to_pylist() == ["local-1", "local-2", "local-3"]
    empty = decode_table(RecordBuffer("local").take())
    assert empty.num_rows == 0 and empty.schema == SCHEMA

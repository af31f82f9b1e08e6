"""The live judge reads one level's records: the same rows, columns and answer as the whole run filtered."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from loadtest.load.batch import decode_table
from loadtest.records import PARTS_DIR, REQUESTS_PARQUET, RequestWriter, read_requests
from loadtest.records_stream import read_level
from tests.unit.test_sink_frames import _batch


def _flushes(tmp_path):
    """Parts of level 0, of levels 0 and 1 together (a flush across a level change), of level 2, of level 1."""
    writer = RequestWriter(tmp_path)
    mixed = pa.concat_tables([decode_table(_batch(2, 0, start=3)), decode_table(_batch(3, 1, start=5, ok=False))])
    for table in (decode_table(_batch(3, 0)), mixed, decode_table(_batch(4, 2, start=8)), decode_table(_batch(2, 1, start=12))):
        writer.write(table)
    return writer


def _expected(tmp_path, index):
    whole = read_requests(tmp_path)
    return whole[whole["level_index"] == index].reset_index(drop=True)


def test_one_levels_rows_from_the_part_files_are_the_whole_runs_filtered(tmp_path):
    _flushes(tmp_path)
    for index, rows in ((0, 5), (1, 5), (2, 4), (3, 0)):
        got = read_level(tmp_path, index)
        assert len(got) == rows and list(got.columns) == list(read_requests(tmp_path).columns)
        expected = _expected(tmp_path, index)
        if not rows:
            continue  # an empty frame's index type differs; the judge answers "no_data" to both
        lists = ["chunk_ms", "chunk_tokens", "chunk_sent_ms"]
        assert got.drop(columns=lists).equals(expected.drop(columns=lists))
        for column in lists:
            assert [list(v) for v in got[column]] == [list(v) for v in expected[column]], column

def test_from_the_merged_file_too_and_a_row_group_of_other_levels_is_not_read(tmp_path):
    writer = _flushes(tmp_path)
    writer.close()
    assert (tmp_path / REQUESTS_PARQUET).exists() and not (tmp_path / PARTS_DIR).exists()
    merged = pq.read_table(tmp_path / REQUESTS_PARQUET)
    pq.write_table(merged, tmp_path / REQUESTS_PARQUET, row_group_size=5)  # groups: 0 | 0,0,1,1,1 | 2×4,1 | 1
    assert read_level(tmp_path, 2)["request_id"].tolist() == _expected(tmp_path, 2)["request_id"].tolist()
    assert read_level(tmp_path, 1)["request_id"].tolist() == _expected(tmp_path, 1)["request_id"].tolist()

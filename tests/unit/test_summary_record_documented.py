"""Every key the summary record declares is listed in the summary.json reference (docs/run-folder.md).

The e2e check (tests/e2e/test_docs_summary_keys.py) walks real summaries, so it sees only the
blocks its two runs fill in; a key of another load mode or request kind (trace replay's
``capacity.speedup``, embeddings' ``levels[].items_per_s``) would slip past it. The record
(:mod:`loadtest.report.summary_record`) declares every top-level, capacity and level key, so this
check covers them all without a run.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from loadtest.report.summary_record import CapacityRecord, LevelRecord, SummaryRecord
from support.summary_reference import documented_summary_keys

pytestmark = pytest.mark.unit


def _paths(model: type[BaseModel], prefix: str) -> list[str]:
    return [prefix + name for name in model.model_fields]


def test_every_declared_summary_key_is_in_the_reference() -> None:
    documented = documented_summary_keys()
    declared = _paths(SummaryRecord, "") + _paths(CapacityRecord, "capacity.") + _paths(LevelRecord, "levels[].")
    assert len(declared) > 90  # the three records really were read (97 keys at the time of writing)
    missing = sorted(p for p in declared if p not in documented)
    assert not missing, "summary.json keys declared in summary_record.py but missing from docs/run-folder.md:\n" + "\n".join(missing)

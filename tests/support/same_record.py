"""Two records are the same field by field (NaN equal to NaN): one path's record against another's."""

from __future__ import annotations

import math
from dataclasses import fields

from loadtest.client.record import RequestRecord


def assert_same_record(a: RequestRecord, b: RequestRecord) -> None:
    for f in fields(RequestRecord):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), f.name
        else:
            assert x == y, (f.name, x, y)

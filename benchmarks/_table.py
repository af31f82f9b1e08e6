"""Output shared by the benchmarks: an aligned text table and the ``--json`` file.

Each benchmark prints for a person (a table) and writes for a program (JSON,
read by ``run_all.py`` and the tests), from the same row dicts, so the two
never disagree.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class Column:
    """One table column: the row key, its header, a ``format`` spec; numbers align right, text may not."""

    key: str
    header: str
    spec: str = ""
    left: bool = False

    def cell(self, row: Mapping[str, Any]) -> str:
        value = row.get(self.key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        return format(value, self.spec)


def format_table(rows: Iterable[Mapping[str, Any]], columns: list[Column]) -> str:
    """Rows as aligned columns (the first one and ``left`` ones to the left), one line per row."""
    cells = [[c.header for c in columns]] + [[c.cell(r) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lefts = [i == 0 or c.left for i, c in enumerate(columns)]
    lines = []
    for line in cells:
        parts = [v.ljust(w) if left else v.rjust(w) for v, w, left in zip(line, widths, lefts)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def write_json(path: Path | str, payload: Mapping[str, Any]) -> None:
    """Write ``payload`` as JSON; NaN becomes null so any JSON reader accepts the file."""
    Path(path).write_text(json.dumps(_clean(payload), indent=2) + "\n")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value

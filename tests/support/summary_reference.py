"""The key paths that ``docs/run-folder.md`` (the summary.json reference) lists.

Shared by the check over real summaries (tests/e2e/test_docs_summary_keys.py) and the check
over the summary record's declared fields (tests/unit/test_summary_record_documented.py).
"""

from __future__ import annotations

import re
from pathlib import Path

#: the repository root: the folder above this file that holds mkdocs.yml (wherever tests/ nests it)
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "mkdocs.yml").is_file())
REFERENCE = ROOT / "docs" / "run-folder.md"


def documented_summary_keys() -> set[str]:
    """The key paths the reference lists: every `code` span in docs/run-folder.md that looks like one."""
    text = REFERENCE.read_text()
    return {m.group(1) for m in re.finditer(r"`([A-Za-z_<][\w.\[\]<>:-]*)`", text)}

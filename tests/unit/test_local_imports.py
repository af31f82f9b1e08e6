"""Every import inside a function says why it is not at the top of its module (issue 24).

A function-level import is a choice with a cost (the module's dependencies are no longer
visible at its top, and a circle can hide behind one), made for a reason: start-up time (the
heavy stacks, pandas, scipy, plotly, Arrow, are not for ``loadtest --help``), gevent's
patching order (Locust patches the process when imported), an optional dependency, or a
child process that should not load what it never uses. The reason is a comment on the
import block or on the line just above it; a block is a run of imports with only blank
lines between them.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "loadtest"


def _function_bodies(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _statements(body: list[ast.stmt]):
    """The statements of a function, nested blocks included, nested functions and classes not."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield node
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(node, name, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            yield from _statements(handler.body)


def uncommented_import_blocks(source: str) -> list[tuple[int, str]]:
    """(line, text) of each function-level import block without a comment on it or above it."""
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    for function in _function_bodies(ast.parse(source)):
        imports = sorted(
            (node for node in _statements(function.body) if isinstance(node, (ast.Import, ast.ImportFrom))),
            key=lambda node: node.lineno,
        )
        blocks: list[list[ast.stmt]] = []
        for node in imports:
            if blocks:
                last = blocks[-1][-1]
                gap = lines[(last.end_lineno or last.lineno):node.lineno - 1]
                if all(not line.strip() for line in gap):
                    blocks[-1].append(node)
                    continue
            blocks.append([node])
        for block in blocks:
            first, last = block[0].lineno, block[-1].end_lineno or block[-1].lineno
            above = lines[first - 2].strip() if first > 1 else ""
            if not above.startswith("#") and not any("#" in line for line in lines[first - 1:last]):
                found.append((first, lines[first - 1].strip()))
    return found


def test_the_checker_sees_a_bare_local_import_and_accepts_a_reasoned_one():
    bare = "def f():\n    import numpy as np\n    return np\n"
    reasoned = "def f():\n    # numpy: only when a run refines\n    import numpy as np\n\n    import pandas\n    return np\n"
    inline = "def f():\n    if x:\n        import numpy as np  # start-up time\n"
    assert uncommented_import_blocks(bare) == [(2, "import numpy as np")]
    assert uncommented_import_blocks(reasoned) == [] and uncommented_import_blocks(inline) == []


def test_every_function_level_import_in_the_package_says_why():
    missing = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in uncommented_import_blocks(path.read_text())
    ]
    assert not missing, "function-level imports without a reason (a comment on or above the block):\n" + "\n".join(missing)

"""No import circles among loadtest's modules, counting function-level imports too.

A function-level import hides a circle from Python (it runs later) but not
from a reader: the two modules still need each other. So every ``import`` in
every module of the package is an arrow here, at the top level or inside a
function, and ``from pkg import name`` points at ``pkg/name.py`` when that is a
module, else at ``pkg/__init__.py``. Importing ``a.b.c`` also runs ``a.b``'s
``__init__``, so that is an arrow too (a package face that re-exports its
modules is part of every import of them).

``TYPE_CHECKING`` blocks are left out: they never run.

The test prints each circle as the chain of modules and the line of each arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "loadtest"

#: Arrows allowed to close a circle: only gevent's patch order could need one (a module that must
#: be imported after ``gevent.monkey.patch_all``), and none does today. Pairs (importer, imported).
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, name: str, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported loadtest module, line) for every import statement that runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno) for a in child.names if a.name.startswith("loadtest"))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against this module's package
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if not base.startswith("loadtest"):
                    continue
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    out.append((sub if sub in modules else base, child.lineno))
            visit(child)

    visit(tree)
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """module → {imported module: line of the first such import}, parents' ``__init__`` included."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for name, path in modules.items():
        for target, line in _imports(path, name, modules):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c runs a, a.b and a.b.c
                mod = ".".join(parts[:i])
                if mod in modules and mod != name and not name.startswith(mod + "."):
                    graph[name].setdefault(mod, line)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if (v, w) in ALLOWED:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = set(component)
    arrows = [f"{a} -> {b} (line {graph[a][b]})" for a in component for b in sorted(graph[a]) if b in inside]
    return "; ".join(arrows)


def test_the_graph_sees_function_level_and_from_imports():
    graph = import_graph()
    # a function-level import (report/html.py imports why_html inside render_html, or at the top)
    assert "loadtest.report.why_html" in graph["loadtest.report.html"]
    # ``from loadtest.compare import delta`` points at the module
    assert "loadtest.compare.delta" in graph["loadtest.compare.level_changes"]
    # importing a submodule runs its package's face: an arrow to it
    assert "loadtest.analysis" in graph["loadtest.report.html"]


def test_no_import_circles():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_describe(c, graph) for c in found)


def _package(module: str) -> str:
    """``loadtest.report.html`` → ``loadtest.report``; a top-level module is its own (``loadtest.run``)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, dict[str, int]]) -> dict[str, dict[str, str]]:
    """Arrows between loadtest's packages and top-level modules, each with one module arrow behind it."""
    out: dict[str, dict[str, str]] = {}
    for a, targets in graph.items():
        out.setdefault(_package(a), {})
        for b, line in targets.items():
            pa, pb = _package(a), _package(b)
            if pa != pb and pb != "loadtest":
                out[pa].setdefault(pb, f"{a} -> {b} (line {line})")
                out.setdefault(pb, {})
    return out


#: Package circles known and tolerated for now, each with why and who removes it (none today: the
#: last one, client <-> workload through client/preflight.py, went when the preflight moved to
#: loadtest/preflight.py). ``test_known_package_circles_are_still_there`` fails once one is gone,
#: so the list cannot go stale.
KNOWN_PACKAGE_CIRCLES: dict[frozenset[str], str] = {}


def test_no_package_circles():
    """No upward arrows: the packages (analysis, report, compare, load, ...) form no circle either."""
    graph = package_graph(import_graph())
    found = [c for c in circles(graph) if frozenset(c) not in KNOWN_PACKAGE_CIRCLES]
    lines = []
    for component in found:
        inside = set(component)
        lines.append("; ".join(why for a in component for b, why in sorted(graph[a].items()) if b in inside))
    assert not found, "package circles:\n" + "\n".join(lines)


def test_known_package_circles_are_still_there():
    present = {frozenset(c) for c in circles(package_graph(import_graph()))}
    gone = [why for circle, why in KNOWN_PACKAGE_CIRCLES.items() if circle not in present]
    assert not gone, f"remove from KNOWN_PACKAGE_CIRCLES, it is fixed: {gone}"

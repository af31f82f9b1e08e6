"""The suite's shared fixtures and its markers (the one conftest.py).

Layout (docs/testing: "The test suite"):

``tests/unit``     pure functions over data: no sockets, no subprocesses; ``make test-fast``
``tests/e2e``      a real ``loadtest mock``, real Locust, real files, headless Chromium, nginx...
``tests/real``     a real llama.cpp ``llama-server`` (built once per machine, see tests/support/realserver)
``tests/support``  the helpers the tests (and a few benchmarks) share, imported as ``support``

Each test gets the marker of its folder (``unit``, ``e2e``, ``real``) here, so
``pytest -m unit`` and ``pytest tests/unit`` select the same tests. A new test
file at ``tests/`` top level (other sessions add them there; they are sorted
into a folder at the merge) gets ``e2e`` unless it says otherwise with a
module-level ``pytestmark``.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Iterator

import pytest

from loadtest.mock.process import MockServer

HERE = Path(__file__).resolve().parent
FOLDER_MARKERS = ("unit", "e2e", "real")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its folder (unit / e2e / real); loose top-level files count as e2e."""
    for item in items:
        try:
            folder = Path(str(item.path)).resolve().relative_to(HERE).parts[0]
        except ValueError:  # a test outside tests/ (pytest given another path)
            continue
        if folder in FOLDER_MARKERS:
            item.add_marker(getattr(pytest.mark, folder))
        if folder == "real":  # llama-server's inference threads take both cores
            item.add_marker(pytest.mark.solo)
        elif not any(item.get_closest_marker(name) for name in FOLDER_MARKERS):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def mock(request: pytest.FixtureRequest) -> Iterator[MockServer]:
    """One real ``loadtest mock`` per test module, with the module's ``MOCK_ARGS``.

    The model's parameters are the module's business (a wire test wants 1 ms
    steps, a timing test the ITL-bound ``10 + 20 x running``), so each module
    that uses this fixture says them in ``MOCK_ARGS``, a list of ``loadtest
    mock`` arguments. The server lives for the module: the tests that use it
    only send requests, and the mock keeps no state between them that they
    read (those that count requests use their own ``MockServer``).
    """
    args = getattr(request.module, "MOCK_ARGS", None)
    if args is None:
        raise pytest.UsageError(f"{request.module.__name__} uses the mock fixture without MOCK_ARGS (its mock's arguments)")
    with MockServer(list(args)) as server:
        yield server


def _gevent_patched() -> bool:
    """Whether gevent has monkey-patched this (pytest's) process; never imports gevent itself."""
    import sys

    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("time"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail the test that lets Locust's gevent patches into pytest's own process.

    Importing Locust (``loadtest.load.orchestrate``, ``loadtest.run``'s load
    stage, the web UI) monkey-patches the standard library: ``time.sleep``
    turns cooperative and ``ssl`` half-patched for every later test in the
    process, which once broke a loop-stall test and five TLS tests far from the
    cause. Code that needs Locust runs in a child interpreter (as
    ``tests/e2e/test_hold_shape.py`` does); this names the test that did not.
    """
    before = _gevent_patched()
    yield
    if not before and _gevent_patched():
        pytest.fail(f"{item.nodeid} imported Locust (gevent patched pytest's process): run that code in a child interpreter",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``LOADTEST_TEST_CPU=<file>``, append each test's wall time and CPU (this process and its reaped children).

    How the suite is split into passes (docs/testing: "Which tests share the
    cores") rests on how much of a core each timing test uses while it waits
    on its levels; this writes the figures that split is read from. A child
    reaped in a module fixture's teardown counts for the module's last test.
    """
    out = os.environ.get("LOADTEST_TEST_CPU")
    if not out:
        yield
        return
    wall0 = time.monotonic()
    own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    own1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in ((own0, own1), (kids0, kids1)))
    with open(out, "a", encoding="utf-8") as handle:
        handle.write(f"{item.nodeid}\t{time.monotonic() - wall0:.2f}\t{cpu:.2f}\n")

"""The capacity verdict a short real-server run may honestly give under a generous SLO.

The tiny model on a 1-thread llama-server holds a 10 s limit by two orders of magnitude, so
the verdict is ``at_least`` (every level passed), unless the shared 2-core host starves the
server or the client: then the harness says so (``host_contended``), or, when the monitor saw
no contention but the level got too few answers to decide a p95 within its time limit,
``uncertain`` with that reason. Anything else (a failing level, a capacity below the levels)
is a real defect.
"""

from __future__ import annotations

from typing import Any, Mapping


def assert_generous_slo_held(capacity: Mapping[str, Any]) -> None:
    """Fail unless the verdict is one a run far inside its SLO may give (see the module)."""
    verdict, message = capacity["verdict"], capacity["message"]
    assert verdict in ("at_least", "host_contended", "uncertain"), message
    if verdict == "uncertain":
        assert "too few samples" in message and capacity["first_failing"] is None, message

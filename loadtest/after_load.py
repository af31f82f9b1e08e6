"""After the load: is a target that stopped answering still gone? One request, only then.

Why: a run that ends on a streak of requests the target answered nothing to (refused, or
closed before any response byte) lost its target, and reports an outage rather than a
capacity (:mod:`loadtest.analysis.target_lost`). The records alone can tell that only when
the streak lasted half a second or more, since an overloaded server refuses a handful of
connections at a run's last instant too. A server killed a moment before the look that
ended its level left a shorter streak, and the run read "holds 1 user" and exited 0 off a
server that was gone. So when the run ends on such a streak, the run stage asks once more,
the way the load asked (the same client, proxy, TLS and key; a short request), and keeps
what came back in run.json's ``after_load``. A run that ended on answers sends nothing more:
a server that counts requests sees none beyond the load's.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from loadtest.analysis.target_lost import closing_streak
from loadtest.client.wire import Dialect
from loadtest.preflight import short_request
from loadtest.records_stream import read_scalars
from loadtest.run_record import AfterLoad
from loadtest.scenario import Scenario

_log = logging.getLogger(__name__)

#: How long the request after the load may take: a live server answers its head at once.
TIMEOUT_S = 10.0


def ended_unanswered(run_dir: Path) -> bool:
    """Did the run end on a streak of requests the target answered nothing to (no span asked)?"""
    return closing_streak(read_scalars(run_dir)) is not None


def ask_again(scenario: Scenario, api_key: str | None, dialect: Dialect, salt: str) -> AfterLoad:
    """Send one short request now; whether the target answered it at all (any status counts)."""
    rec = short_request(scenario, api_key, dialect, salt, timeout_s=TIMEOUT_S)
    answered = rec.ok or bool(rec.status)
    return AfterLoad(at_wall=time.time(), answered=answered, ok=rec.ok, error_kind=rec.error_kind,
                     status=int(rec.status) if rec.status else None)


def after_load(run_dir: Path, scenario: Scenario, api_key: str | None, dialect: Dialect, salt: str) -> AfterLoad | None:
    """run.json's ``after_load``: None unless the run ended on requests the target answered nothing to.

    Never fatal: the run's records are measured already, and its analysis and report must follow
    whatever this finds; a failure here is logged and leaves ``after_load`` null (the records alone
    then judge, as before).
    """
    try:
        if not ended_unanswered(run_dir):
            return None
        return ask_again(scenario, api_key, dialect, salt)
    except Exception as err:  # noqa: BLE001 - see above
        _log.warning("could not ask the target again after the load (%s: %s)", type(err).__name__, err)
        return None

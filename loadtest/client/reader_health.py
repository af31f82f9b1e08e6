"""What a stream reader measures of itself: the contract between both readers and the self-monitor.

The reactor thread (:mod:`loadtest.client.reactor`) and the greenlet reader's clock
(:mod:`loadtest.client.hub_clock`) each hand the self-monitor (:mod:`loadtest.load.monitor`)
the same figures, so it judges either reader by one definition. It lives apart from both
readers so that neither imports the other for it.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

#: An ``epoll`` call that took longer than this waited for data (it did not return at once).
WAITED_S = 0.0002


@dataclass
class ReaderHealth:
    """What a stream reader measured of itself over one period (one level).

    Stamp delays come per read: ``waiting_bound_ms`` for reads whose bytes were
    already waiting (the bound is known), ``woken_tail_ms`` for reads that a
    waiting ``epoll`` woke (late by a wake-up, from the ``tick_lag_ms``
    distribution, plus the tail: 0 for the reactor, whose stamp is the wake).
    """

    batch_ms: array = field(default_factory=lambda: array("d"))
    tick_lag_ms: array = field(default_factory=lambda: array("d"))
    waiting_bound_ms: array = field(default_factory=lambda: array("d"))
    woken_tail_ms: array = field(default_factory=lambda: array("d"))
    busy_s: float = 0.0
    #: Reads whose delay was measured against the kernel's arrival stamp.
    measured_ms: array = field(default_factory=lambda: array("d"))

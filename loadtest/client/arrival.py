"""The kernel's arrival stamps for a socket's bytes (Linux ``SO_TIMESTAMPING``).

The reactor (:mod:`loadtest.client.reactor`) asks the kernel to note when each
packet reached the socket (software receive stamps, wall clock); ``recvmsg``
then returns the stamp of the newest bytes read, and the self-check compares it
with the reactor's own ``perf_counter`` stamp to measure how late that stamp was.
Kept apart from the reactor's loop so that the loop reads as the loop.
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

#: Linux's software receive timestamps (linux/net_tstamp.h).
_SO_TIMESTAMPING = 37
_SOF_RX_SOFTWARE = 1 << 3
_SOF_SOFTWARE = 1 << 4
#: The ancillary buffer ``recvmsg`` needs for one ``scm_timestamping`` (three timespecs).
ANCILLARY_SIZE = socket.CMSG_SPACE(48) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("qq")
_SOL_SOCKET = socket.SOL_SOCKET


def enable_arrival_stamps(raw: Any) -> bool:
    """Ask the kernel to stamp when bytes reach this socket; False where it cannot (not Linux)."""
    if not ANCILLARY_SIZE or not sys.platform.startswith("linux"):
        return False
    try:
        raw.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING, _SOF_RX_SOFTWARE | _SOF_SOFTWARE)
    except OSError:
        return False
    return True


def arrival_time(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's arrival stamp (wall clock, s) of the newest bytes a ``recvmsg`` returned."""
    for level, kind, data in ancillary:
        if level == _SOL_SOCKET and kind == _SO_TIMESTAMPING and len(data) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(data)
            if sec:
                return sec + nsec * 1e-9
    return None

"""The kernel's arrival stamps, which the reader thread measures its own stamp delay against.

A real TCP connection on 127.0.0.1: the stamp of bytes read lies between the
send and the read, and a read made late by a known sleep shows that lateness.
"""

from __future__ import annotations

import socket
import sys
import time

import pytest

from loadtest.client.arrival import ANCILLARY_SIZE, arrival_time, enable_arrival_stamps

pytestmark = [pytest.mark.solo, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="software receive stamps are Linux's")]


@pytest.fixture
def connection():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    yield client, peer
    for s in (client, peer, server):
        s.close()


def test_a_late_read_shows_how_long_its_bytes_waited(connection):
    client, peer = connection
    assert enable_arrival_stamps(client)
    time.sleep(0.05)  # the kernel turns stamping on a moment later (a deferred static key)
    sent = time.time()
    peer.send(b"data: x\n\n")
    time.sleep(0.05)  # the reader is 50 ms late
    data, ancillary, _, _ = client.recvmsg(65536, ANCILLARY_SIZE)
    read = time.time()
    arrived = arrival_time(ancillary)
    assert data == b"data: x\n\n" and arrived is not None
    assert sent - 0.001 <= arrived <= read
    assert read - arrived >= 0.045


def test_no_stamp_without_asking():
    assert arrival_time([]) is None
    assert arrival_time([(socket.SOL_SOCKET, 99, b"\0" * 48)]) is None

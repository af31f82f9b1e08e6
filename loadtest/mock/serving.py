"""Serving the mock: the aiohttp runner and its socket, until asked to stop.

Apart from :mod:`loadtest.mock.server` (the application and its routes), so that the
application can be built and tested without opening a socket.
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from typing import Callable

from aiohttp import web

from loadtest.errors import InputError
from loadtest.mock.config import MockConfig
from loadtest.mock.server import MockService


async def serve(
    config: MockConfig,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[str, int], None] | None = None,
) -> None:
    """Serve ``config`` until ``stop`` is set; ``on_ready(host, port)`` once listening.

    Access logging is off: at hundreds of requests per second it would cost
    more than the model itself.
    """
    service = MockService(config)
    runner = web.AppRunner(
        service.build_app(), access_log=None, handle_signals=False, shutdown_timeout=2.0
    )
    await runner.setup()
    try:
        tls = None
        if config.tls_cert:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                tls.load_cert_chain(config.tls_cert, config.tls_key)
            except (ssl.SSLError, OSError) as err:  # not PEM, a key that does not match, unreadable
                raise InputError(
                    f"--tls-cert {config.tls_cert} / --tls-key {config.tls_key}: not a PEM certificate and its "
                    f"key ({' '.join(str(err).split())})"
                ) from None
        site = web.TCPSite(runner, config.host, config.port, backlog=4096, ssl_context=tls)
        try:
            await site.start()
        except OSError as err:
            raise listen_error(config.host, config.port, err) from None
        port = int(runner.addresses[0][1])
        if on_ready is not None:
            on_ready(config.host, port)
        await stop.wait()
    finally:
        await runner.cleanup()


def listen_error(host: str, port: int, err: OSError) -> InputError:
    """A failed bind as the option to change: a taken or privileged port is ``--port``'s, anything else
    (a name that does not resolve, an address this machine does not have) ``--host``'s. Exit 2, as any
    bad option: the exit-code table has no 1 for a command that never started."""
    reason = " ".join(str(err.strerror or err).split())
    if err.errno in (errno.EADDRINUSE, errno.EACCES):
        return InputError(f"--port {port}: cannot listen on {host}:{port}: {reason}")
    return InputError(f"--host {host}: cannot listen on {host}:{port}: {reason}")

"""Serving the mock: the aiohttp runner and its socket, until asked to stop.

Apart from :mod:`loadtest.mock.server` (the application and its routes), so that the
application can be built and tested without opening a socket.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Callable

from aiohttp import web

from loadtest.errors import InputError, LoadtestError
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
            raise LoadtestError(
                f"cannot listen on {config.host}:{config.port}: {err.strerror or err}"
            ) from None
        port = int(runner.addresses[0][1])
        if on_ready is not None:
            on_ready(config.host, port)
        await stop.wait()
    finally:
        await runner.cleanup()

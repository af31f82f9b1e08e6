"""The built-in simulated OpenAI-compatible LLM server (``loadtest mock``).

It is a *model* of a continuous-batching engine, not a stub that sleeps per
request: its latencies follow from a few parameters (see ``MODEL.md`` next to
this file), so the capacity of the mock under any SLO can be computed by hand
and the analyzer can be checked against it.

Modules, one idea each:

- :mod:`.config`  -- :class:`MockConfig`, every option, validated once.
- :mod:`.engine`  -- the batching engine: one asyncio loop of decode steps.
- :mod:`.wire`    -- the OpenAI JSON / SSE bytes, pre-built per request.
- :mod:`.faults`  -- the seeded draw of injected faults per request.
- :mod:`.metrics` -- counters and their Prometheus text exposition.
- :mod:`.server`  -- the aiohttp application and its routes.
- :mod:`.cli`     -- ``loadtest mock`` options and the serve-until-signal loop.
- :mod:`.process` -- :class:`MockServer`, the mock as a managed subprocess.

Only :mod:`.config` and :mod:`.process` are imported here, so
``from loadtest.mock import MockServer`` stays cheap (no aiohttp import).
"""

from loadtest.mock.config import MockConfig
from loadtest.mock.process import MockServer

__all__ = ["MockConfig", "MockServer"]

"""The streaming client: one request in, one :class:`RequestRecord` out.

It owns the OpenAI chat/completions wire format and the SSE parser, and knows
nothing of Locust, so the preflight, the benchmarks and the load stage share it.
"""

from loadtest.client.record import RequestRecord
from loadtest.client.sse import SSEParser

__all__ = ["RequestRecord", "SSEParser"]

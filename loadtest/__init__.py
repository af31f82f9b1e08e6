"""loadtest: capacity testing for OpenAI-compatible LLM endpoints.

The pipeline is visible in the package layout::

    scenario.py -> load/ (Locust) -> records.py -> analysis/ -> report/

``client/`` owns the wire format and the SSE parser; ``mock/`` is the built-in
simulated server used by the demo, the tests and docker-compose.
"""

__version__ = "0.1.0"

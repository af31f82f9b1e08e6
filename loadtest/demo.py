"""``make demo``: the main job, end to end, against the built-in simulated server.

It starts ``loadtest mock`` on a free port (with the options the quickstart
scenario is written for), streams one request and prints its
TTFT and ITL (proof that the wire works), then runs
``scenarios/quickstart.yaml`` against it with ``--refine``: the capacity table,
the verdict and ``report.html`` land in ``reports/``. The mock is stopped
whatever happens.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Locust monkey-patches the standard library for gevent on import. That must
# happen before this process starts any thread (the mock's output reader) or
# opens any socket, or the two worlds do not mix.
import locust  # noqa: F401,E402

from loadtest.cli import main as cli_main
from loadtest.mock.process import MockServer

QUICKSTART = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml"
#: The mock the quickstart scenario is written for: ITL = 10 + 5 x users ms.
MOCK_FLAGS = ["--decode-base-ms", "10", "--decode-per-seq-ms", "5", "--prefill-per-token-ms", "0"]


def stream_one(base_url: str) -> None:
    """One streamed request, timed by our own client, printed plainly."""
    # numpy and the client: only for the demo's single streamed request, after the mock is up
    import numpy as np

    from loadtest.client.stream import StreamingClient
    from loadtest.client.wire import build_body

    client = StreamingClient(base_url, "chat")
    rec = client.send(build_body("chat", "mock-model", "Say hello to the load test", 32))
    client.close()
    gaps = np.diff(np.frombuffer(rec.chunk_ms, dtype=np.float64))
    print(
        f"one streamed request: HTTP {rec.status}, TTFT {rec.ttft_ms:.1f} ms, "
        f"ITL median {np.median(gaps):.1f} ms over {len(rec.chunk_ms)} chunks, "
        f"{rec.completion_tokens} tokens (from {rec.token_source})"
    )


def main() -> int:
    scenario = sys.argv[1] if len(sys.argv) > 1 else str(QUICKSTART)
    with MockServer(MOCK_FLAGS) as mock:
        print(f"simulated server at {mock.base_url}")
        stream_one(mock.base_url)
        return cli_main(["run", scenario, "--target", mock.base_url, "--refine"])


if __name__ == "__main__":
    sys.exit(main())

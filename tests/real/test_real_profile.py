"""``loadtest profile`` against a real llama.cpp ``llama-server``: its figures agree with the server's own ``timings``.

llama.cpp reports per request ``prompt_ms`` over ``prompt_n`` tokens and
``predicted_per_token_ms``. The profile measures from the client: TTFT against
prompt length (its slope is prefill's cost per token; the client's fixed
costs, HTTP and scheduling, fall into the intercept) and the decode step at
one sequence (ITL). So:

- the profile's ``prefill.ms_per_token`` is compared with the same linear fit
  of the server's own ``prompt_ms`` against prompt tokens, over the same
  requests (the records keep each request's ``timings``: both are slopes; a
  per-request ``prompt_per_token_ms`` also holds the server's fixed part,
  which the slope leaves out);
- one user's ms per generated token (the median TPOT, a request's mean gap
  between tokens) with the median ``predicted_per_token_ms`` of the same
  requests. Not the median chunk gap: the client may read two tokens' chunks
  in one read, so gaps' median sits below their mean, and the server's figure
  is a mean.

Within 10% each. Same requests, same moment: on a shared machine the load of
other processes moves both clocks' figures alike.
"""

from __future__ import annotations

import json

import pytest

from support.realserver.server import start_llama_server
from support.runkit import loadtest, write_scenario


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_llama_server(tmp_path_factory.mktemp("llama-profile"), slots=4, ctx_per_slot=4096)
    try:
        yield srv
    finally:
        srv.stop()


def test_profile_agrees_with_llama_servers_own_timings(server, tmp_path):
    scenario = write_scenario(tmp_path, server.base_url, name="real-profile",
                              target={"api": "completions", "model": server.model, "timeout_s": 60})
    result = loadtest("profile", str(scenario), "--out", str(tmp_path / "profile"), "--max-prompt-tokens", "512",
                      "--prefill-s", "15", "--decode-level-s", "5", "--warmup", "1", "--max-batch", "4",
                      "--decode-max-tokens", "64", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    profile = json.loads((tmp_path / "profile" / "profile.json").read_text())
    assert profile["server_facts"]["n_params"] > 0 and profile["server_facts"]["n_ctx"] == 4096
    assert profile["model"]["params"] == profile["server_facts"]["n_params"]  # read from /v1/models meta

    # The server's own timings of the profile's own requests (records' server_prompt_ms and
    # server_predicted_per_token_ms), fitted the same way.
    p, d = profile["prefill"], profile["decode"]
    assert p["ms_per_token"] == pytest.approx(p["server_ms_per_token"], rel=0.10), p
    # ms per generated token at one user: the client's TPOT (a request's mean gap), as the server's is a mean
    assert d["ms_per_token_1"] == pytest.approx(d["server_ms_per_token_1"], rel=0.10), d

    # its 4 slots (-np 4), as /props says them: a trial's ladder stopped at 2 sequences (the 1-thread step
    # more than doubled) and decode.slots read null; where the ladder's batch stops growing, that instead
    assert profile["server_facts"]["slots"] == 4
    assert d["slots"] == 4 and d["slots_source"] in ("server", "ladder"), d
    # one rule for the points' bound and the fit's words (the trial's table said memory_or_overhead
    # beside "its compute, or threads it shares")
    words = " ".join(profile["summary"])
    if d["batching_pays"] is False:
        assert all(p["bound"] == "compute" for p in d["points"]) and "batching does not pay" in words, (d, words)
    else:
        assert "batching does not pay" not in words


"""Secrets never written: a distinctive secret planted in every input is found in no output.

One run (with a local worker, so workers' logs exist) against a replay server
that, every third request, answers 500 with an error body echoing the API key,
the Azure-style header key and an ``sk-…`` key. The secret is planted in the
API key variable, a ``headers_env`` variable, a secret-named static header,
the base URL's userinfo and a signature query parameter, ``target.query``, and in
request bodies: ``workload.extra_body`` at several depths, a class's override and
a field the scenario marks secret (``target.secret_fields``).
Then every file of the run folder (raw bytes, and the Parquet columns decoded)
and the command's stdout and stderr are searched for it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import pyarrow.parquet as pq

from support.runkit import loadtest, write_scenario
from support.wirezoo.fixtures import OPENAI_CHAT, Fixture
from support.wirezoo.server import ReplayServer

#: asserts nothing about time (where a key may appear, no latency bound): runs in make test's parallel pass
pytestmark = pytest.mark.untimed

MARK = "Planted"
SECRETS = {
    "api_key": "PlantedApiKey0xDEADBEEF77",
    "header_env": "PlantedHeaderSecret99zz",
    "static_header": "PlantedStaticSig3131",
    "url_user": "PlantedUser1",
    "url_password": "PlantedUrlPassword55",
    "url_sig": "PlantedSigValue4242",
    "query_code": "PlantedQueryCode7777",
    # in request bodies (workload.extra_body at several depths, a class's override, a field the scenario marks)
    "body_token": "PlantedBodyToken1234",
    "body_nested_key": "PlantedNestedApiKey5678",
    "body_marked": "PlantedMarkedField9012",
    "class_credential": "PlantedClassCredential3456",
}
SERVER_LEAK = "sk-proj-PlantedLeakFromServer0000"

ECHO_ERROR = Fixture(
    "echo-error", "a gateway whose 500 echoes the credentials it was sent",
    "seen from proxies and OpenAI's 'Incorrect API key provided: …'",
    [b'{"error":{"message":"upstream refused authorization {echo:authorization} with api-key {echo:api-key} '
     b'(also tried ' + SERVER_LEAK.encode() + b')","type":"server_error"}}'],
    {}, status=500, reason="Internal Server Error", headers={"Content-Type": "application/json"}, framing="length",
)


def test_a_planted_secret_is_written_nowhere(tmp_path):
    with ReplayServer([OPENAI_CHAT, ECHO_ERROR], rotate={"mixed": ["openai-chat", "openai-chat", "echo-error"]}) as server:
        base = server.base_url("mixed").replace(
            "http://", f"http://{SECRETS['url_user']}:{SECRETS['url_password']}@") + f"?sig={SECRETS['url_sig']}"
        path = write_scenario(
            tmp_path, base,
            target={"model": "m", "api_key_env": "LT_PLANTED_KEY", "headers_env": {"api-key": "LT_PLANTED_HDR"},
                    "headers": {"X-Signature": SECRETS["static_header"]},
                    "query": {"code": SECRETS["query_code"], "api-version": "2024-10-21"},
                    "secret_fields": ["tenant_ref"]},
            workload={"extra_body": {"secret_token": SECRETS["body_token"], "max_completion_tokens": 16,
                                     "metadata": {"gateway": [{"apiKey": SECRETS["body_nested_key"]}]},
                                     "tenant_ref": SECRETS["body_marked"]},
                      "classes": [{"name": "plain"},
                                  {"name": "signed", "extra_body": {"auth": {"Credential": SECRETS["class_credential"]}}}]},
            load={"levels": [1, 2], "level_duration_s": 3, "warmup_s": 0.5},
            slo={"max_error_rate": 1.0},
        )
        env = {**os.environ, "LT_PLANTED_KEY": SECRETS["api_key"], "LT_PLANTED_HDR": SECRETS["header_env"]}
        out = tmp_path / "run"
        result = loadtest("run", str(path), "--out", str(out), "--workers", "1", env=env, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    # The planted values really were sent (so a clean output means scrubbed, not unused).
    # the last completion request (the server-metrics scraper's /metrics requests may come after it)
    sent = [e for e in server.exchanges if "/chat/completions" in e.path][-1]
    assert sent.headers["api-key"] == SECRETS["header_env"] and sent.headers["x-signature"] == SECRETS["static_header"]
    assert SECRETS["api_key"] in sent.headers["authorization"]
    assert SECRETS["query_code"] in sent.path and SECRETS["url_sig"] in sent.path
    assert any(e.fixture == "mixed" for e in server.exchanges)
    bodies = b"".join(e.body for e in server.exchanges)
    for name in ("body_token", "body_nested_key", "body_marked", "class_credential"):
        assert SECRETS[name].encode() in bodies, name  # sent, so a clean output means scrubbed
    assert b'"max_completion_tokens": 16' in bodies or b'"max_completion_tokens":16' in bodies
    # the server-metrics scraper talks to the server with the same credentials
    scrapes = [e for e in server.exchanges if e.path.startswith("/metrics")]
    assert scrapes and all(e.headers.get("api-key") == SECRETS["header_env"] for e in scrapes)

    files = sorted(p for p in out.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"run.json", "summary.json", "report.html", "requests.parquet", "locust.log", "worker-0.log"} <= names
    leaks = [f"{p.name}" for p in files if MARK.encode() in p.read_bytes()]
    assert leaks == [], leaks
    # Parquet compresses its pages: look inside the decoded columns too.
    table = pq.read_table(out / "requests.parquet")
    errors = [e for e in table.column("error").to_pylist() if e]
    assert errors, "the echoing 500s must have been recorded"
    assert any("<redacted>" in e for e in errors)
    for column in table.column_names:
        assert MARK not in str(table.column(column).to_pylist()), column
    assert MARK not in result.stdout and MARK not in result.stderr
    assert "<redacted>" in (out / "run.json").read_text()
    # Only secret-named fields are redacted: an ordinary field that merely contains "token" is kept.
    import json

    scenario = json.loads((out / "run.json").read_text())["scenario"]
    assert scenario["workload"]["extra_body"]["max_completion_tokens"] == 16
    assert scenario["workload"]["extra_body"]["metadata"]["gateway"][0]["apiKey"] == "<redacted>"

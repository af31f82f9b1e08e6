"""The preflight adapts the body to what the target accepts; target fields; proxies.

A replay server plays a picky endpoint: it answers 400 (OpenAI's wording) or 422
(FastAPI's) while the body holds a field it rejects, and streams once it does not.
"""

from __future__ import annotations

import json

import pytest

from loadtest.preflight import preflight
from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.errors import InputError, TargetError
from loadtest.scenario import parse_scenario
from support.runkit import loadtest, write_scenario
from support.wirezoo.fixtures import OPENAI_CHAT, Fixture
from support.wirezoo.server import ReplayServer

#: asserts nothing about time (what the preflight says of each wire dialect, no latency bound): runs in make test's parallel pass
pytestmark = pytest.mark.untimed


def _openai_400(name: str, message: str) -> Fixture:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}})
    return Fixture(name, "OpenAI 400", "platform.openai.com/docs/guides/error-codes", [body.encode()], {},
                   status=400, reason="Bad Request", headers={"Content-Type": "application/json"}, framing="length")


REJECTIONS = {
    "continuous_usage_stats": _openai_400("no-cus", "Unrecognized request argument supplied: continuous_usage_stats"),
    "ignore_eos": _openai_400("no-eos", "Unrecognized request argument supplied: ignore_eos"),
    "temperature": _openai_400(
        "no-temp", "Unsupported value: 'temperature' does not support 0.0 with this model. Only the default (1) value is supported."),
    "max_tokens": _openai_400(
        "no-max", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
    "foo": _openai_400("no-foo", "Unrecognized request argument supplied: foo"),
}
FASTAPI_422_EOS = Fixture(
    "422-eos", "FastAPI 422", "fastapi", [json.dumps({"detail": [{"type": "extra_forbidden", "loc": ["body", "ignore_eos"],
                                                                   "msg": "Extra inputs are not permitted", "input": True}]}).encode()],
    {}, status=422, reason="Unprocessable Entity", headers={"Content-Type": "application/json"}, framing="length")


def _picky(rejects: list[str], status422: bool = False):
    """A chooser that rejects the first field of ``rejects`` present in the body."""

    def choose(exchange) -> str | None:
        body = json.loads(exchange.body or b"{}")
        present = set(body) | set(body.get("stream_options") or {})
        for field in rejects:
            if field in present:
                return "422-eos" if status422 and field == "ignore_eos" else REJECTIONS[field].name
        return "openai-chat"

    return choose


def _scenario(url: str, **sections):
    data = {"name": "p", "load": {"levels": [1]}, "target": {"base_url": url, "timeout_s": 10}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return parse_scenario(data)


def _server(rejects, status422=False):
    return ReplayServer([OPENAI_CHAT, FASTAPI_422_EOS, *REJECTIONS.values()], choose=_picky(rejects, status422))


def test_a_reasoning_model_endpoint_is_adapted_to_field_by_field():
    with _server(["continuous_usage_stats", "ignore_eos", "temperature", "max_tokens"]) as server:
        result = preflight(_scenario(server.base_url("x")), None)
        last = json.loads(server.exchanges[-1].body)
    assert result.record.ok
    assert [a["field"] for a in result.adaptations] == ["continuous_usage_stats", "ignore_eos", "temperature", "max_tokens"]
    assert result.adaptations[3]["action"] == "sent as max_completion_tokens"
    assert result.dialect.drop == ("continuous_usage_stats", "ignore_eos", "temperature")
    assert result.dialect.max_tokens_field == "max_completion_tokens"
    assert "ignore_eos" not in last and "temperature" not in last and "max_tokens" not in last
    assert last["max_completion_tokens"] == 8 and last["stream_options"] == {"include_usage": True}


def test_a_422_naming_a_field_drops_it():
    with _server(["ignore_eos"], status422=True) as server:
        result = preflight(_scenario(server.base_url("x")), None)
    assert result.record.ok and result.dialect.drop == ("ignore_eos",)
    assert result.adaptations[0]["status"] == 422


def test_a_field_the_user_asked_for_is_never_dropped():
    with _server(["foo"]) as server:
        with pytest.raises(TargetError, match="Unrecognized request argument supplied: foo"):
            preflight(_scenario(server.base_url("x"), workload={"extra_body": {"foo": 1}}), None)


def test_scenario_fields_shape_the_body():
    scenario = _scenario("http://127.0.0.1:1/v1", target={"max_tokens_field": "max_completion_tokens"},
                         workload={"temperature": None, "ignore_eos": False})
    from loadtest.workload import Workload

    body = json.loads(Workload(scenario).next_body())
    assert "temperature" not in body and "ignore_eos" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 64


@pytest.mark.parametrize("mode", [[], ["--workers", "1"]], ids=["local", "workers"])
def test_run_records_the_adaptations_and_says_so(tmp_path, mode):
    with _server(["ignore_eos"]) as server:
        path = write_scenario(tmp_path, server.base_url("x"), load={"levels": [1], "level_duration_s": 2, "warmup_s": 0.5})
        result = loadtest("run", str(path), "--out", str(tmp_path / "run"), *mode, timeout=120)
        bodies = [json.loads(e.body) for e in server.exchanges if e.body]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "preflight: the target rejected ignore_eos (HTTP 400" in result.stderr
    pre = json.loads((tmp_path / "run" / "run.json").read_text())["preflight"]
    assert pre["dropped_fields"] == ["ignore_eos"]
    assert [a["field"] for a in pre["adaptations"]][-1] == "ignore_eos"
    # Every request of the load itself went out without the field.
    assert len(bodies) > 5 and all("ignore_eos" not in b for b in bodies[len(pre["attempts"]):])


def test_requests_go_through_http_proxy_and_no_proxy_bypasses_it(monkeypatch):
    with ReplayServer([OPENAI_CHAT]) as proxy:
        # Nothing listens on the target's port: only the proxy can answer.
        target = "http://127.0.0.1:9/zoo/openai-chat/v1"
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = StreamingClient(target, "chat", timeout_s=10)
        rec = client.send(build_body("chat", "m", "hi", 4))
        client.close()
        assert rec.ok, rec.error
        assert proxy.exchanges[-1].headers["x-absolute-form"] == target + "/chat/completions"
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        client = StreamingClient(target, "chat", timeout_s=5)
        rec = client.send(build_body("chat", "m", "hi", 4))
        client.close()
        assert rec.error_kind == "connect"


def test_an_unsupported_proxy_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(InputError, match=r"\$HTTPS_PROXY: a socks5:// proxy is not supported"):
        preflight(_scenario("https://127.0.0.1:9/v1"), None)


def test_header_values_with_line_breaks_are_refused_with_their_yaml_path():
    with pytest.raises(InputError, match=r"target.headers: 'X-A' must not contain a line break"):
        _scenario("http://127.0.0.1:1/v1", target={"headers": {"X-A": "a\nb"}})


def test_ready_scenarios_validate_and_azure_builds_its_url(monkeypatch):
    from pathlib import Path

    from loadtest.client.stream import client_for
    from loadtest.scenario import load_scenario

    for path in sorted(Path(__file__).parents[2].glob("scenarios/*.yaml")):
        load_scenario(path)
    azure = load_scenario(Path(__file__).parents[2] / "scenarios" / "azure-openai.yaml")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key-for-test")
    client = client_for(azure.target, None)
    assert client.path == "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
    assert client.headers["api-key"] == "azure-key-for-test" and "Authorization" not in client.headers
    client.close()


def test_retry_after_zero_still_backs_off():
    from loadtest.load.backoff import MAX_BACKOFF_S, MIN_BACKOFF_S, backoff_s

    assert backoff_s(0.0, 1) == MIN_BACKOFF_S
    assert backoff_s(0.5, 3) == 0.5
    assert backoff_s(60.0, 1) == MAX_BACKOFF_S
    assert [backoff_s(None, n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]

"""``loadtest k8s render``: what it takes from the scenario, and what it refuses to put in a manifest.

Found in a new user's trial (F3, F4, F5, F13):

- secrets written in the scenario (a secret-named header, ``extra_body.api_key``, a nested
  ``session_token``, a ``secret_fields`` name, an inline ``Authorization: Bearer …``, URL
  userinfo or an ``api_key`` query parameter) were copied into the ConfigMap, some verbatim,
  some as the literal ``<redacted>`` that stdout's scrubber wrote over them; render now refuses
  such a file in one line naming the YAML paths, never the values;
- a valid scenario's ConfigMap is the file byte for byte, with no ``<redacted>`` in it;
- without ``--target``/``--model`` every pod ran against a made-up host and model
  (``http://vllm.staging.svc:8000/v1``, ``my-model``), overriding the scenario's own;
- ``--results s3:///x`` (no bucket) was accepted.

The real command, in a subprocess, on real files.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from support.runkit import loadtest, write_scenario

#: Nothing here sends load or measures time.
pytestmark = pytest.mark.untimed

ROOT = Path(__file__).resolve().parents[2]


def _render(*args: str):
    done = loadtest("k8s", "render", *args)
    docs = [d for d in yaml.safe_load_all(done.stdout) if d] if done.returncode == 0 else []
    return done, {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _refused_in_one_line(done, *said: str) -> None:
    assert done.returncode == 2, done.stdout[-500:] + done.stderr
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    for words in said:
        assert words in done.stderr, done.stderr


SECRET = "PlantedSecret4711xyz"


@pytest.mark.parametrize("target, workload, path", [
    ({"headers": {"X-Custom-Secret": SECRET}}, {}, "target.headers.X-Custom-Secret"),
    ({"headers": {"Authorization": f"Bearer sk-{SECRET}"}}, {}, "target.headers.Authorization"),
    ({}, {"extra_body": {"api_key": SECRET}}, "workload.extra_body.api_key"),
    ({}, {"extra_body": {"metadata": {"session_token": SECRET}}}, "workload.extra_body.metadata.session_token"),
    ({"secret_fields": ["tenant_ref"]}, {"extra_body": {"tenant_ref": SECRET}}, "workload.extra_body.tenant_ref"),
    ({"base_url": f"https://alice:{SECRET}@llm.example/v1"}, {}, "target.base_url (its user:password@)"),
    ({"base_url": f"https://llm.example/v1?api_key={SECRET}"}, {}, "target.base_url (query parameter api_key)"),
    ({"query": {"api_key": SECRET}}, {}, "target.query.api_key"),
    ({"metrics": {"url": f"http://scrape:{SECRET}@llm.example:9400/metrics"}}, {},
     "target.metrics.url (its user:password@)"),
    ({}, {"classes": [{"name": "a", "weight": 1, "extra_body": {"user": f"sk-{SECRET}"}}]},
     "workload.classes[0].extra_body.user"),
])
def test_render_refuses_a_secret_written_in_the_scenario_naming_its_yaml_path(tmp_path, target, workload, path):
    scenario = write_scenario(tmp_path, "https://llm.example/v1", target=target, workload=workload)
    done, _ = _render(str(scenario))
    _refused_in_one_line(done, f"{scenario}: an inline secret at {path} (not shown)", "target.api_key_env",
                         "target.headers_env")
    assert SECRET not in done.stderr


def test_render_names_every_inline_secret_of_the_trials_scenario_at_once(tmp_path):
    scenario = tmp_path / "sec.yaml"
    scenario.write_text(f"""name: sec
target:
  base_url: https://alice:{SECRET}@llm.example/v1?api_key={SECRET}
  api_key_env: MY_KEY
  headers:
    Authorization: "Bearer sk-{SECRET}"
    X-Tenant: tenant1
  headers_env: {{X-Api-Token: TOKEN_VAR}}
workload:
  extra_body: {{api_key: {SECRET}}}
load:
  levels: [1, 2]
""")
    done, _ = _render(str(scenario))
    _refused_in_one_line(done, "inline secrets at target.headers.Authorization, target.base_url (its "
                               "user:password@, query parameter api_key), workload.extra_body.api_key (not shown)")
    assert SECRET not in done.stderr and "<redacted>" not in done.stderr


def test_render_refuses_a_credential_in_a_comment_naming_its_line(tmp_path):
    scenario = write_scenario(tmp_path, "https://llm.example/v1")
    scenario.write_text(f"# the old key: sk-{SECRET}\n" + scenario.read_text())
    done, _ = _render(str(scenario))
    _refused_in_one_line(done, f"{scenario}: line 1 reads as a credential")
    assert SECRET not in done.stderr


def test_a_valid_scenarios_configmap_is_the_file_byte_for_byte(tmp_path):
    """Comments and values that merely resemble a credential (stdout printed "a basic <redacted>"),
    Azure's api-version, secrets by variable name: all reach the ConfigMap as written."""
    scenario = tmp_path / "valid.yaml"
    scenario.write_text("""# A basic scenario for the staging endpoint; the key is the bearer token in $STAGING_KEY.
name: valid
target:
  base_url: https://llm.example/openai/deployments/d1
  model: d1
  api_key_env: STAGING_KEY
  headers: {X-Tenant: tenant-1, X-Request-Source: loadtest}
  headers_env: {api-key: AZURE_KEY}
  query: {api-version: 2024-02-15-preview}
workload:
  prompt_tokens: {mean: 64, stddev: 0}
  max_tokens: 16
  extra_body: {max_tokens_hint: 16, author: ci, keywords: [basic authentication]}
load:
  levels: [1, 2]
""")
    done, docs = _render(str(scenario))
    assert done.returncode == 0, done.stderr
    assert "<redacted>" not in done.stdout
    assert docs["ConfigMap", "loadtest-scenario"]["data"]["scenario.yaml"] == scenario.read_text()


def test_render_takes_the_target_and_model_from_the_scenario_unless_overridden(tmp_path):
    scenario = write_scenario(tmp_path, "https://llm.internal:8443/v1", target={"model": "llama-3.1-8b"})
    done, docs = _render(str(scenario))
    assert done.returncode == 0, done.stderr
    settings = docs["ConfigMap", "loadtest-settings"]["data"]
    assert (settings["TARGET_URL"], settings["MODEL"]) == ("https://llm.internal:8443/v1", "llama-3.1-8b")
    done, docs = _render(str(scenario), "--target", "http://vllm.perf.svc:8000/v1", "--model", "other")
    settings = docs["ConfigMap", "loadtest-settings"]["data"]
    assert (settings["TARGET_URL"], settings["MODEL"]) == ("http://vllm.perf.svc:8000/v1", "other")
    helped = loadtest("k8s", "render", "--help")
    assert "default: the scenario's target.base_url" in " ".join(helped.stdout.split())


def test_render_refuses_a_target_url_that_holds_a_secret():
    """The settings ConfigMap is no Secret either."""
    done, _ = _render(str(ROOT / "scenarios" / "quickstart.yaml"), "--target", f"https://u:{SECRET}@llm.example/v1")
    _refused_in_one_line(done, "--target: the URL holds a secret (its user:password@; not shown)")
    assert SECRET not in done.stderr


def test_render_refuses_a_results_url_without_a_bucket():
    done, _ = _render(str(ROOT / "scenarios" / "quickstart.yaml"), "--results", "s3:///x")
    _refused_in_one_line(done, "--results 's3:///x': no bucket name")

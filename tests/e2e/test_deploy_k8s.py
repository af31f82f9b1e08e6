"""deploy/kubernetes and ``loadtest k8s render``: valid manifests, and a nightly gate that runs.

No cluster is used. Every manifest (rendered, the Kustomize base and overlay, the
LocustTest example's commands) is checked against the published Kubernetes schemas
with ``kubernetes-validate``; the CronJob's script is the CI example's and is run by
bash here against the mock, night after night.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadtest.cli import build_parser
from loadtest.deploy.k8s import NIGHTLY_SCRIPT, RenderOptions, render_objects
from loadtest.mock.process import MockServer
from support.runkit import GATE_VERDICTS, loadtest, write_scenario


ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
K8S_VERSION = "1.30.0"


def _validate(doc: dict) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _key(doc: dict) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def _render(*args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    done = loadtest("k8s", "render", *args)
    docs = [d for d in yaml.safe_load_all(done.stdout) if d] if done.returncode == 0 else []
    return done, docs


@pytest.mark.untimed
def test_rendered_manifests_validate_and_carry_the_scenario(tmp_path):
    scenario = write_scenario(tmp_path, "https://staging.example/v1", name="chat",
                              target={"api_key_env": "STAGING_KEY", "headers_env": {"X-Org": "ORG_TOKEN"}})
    done, docs = _render(str(scenario), "--workers", "5", "--namespace", "perf", "--schedule", "0 3 * * *")
    assert done.returncode == 0, done.stderr
    assert [_key(d) for d in docs] == [("ConfigMap", "loadtest-settings"), ("ConfigMap", "loadtest-scenario"),
                                       ("Service", "loadtest-master"), ("Job", "loadtest-master"),
                                       ("Job", "loadtest-workers"), ("CronJob", "loadtest-nightly")]
    for doc in docs:
        _validate(doc)
        assert doc["metadata"]["namespace"] == "perf"
    by = {_key(d): d for d in docs}
    assert by["ConfigMap", "loadtest-scenario"]["data"]["scenario.yaml"] == scenario.read_text()
    assert by["ConfigMap", "loadtest-settings"]["data"]["EXPECT_WORKERS"] == "5"
    workers = by["Job", "loadtest-workers"]["spec"]
    assert workers["parallelism"] == workers["completions"] == 5
    service = by["Service", "loadtest-master"]["spec"]
    assert service["clusterIP"] == "None" and {p["port"] for p in service["ports"]} == {5557, 9646}
    assert by["CronJob", "loadtest-nightly"]["spec"]["schedule"] == "0 3 * * *"
    pods = [by["Job", "loadtest-master"]["spec"]["template"], workers["template"],
            by["CronJob", "loadtest-nightly"]["spec"]["jobTemplate"]["spec"]["template"]]
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        secret_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
        # The secrets by the scenario's own variable names, from the Secret: never a value in a manifest.
        assert set(secret_env) == {"STAGING_KEY", "ORG_TOKEN"}
        assert all(ref["name"] == "loadtest-secrets" and ref["key"] in secret_env for ref in secret_env.values())
        assert not any("value" in e and e["name"] in secret_env for e in container["env"])
        # CPU requested, never limited: throttling would stall the loop that timestamps chunks.
        assert container["resources"]["requests"]["cpu"] and "cpu" not in container["resources"].get("limits", {})
        aws = [e for e in container["envFrom"] if "secretRef" in e]
        assert (aws == []) == (container["name"] == "worker")  # only pods that write the run folder see the bucket's keys
    # The master and the workers run what a laptop runs: their flags parse once Kubernetes has
    # expanded $(VAR) from the settings ConfigMap.
    settings = by["ConfigMap", "loadtest-settings"]["data"]

    def expand(args):
        return [re.sub(r"\$\((\w+)\)", lambda m: settings[m.group(1)], a) for a in args]

    master_args = by["Job", "loadtest-master"]["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(expand(master_args))
    assert parsed.command == "run" and parsed.master and parsed.expect_workers == 5 and parsed.metrics_port == 9646
    assert parsed.out == settings["RESULTS_URL"] and parsed.target == settings["TARGET_URL"]
    worker_args = workers["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(expand(worker_args))
    assert parsed.command == "worker" and parsed.master_host == "loadtest-master" and parsed.master_port == 5557


@pytest.mark.untimed
@pytest.mark.parametrize("args, what", [
    (["--schedule", "every night"], "--schedule"),
    (["--namespace", "Perf_Team"], "--namespace"),
    (["--workers", "0"], "--workers"),
    # five words but not a schedule a CronJob takes: each field in its range, named
    (["--schedule", "99 3 * * *"], "the minute field '99': 99 is not in 0-59"),
    (["--schedule", "0 24 * * *"], "the hour field '24'"),
    (["--schedule", "0 3 0 * *"], "the day of month field '0'"),
    (["--schedule", "0 3 * 13 *"], "the month field '13'"),
    (["--schedule", "0 3 * * 7"], "the day of week field '7'"),  # robfig/cron, as Kubernetes parses it: 0-6
    (["--schedule", "*/0 * * * *"], "the minute field '*/0'"),
    (["--schedule", "5-2 * * * *"], "runs backwards"),
    (["--schedule", "0 3 * * funday"], "the day of week field 'funday'"),
    # an empty option rendered `image: ''` (a pod that never starts) and exited 0
    (["--image", ""], "--image: must not be empty"),
    (["--image", "  "], "--image: must not be empty"),
    (["--model", ""], "--model: must not be empty"),
    (["--schedule", " "], "--schedule: must not be empty"),
])
def test_render_refuses_bad_input_in_one_line(args, what):
    done, _ = _render(str(ROOT / "scenarios" / "quickstart.yaml"), *args)
    assert done.returncode == 2 and what in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


@pytest.mark.untimed
def test_render_renders_an_open_loop_scenario_without_a_warning(tmp_path):
    """The nightly CronJob's gate judges rate levels too (docs/gate.md): no warning that its nights
    would exit 2, as there was while the gate refused them."""
    scenario = write_scenario(tmp_path, "https://staging.example/v1", name="rates",
                              load={"levels": None, "rates": [2, 4], "level_duration_s": 10})
    done, docs = _render(str(scenario))
    assert done.returncode == 0 and ("CronJob", "loadtest-nightly") in [_key(d) for d in docs], done.stderr
    assert done.stderr == "", done.stderr


@pytest.mark.untimed
@pytest.mark.parametrize("schedule", ["*/15 * * * *", "0-59/5 1,2,3 * * *", "0 3 ? jan-mar mon-fri", "30 2 1 * SUN",
                                      "@hourly", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"])
def test_render_takes_every_cron_form_a_cronjob_takes(schedule):
    done, docs = _render(str(ROOT / "scenarios" / "quickstart.yaml"), "--schedule", schedule)
    assert done.returncode == 0, done.stderr
    assert next(d for d in docs if d["kind"] == "CronJob")["spec"]["schedule"] == schedule


@pytest.mark.untimed
def test_render_takes_a_cron_macro_as_kubernetes_does():
    """``@daily`` is a schedule a CronJob accepts; the one-line refusal names the macros too."""
    done, docs = _render(str(ROOT / "scenarios" / "quickstart.yaml"), "--schedule", "@daily")
    assert done.returncode == 0, done.stderr
    cron = next(d for d in docs if d["kind"] == "CronJob")
    assert cron["spec"]["schedule"] == "@daily"
    _validate(cron)
    done, _ = _render(str(ROOT / "scenarios" / "quickstart.yaml"), "--schedule", "@fortnightly")
    assert done.returncode == 2 and "'@daily'" in done.stderr and "Traceback" not in done.stderr


def _base_without_kustomize() -> list[dict]:
    """The base as Kustomize builds it, for the two features it uses: resources and a configMapGenerator."""
    base = DEPLOY / "base"
    k = yaml.safe_load((base / "kustomization.yaml").read_text())
    docs = [d for f in k["resources"] for d in yaml.safe_load_all((base / f).read_text()) if d]
    for gen in k.get("configMapGenerator", []):
        assert gen["options"]["disableNameSuffixHash"] is True  # the pods refer to the fixed name
        data = {Path(f).name: (base / f).read_text() for f in gen["files"]}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": gen["name"], "labels": gen["options"]["labels"]}, "data": data})
    return docs


def _base_render() -> list[dict]:
    from loadtest.scenario import load_scenario

    scenario = DEPLOY / "base" / "scenario.yaml"
    target = load_scenario(scenario).target
    return render_objects(scenario.read_text(), target.secret_env_names(), RenderOptions.for_scenario(target))


def _by_key(docs: list[dict]) -> dict:
    return {_key(d): json.loads(json.dumps(d)) for d in docs}


@pytest.mark.untimed
def test_the_kustomize_base_is_what_render_prints_and_validates():
    docs = _base_without_kustomize()
    for doc in docs:
        _validate(doc)
    assert _by_key(docs) == _by_key(_base_render())


KUBECTL = shutil.which("kubectl")


def _kustomize(folder: Path) -> list[dict]:
    done = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.untimed
@pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_kustomize_builds_the_base_and_the_overlay_into_valid_manifests():
    assert _by_key(_kustomize(DEPLOY / "base")) == _by_key(_base_render())
    overlay = _kustomize(DEPLOY / "overlays" / "staging")
    for doc in overlay:
        _validate(doc)
        assert doc["metadata"]["namespace"] == "loadtest-staging"
    by = _by_key(overlay)
    expect = int(by["ConfigMap", "loadtest-settings"]["data"]["EXPECT_WORKERS"])
    workers = by["Job", "loadtest-workers"]["spec"]
    assert workers["parallelism"] == workers["completions"] == expect == 4
    images = {c["image"] for d in overlay if d["kind"] in ("Job", "CronJob")
              for c in (d["spec"].get("template") or d["spec"]["jobTemplate"]["spec"]["template"])["spec"]["containers"]}
    assert images == {"registry.example.com/loadtest:0.1.0"}


# Locust's operator appends its own flags (loadtest/deploy/operator_flags.py says which).
OPERATOR_MASTER = "--master --master-port=5557 --expect-workers={n} --autostart --autoquit 60 --enable-rebalancing --only-summary"
OPERATOR_WORKER = "--worker --master-port=5557 --master-host={name}-master"


@pytest.mark.untimed
def test_the_locust_operator_example_runs_loadtest_commands():
    doc = yaml.safe_load((DEPLOY / "locust-operator" / "locusttest.yaml").read_text())
    assert doc["apiVersion"] == "locust.io/v2" and doc["kind"] == "LocustTest"
    spec = doc["spec"]
    n = spec["worker"]["replicas"]
    master = build_parser().parse_args(spec["master"]["command"].split() + OPERATOR_MASTER.format(n=n).split())
    assert master.command == "run" and master.master and master.expect_workers == n and master.master_bind_port == 5557
    assert str(master.out).startswith("s3://") and master.metrics_port == 9646
    worker = build_parser().parse_args(spec["worker"]["command"].split() + OPERATOR_WORKER.format(name=doc["metadata"]["name"]).split())
    assert worker.command == "worker" and worker.master_host == "loadtest-chat-capacity-master" and worker.master_port == 5557
    assert master.scenario == worker.scenario == "/lotest/src/scenario.yaml"  # testFiles.configMapRef's mount


def _run_lines(script: str) -> list[str]:
    """Each ``loadtest run`` command of a shell script, continuation lines joined, spaces normalised."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip().startswith("loadtest run")]


@pytest.mark.untimed
def test_the_cronjob_runs_the_ci_examples_command_lines():
    workflow = yaml.safe_load((ROOT / "examples" / "nightly-regression.yml").read_text())
    step = next(s for s in workflow["jobs"]["gate"]["steps"] if s.get("name", "").startswith("Run the scenario"))
    ci = step["run"].replace("${{ secrets.STAGING_URL }}", "$TARGET_URL").replace("${{ vars.MODEL }}", "$MODEL")
    assert len(_run_lines(ci)) == 2 and _run_lines(NIGHTLY_SCRIPT) == _run_lines(ci)
    cron = next(d for d in _base_render() if d["kind"] == "CronJob")
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "-c", NIGHTLY_SCRIPT]
    committed = yaml.safe_load((DEPLOY / "base" / "nightly-cronjob.yaml").read_text())
    assert committed["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][2] == NIGHTLY_SCRIPT


MOCK = ["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]
GATE_SECTIONS = {
    "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 8, "stddev": 3}},
    # one short level: what the script publishes and where the baseline goes, not the verdict, is judged here
    "load": {"levels": [2], "level_duration_s": 2, "warmup_s": 0.5, "min_level_duration_s": 2},
    "slo": {"tpot_ms": {"p50": 1000}, "itl_ms": {"p50": 1000}, "max_error_rate": 0.5},
}


def nightly(results: str, scenario: Path, base_url: str, env: dict[str, str] | None = None, *,
            repeat: int = 1) -> subprocess.CompletedProcess:
    """The CronJob's pod: its script, by bash, with the variables the manifests give it; with ``repeat``,
    ``--repeat K`` added to its two ``loadtest run`` lines, as a user adds it (the CI example recommends it)."""
    script = NIGHTLY_SCRIPT
    if repeat > 1:
        assert script.count('--out "$RUN_DIR"') == 2
        script = script.replace('--out "$RUN_DIR"', f'--out "$RUN_DIR" --repeat {repeat}')
    pod_env = {**os.environ, **(env or {}), "SCENARIO": str(scenario), "TARGET_URL": base_url, "MODEL": "mock-model",
               "RESULTS_URL": results, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
               "PYTHONPATH": os.pathsep.join(sys.path)}
    pod_env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(["bash", "-c", script], env=pod_env, capture_output=True, text=True,
                          timeout=180 * repeat, stdin=subprocess.DEVNULL)


def pod_exit(code: int) -> int:
    """The pod's exit for the gate's code: an undecided night (6) does not fail the CronJob."""
    return 0 if code in (0, 6) else code


def _nightly_scenario(folder: Path, base_url: str, **overrides) -> Path:
    scenario = write_scenario(folder, base_url, name="nightly", **{**GATE_SECTIONS, **overrides})
    data = yaml.safe_load(scenario.read_text())
    data["slo"] = GATE_SECTIONS["slo"]
    scenario.write_text(yaml.safe_dump(data))
    return scenario


def _baseline_started(folder: Path) -> float:
    return json.loads((folder / "run.json").read_text())["started_wall"]


# Untimed: the gate's verdict on the second night is not this test's subject (test_compare_e2e.py and
# test_gate_drift.py judge same-server runs, alone on the cores). Whatever it is, the script must
# publish it and move the baseline forward on a pass (exit 0) and only then.
@pytest.mark.untimed
def test_the_cronjob_script_gates_each_night_and_moves_the_baseline_only_on_a_pass(tmp_path):
    results = tmp_path / "results"
    with MockServer([*MOCK, "--decode-per-seq-ms", "10"]) as mock:
        scenario = _nightly_scenario(tmp_path, mock.base_url)
        first = nightly(str(results) + "/", scenario, mock.base_url)
        assert first.returncode == 0, first.stderr
        assert "No baseline at" in first.stdout
        baseline = results / "baseline"
        assert {p.name for p in baseline.iterdir()} >= {"requests.parquet", "run.json", "summary.json"}
        night1 = _baseline_started(baseline)

        second = nightly(str(results), scenario, mock.base_url)
        code = int(re.search(r"nightly gate: exit (\d+)", second.stdout).group(1))
        assert code in GATE_VERDICTS, second.stdout + second.stderr  # a verdict: not 2 (refused) or a crash
        assert second.returncode == pod_exit(code)
        runs = sorted(p for p in results.iterdir() if p.name.startswith("nightly-") and not p.name.endswith("-warmup"))
        assert len(runs) == 2 and (runs[1] / "compare.junit.xml").is_file()
        # a gate run starts with a warm-up run (run --warmup-run, on with --baseline): kept beside it, never compared
        warmup = runs[1].with_name(runs[1].name + "-warmup")
        assert json.loads((warmup / "run.json").read_text())["warmup_run"] is True
        assert "loadtest compare" in second.stdout  # the Markdown, published in the pod's log
        night2 = _baseline_started(baseline)
        assert (night2 > night1) == (code == 0)  # forward only on a pass

        # A night whose workload changed is incomparable (exit 2): the pod fails, the baseline stays.
        changed = _nightly_scenario(tmp_path, mock.base_url, workload={**GATE_SECTIONS["workload"], "max_tokens": 12})
        third = nightly(str(results), changed, mock.base_url)
        assert third.returncode == 2, third.stdout + third.stderr
        assert _baseline_started(baseline) == night2


@pytest.mark.untimed
def test_a_passing_night_whose_promote_fails_exits_5_and_keeps_the_folder(tmp_path):
    """Exit 3 said "target unusable" of a night whose target served it well: 5 is the documented code
    of results that could not be written. Here the promote refuses a BASELINE holding someone's files."""
    results, baseline = tmp_path / "results", tmp_path / "notes"
    baseline.mkdir()
    (baseline / "todo.txt").write_text("not a baseline")
    with MockServer([*MOCK, "--decode-per-seq-ms", "10"]) as mock:
        night = nightly(str(results), _nightly_scenario(tmp_path, mock.base_url), mock.base_url,
                        env={"BASELINE": str(baseline)})
    assert night.returncode == 5, night.stdout + night.stderr
    assert "holds files a promote did not write (todo.txt)" in night.stderr
    assert [p.name for p in baseline.iterdir()] == ["todo.txt"]


@pytest.mark.untimed
def test_a_night_whose_baseline_cannot_be_read_fails_without_a_run_and_keeps_it(tmp_path):
    """``baseline exists`` says 2 for a baseline whose run.json is corrupt: the night ends there, red,
    rather than comparing with it (every night failing) or running as a first night and promoting over it."""
    results = tmp_path / "results"
    baseline = _finished_run(results / "baseline")
    (baseline / "run.json").write_text('{"complete": tr')
    kept = {p.name: p.read_bytes() for p in baseline.iterdir()}
    # nothing listens there: the script must not get as far as a run (it would fail with exit 3, not 2)
    night = nightly(str(results), tmp_path / "no-scenario.yaml", "http://127.0.0.1:9/v1")
    assert night.returncode == 2, night.stdout + night.stderr
    assert f"{baseline}/run.json: not valid JSON" in night.stderr and "Traceback" not in night.stderr
    assert "nightly gate: exit 2 (the baseline" in night.stdout
    assert sorted(p.name for p in results.iterdir()) == ["baseline"]  # no run folder
    assert {p.name: p.read_bytes() for p in baseline.iterdir()} == kept


@pytest.mark.untimed
def test_promote_refuses_an_interrupted_run_and_replaces_the_old_baseline_whole(tmp_path):
    run, baseline = tmp_path / "night", tmp_path / "baseline"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"complete": False}))
    (run / "summary.json").write_text('{"levels": []}')
    refused = loadtest("baseline", "promote", str(run), str(baseline))
    assert refused.returncode == 2 and "did not complete" in refused.stderr and not baseline.exists()
    assert loadtest("baseline", "exists", str(baseline)).returncode == 1
    baseline.mkdir()
    (baseline / "run.json").write_text(json.dumps({"complete": True, "old": True}))
    (baseline / "server_metrics.parquet").write_text("old")  # not in the new run: must not linger
    (run / "run.json").write_text(json.dumps({"complete": True}))
    _write_parquet(run / "requests.parquet")
    (run / "locust.log").write_text("log")
    done = loadtest("baseline", "promote", str(run), str(baseline))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in baseline.iterdir()) == ["requests.parquet", "run.json", "summary.json"]
    assert json.loads((baseline / "run.json").read_text()) == {"complete": True}
    assert loadtest("baseline", "exists", str(baseline)).returncode == 0


def _write_parquet(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"t_send": [0.0, 1.0]}), path)


def _finished_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"complete": True}))
    (folder / "summary.json").write_text('{"levels": []}')
    _write_parquet(folder / "requests.parquet")
    return folder


@pytest.mark.untimed
@pytest.mark.parametrize("where", ["same", "baseline inside the run", "run inside the baseline"])
def test_promote_refuses_a_baseline_that_is_or_holds_the_run_and_deletes_nothing(tmp_path, where):
    """A promote deletes the baseline's old files: pointed at the run itself, it would delete the run."""
    if where == "run inside the baseline":
        baseline = tmp_path / "p"
        run = _finished_run(baseline / "night")
    else:
        run = _finished_run(tmp_path / "night")
        baseline = run if where == "same" else run / "baseline"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    refused = loadtest("baseline", "promote", str(run), str(baseline))
    assert refused.returncode == 2, refused.stderr
    assert "same folder or one holds the other" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.untimed
def test_promote_refuses_a_folder_that_is_not_a_baseline_and_keeps_its_files(tmp_path):
    run = _finished_run(tmp_path / "night")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plan.md").write_text("mine")
    (notes / "summary.json").write_text("{}")
    refused = loadtest("baseline", "promote", str(run), str(notes))
    assert refused.returncode == 2 and "plan.md" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.name for p in notes.iterdir()) == ["plan.md", "summary.json"]
    # a promote cut short (run.json removed first, the rest half-copied) is still a folder a promote may finish
    half = tmp_path / "half"
    half.mkdir()
    _write_parquet(half / "requests.parquet")
    (half / "summary.json.tmp").write_text("{")
    done = loadtest("baseline", "promote", str(run), str(half))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in half.iterdir()) == ["requests.parquet", "run.json", "summary.json"]


@pytest.mark.untimed
def test_promote_refuses_a_truncated_parquet_and_keeps_the_old_baseline(tmp_path):
    old = _finished_run(tmp_path / "old")
    baseline = tmp_path / "baseline"
    assert loadtest("baseline", "promote", str(old), str(baseline)).returncode == 0
    kept = {p.name: p.read_bytes() for p in baseline.iterdir()}
    run = _finished_run(tmp_path / "night")
    data = (run / "requests.parquet").read_bytes()
    (run / "requests.parquet").write_bytes(data[: len(data) // 2])
    refused = loadtest("baseline", "promote", str(run), str(baseline))
    assert refused.returncode == 2, refused.stderr
    assert "requests.parquet: not a readable Parquet file" in refused.stderr and "Traceback" not in refused.stderr
    assert {p.name: p.read_bytes() for p in baseline.iterdir()} == kept
    assert loadtest("baseline", "exists", str(baseline)).returncode == 0


@pytest.mark.untimed
@pytest.mark.parametrize("damage, said", [
    ("summary", "summary.json: not valid JSON"),
    ("levels", "summary.json: not a loadtest summary (no 'levels')"),
    ("records", "no records (requests.parquet)"),
    ("run.json", "run.json: not valid JSON"),
])
def test_promote_refuses_a_run_the_gate_could_not_read_and_keeps_the_old_baseline(tmp_path, damage, said):
    """A corrupt summary, one without levels or a run without records was promoted, and every later
    night's compare then refused the baseline (exit 2): the gate stayed red until someone looked."""
    baseline = tmp_path / "baseline"
    assert loadtest("baseline", "promote", str(_finished_run(tmp_path / "old")), str(baseline)).returncode == 0
    kept = {p.name: p.read_bytes() for p in baseline.iterdir()}
    run = _finished_run(tmp_path / "night")
    if damage == "summary":
        (run / "summary.json").write_text('{"format": 1, "name": ')
    elif damage == "levels":
        (run / "summary.json").write_text('{"capacity": {"concurrency": 4}}')
    elif damage == "records":
        (run / "requests.parquet").unlink()
    else:
        (run / "run.json").write_text("[")
    refused = loadtest("baseline", "promote", str(run), str(baseline))
    assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in baseline.iterdir()} == kept


@pytest.mark.untimed
def test_promote_replaces_a_baseline_that_was_analyzed_again_or_copied_from_a_run(tmp_path):
    """``analyze BASELINE --slo …`` writes report.html and autoscaling.yaml into the baseline (back
    to the bucket for s3://), and a baseline made with ``cp -r`` of a run folder holds its logs: the
    next night's promote replaces them, instead of refusing every promote from then on."""
    baseline = _finished_run(tmp_path / "baseline")
    for name in ("report.html", "autoscaling.yaml", "locust.log", "scraper.log", "worker-2.log"):
        (baseline / name).write_text("old")
    (baseline / "server_metrics.parts").mkdir()
    (baseline / "server_metrics.parts" / "part-0001.parquet").write_text("old")
    run = _finished_run(tmp_path / "night")
    done = loadtest("baseline", "promote", str(run), str(baseline))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in baseline.rglob("*") if p.is_file()) == ["requests.parquet", "run.json", "summary.json"]
    # a file no run writes still makes it a folder that is not a baseline
    (baseline / "worker-x.log").write_text("mine")
    refused = loadtest("baseline", "promote", str(run), str(baseline))
    assert refused.returncode == 2 and "worker-x.log" in refused.stderr

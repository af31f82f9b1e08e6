"""Kubernetes manifests for one scenario: Locust's own master and workers, and a nightly gate.

Nothing here is a new cluster layer: the pods run ``loadtest run --master`` and
``loadtest worker`` exactly as on a laptop (see :mod:`loadtest.load.distributed`),
with the scenario in a ConfigMap, the secrets the scenario names (``api_key_env``,
``headers_env``) from a Secret under the same variable names, and the run folder
in object storage (``--out s3://…/``), so the results outlive the pod.

The same objects are committed as the Kustomize base in ``deploy/kubernetes/base``
(a test checks that ``loadtest k8s render`` of the base's scenario equals it), for
teams that use Kustomize; ``loadtest k8s render`` is for those who do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

#: The image built from the repository's Dockerfile (``ENTRYPOINT ["loadtest"]``).
DEFAULT_IMAGE = "loadtest:latest"
DEFAULT_SCHEDULE = "17 3 * * *"  # the CI example's: 03:17 UTC every night
MASTER_PORT = 5557
METRICS_PORT = 9646
SCENARIO_MOUNT = "/scenario"
SCENARIO_KEY = "scenario.yaml"
SECRET_NAME = "loadtest-secrets"
#: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL …: every key becomes a variable
#: (optional: on EKS an IAM role for the service account needs none).
AWS_SECRET_NAME = "loadtest-aws"
SETTINGS_NAME = "loadtest-settings"

#: The nightly gate, as the CronJob's pod runs it (bash). The two ``loadtest run`` lines are the
#: README's CI example's (examples/nightly-regression.yml), with GitHub's ``${{ … }}`` expressions
#: as the pod's variables; a test checks that they stay equal and runs this script against the mock.
#: The baseline moves forward only on a pass (exit 0): a regression (1), an undecided night (6)
#: or an incomparable run (2) leaves it where it is. A baseline that ``baseline exists`` cannot
#: read (exit 2), or cannot reach, ends the night there: taken for no baseline, the night would run
#: without the gate and promote itself over it. A passing night whose promote fails exits 5, the code
#: of results that could not be written (3 was "target unusable" everywhere else); the old baseline stays.
NIGHTLY_SCRIPT = r"""set +e
RUN_DIR="${RESULTS_URL%/}/nightly-$(date -u +%Y%m%dT%H%M%SZ)"
BASELINE="${BASELINE:-${RESULTS_URL%/}/baseline}"
HISTORY="${HISTORY:-${RESULTS_URL%/}/}"
GITHUB_STEP_SUMMARY="${GITHUB_STEP_SUMMARY:-$(mktemp)}"
: > "$GITHUB_STEP_SUMMARY"
loadtest baseline exists "$BASELINE"
have=$?
if [ "$have" -gt 1 ]; then
  echo "loadtest nightly gate: exit $have (the baseline $BASELINE cannot be read; no run)"
  exit "$have"
fi
if [ "$have" -eq 0 ]; then
  loadtest run "$SCENARIO" --target "$TARGET_URL" --model "$MODEL" \
    --out "$RUN_DIR" --baseline "$BASELINE" --history "$HISTORY" \
    --junit "$RUN_DIR/compare.junit.xml" --markdown "$GITHUB_STEP_SUMMARY"
else
  echo "No baseline at $BASELINE yet: this run becomes the baseline if it completes." >> "$GITHUB_STEP_SUMMARY"
  loadtest run "$SCENARIO" --target "$TARGET_URL" --model "$MODEL" --out "$RUN_DIR"
fi
code=$?
cat "$GITHUB_STEP_SUMMARY"
if [ "$code" -eq 0 ]; then
  loadtest baseline promote "$RUN_DIR" "$BASELINE" || exit 5
fi
echo "loadtest nightly gate: exit $code ($RUN_DIR)"
case "$code" in 0|6) exit 0 ;; *) exit "$code" ;; esac
"""


@dataclass(frozen=True)
class RenderOptions:
    #: TARGET_URL and MODEL in the settings ConfigMap, which every pod passes to ``--target`` and
    #: ``--model``: the scenario's own ``target.base_url`` and ``target.model`` unless overridden.
    #: No default: a made-up one overrode the scenario's target in every pod.
    target_url: str
    model: str
    workers: int = 2
    namespace: str | None = None
    schedule: str = DEFAULT_SCHEDULE
    image: str = DEFAULT_IMAGE
    results_url: str = "s3://loadtest-results/runs/"

    @classmethod
    def for_scenario(cls, target: Any, **overrides: Any) -> "RenderOptions":
        """The options for a scenario's ``target``, its endpoint and model in the settings."""
        return cls(**{"target_url": target.base_url, "model": target.model, **overrides})


def _labels(role: str | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": "loadtest", "app.kubernetes.io/part-of": "loadtest"}
    if role:
        labels["app.kubernetes.io/component"] = role
    return labels


def _meta(name: str, opts: RenderOptions, role: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels(role)}
    if opts.namespace:
        meta["namespace"] = opts.namespace
    return meta


def _secret_env(secret_names: list[str]) -> list[dict[str, Any]]:
    """Each variable the scenario reads a secret from, from the Secret's key of the same name."""
    return [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": name, "optional": True}}}
        for name in secret_names
    ]


#: CPU is requested, never limited: CFS throttling would stall the event loop that timestamps
#: chunks (the self-check would then flag the levels). Memory is limited, as the records are flushed.
RESOURCES = {
    "master": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
    "worker": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
    "gate": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "8Gi"}},
}


def _container(name: str, opts: RenderOptions, secret_names: list[str], **fields: Any) -> dict[str, Any]:
    extra_env = fields.pop("env", [])
    env_from: list[dict[str, Any]] = [{"configMapRef": {"name": SETTINGS_NAME}}]
    if name != "worker":  # only the pods that write the run folder need the bucket's credentials
        env_from.append({"secretRef": {"name": AWS_SECRET_NAME, "optional": True}})
    c: dict[str, Any] = {
        "name": name,
        "image": opts.image,
        **fields,
        "envFrom": env_from,
        "resources": RESOURCES[name],
        "volumeMounts": [{"name": "scenario", "mountPath": SCENARIO_MOUNT, "readOnly": True}],
    }
    env = _secret_env(secret_names) + extra_env
    if env:
        c["env"] = env
    return c


def _pod_spec(container: dict[str, Any], restart: str, grace_s: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": [container],
        "volumes": [{"name": "scenario", "configMap": {"name": "loadtest-scenario"}}],
    }
    if grace_s is not None:
        # SIGTERM ends the load gracefully: the records are analyzed and uploaded before the pod goes.
        spec["terminationGracePeriodSeconds"] = grace_s
    return spec


def render_objects(scenario_text: str, secret_names: list[str], opts: RenderOptions) -> list[dict[str, Any]]:
    """The manifests, as dicts, in the order ``kubectl apply`` wants them."""
    scenario_path = f"{SCENARIO_MOUNT}/{SCENARIO_KEY}"
    settings = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(SETTINGS_NAME, opts),
        "data": {"TARGET_URL": opts.target_url, "MODEL": opts.model, "RESULTS_URL": opts.results_url,
                 "EXPECT_WORKERS": str(opts.workers)},
    }
    scenario = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta("loadtest-scenario", opts),
        "data": {SCENARIO_KEY: scenario_text},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta("loadtest-master", opts, "master"),
        "spec": {
            "clusterIP": "None",  # headless: workers reach the master pod by name
            "publishNotReadyAddresses": True,
            "selector": _labels("master"),
            "ports": [
                {"name": "locust", "port": MASTER_PORT, "targetPort": MASTER_PORT, "protocol": "TCP"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"},
            ],
        },
    }
    master_args = [
        "run", scenario_path, "--target", "$(TARGET_URL)", "--model", "$(MODEL)",
        "--master", "--expect-workers", "$(EXPECT_WORKERS)", "--master-bind-port", str(MASTER_PORT),
        "--worker-timeout", "600", "--out", "$(RESULTS_URL)",
        "--metrics-host", "0.0.0.0", "--metrics-port", str(METRICS_PORT),
    ]
    master = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("loadtest-master", opts, "master"),
        "spec": {
            "backoffLimit": 0,  # a run is not retried: a second one would be another run
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {
                    "labels": _labels("master"),
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                                    "prometheus.io/path": "/metrics"},
                },
                "spec": _pod_spec(_container(
                    "master", opts, secret_names, args=master_args,
                    ports=[{"name": "locust", "containerPort": MASTER_PORT},
                           {"name": "metrics", "containerPort": METRICS_PORT}],
                ), "Never", grace_s=300),
            },
        },
    }
    worker_args = [
        "worker", scenario_path, "--master-host", "loadtest-master", "--master-port", str(MASTER_PORT),
        # the master pod binds after its preflight and warm-up: wait for it as long as it waits for us
        "--master-wait", "600", "--target", "$(TARGET_URL)", "--model", "$(MODEL)",
    ]
    workers = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("loadtest-workers", opts, "worker"),
        "spec": {
            "parallelism": opts.workers,
            "completions": opts.workers,
            # A worker that starts before the master's name resolves exits and is restarted.
            "backoffLimit": 10 * opts.workers,
            "ttlSecondsAfterFinished": 86400,
            "template": {
                "metadata": {"labels": _labels("worker")},
                "spec": _pod_spec(_container("worker", opts, secret_names, args=worker_args), "OnFailure"),
            },
        },
    }
    nightly = {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta("loadtest-nightly", opts, "nightly"),
        "spec": {
            "schedule": opts.schedule,
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",  # two nights at once would load the endpoint twice
            "successfulJobsHistoryLimit": 7,
            "failedJobsHistoryLimit": 7,
            "jobTemplate": {"spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": _labels("nightly")},
                    "spec": _pod_spec(_container(
                        "gate", opts, secret_names, command=["bash", "-c", NIGHTLY_SCRIPT],
                        env=[{"name": "SCENARIO", "value": scenario_path}],
                    ), "Never", grace_s=300),
                },
            }},
        },
    }
    return [settings, scenario, service, master, workers, nightly]


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None  # the scenario and the script stay readable
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return "---\n".join(yaml.dump(o, Dumper=_Dumper, sort_keys=False, width=120) for o in objects)


def render(scenario_text: str, secret_names: list[str], opts: RenderOptions) -> str:
    """The manifests as one multi-document YAML, with a header that says how to make the Secret."""
    keys = " ".join(f"--from-literal={n}=…" for n in secret_names) or "(the scenario names no secret)"
    header = (
        "# loadtest on Kubernetes: apply, then watch the master Job (kubectl logs -f job/loadtest-master).\n"
        f"# Secrets never go in these files: kubectl create secret generic {SECRET_NAME} {keys}\n"
        f"# Object storage: IAM for the service account, or kubectl create secret generic {AWS_SECRET_NAME} "
        "--from-literal=AWS_ACCESS_KEY_ID=… --from-literal=AWS_SECRET_ACCESS_KEY=… [--from-literal=AWS_ENDPOINT_URL=…]\n"
        "# Dataset files the scenario names must be in the image or added to the loadtest-scenario ConfigMap.\n"
    )
    return header + to_yaml(render_objects(scenario_text, secret_names, opts))

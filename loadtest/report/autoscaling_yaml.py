"""``autoscaling.yaml``: the recommendation as manifests a cluster can take.

Two alternatives on the best signal, in one file: a KEDA ``ScaledObject``
with a Prometheus trigger, and a plain ``autoscaling/v2``
``HorizontalPodAutoscaler`` with a Pods metric (served by prometheus-adapter).
Names only the user knows (namespace, deployment, Prometheus address, the
label selector of the pods) are ``<PLACEHOLDERS>``; every choice is
commented. The text is built by hand because YAML comments matter here and
PyYAML drops them; the tests parse it and check it against the published
schemas.

Threshold semantics match on both sides: KEDA's Prometheus trigger (metric
type AverageValue) and the HPA's ``AverageValue`` target both compute
replicas = ceil(total over pods / threshold), so the threshold is per replica,
as summary.json gives it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from loadtest.analysis.results import Analysis, fmt_rate
from loadtest.analysis.cost import replicas_for
from loadtest.analysis.run_cost import peak_plan
from loadtest.analysis.thresholds import PLACEHOLDER
from loadtest.records import replace_text

AUTOSCALING_YAML = "autoscaling.yaml"
#: Placeholder replica bounds when no peak was given (--peak-users, --peak-rps): the user sizes them.
MAX_REPLICAS = 4
#: The target for "scale out as soon as a request waits". Both autoscalers add replicas only when
#: ceil(total / target) exceeds the current count, and the HPA only beyond its 10% tolerance: with a
#: target of 1, one waiting request on one replica asks for ceil(1 / 1) = 1 replica and nothing
#: happens until two wait (a level past the SLO's edge). Half a request makes one waiting request
#: on one replica ask for two.
ANY_WAITING_TARGET = 0.5


def autoscaler_target(best) -> float | None:
    """The value the manifests aim for: the threshold, except "any request waits" (see above); None for a
    threshold the run did not measure (too few scrapes), which the manifests leave as a placeholder."""
    if best.role == "waiting" and best.threshold == 1.0:
        return ANY_WAITING_TARGET
    return best.threshold


def _trigger(best) -> str:
    """The trigger in words: "> threshold", or for waiting requests at the any-request-waits threshold, "≥ 1"."""
    if best.role == "waiting" and best.threshold == 1:
        return f"{best.metric} >= 1 (any request waits)"
    if best.threshold is None:
        return f"{best.metric} > {PLACEHOLDER}"
    return f"{best.metric} > {best.threshold:g}"


def _max_replicas(analysis: Analysis) -> tuple[int, str | None]:
    """maxReplicas, and how the peak gave it (None: no peak was given, so it is a placeholder)."""
    plan = peak_plan(analysis)  # the cost forecast's plan, with or without a price
    if plan is None:
        return MAX_REPLICAS, None
    unit, per, peak, headroom = plan
    why = f"{peak:g} peak {unit} / {per * (1 - headroom):.3g} per replica, rounded up"
    return max(1, replicas_for(peak, per, headroom)), why


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def _comment(text: str, width: int = 96) -> str:
    # whole words: an option (--scale-up-s) cut at its hyphens cannot be copied from the comment
    return "\n".join("# " + line for line in textwrap.wrap(text, width - 2, break_on_hyphens=False)) + "\n"


def k8s_quantity(value: float) -> str:
    """A Kubernetes quantity: ``"7"`` or, for a fraction, milli-units (``"600m"``)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def adapter_metric_name(metric: str) -> str:
    """prometheus-adapter's usual renaming: names with ':' are not valid custom-metric names."""
    return metric.replace(":", "_")


def _capacity_line(cap, a) -> str:
    """The capacity the thresholds come from: users (closed loop) or requests/s (open loop).

    A fleet's capacity is the whole endpoint's: it is given as that, with each replica's share,
    so that "per replica" is never said of the fleet's figure.
    """
    replicas = a.replicas if a.replicas and a.replicas > 1 else None
    if cap.rate_rps is not None:
        held = (f"{fmt_rate(cap.rate_rps)} req/s for the {replicas} replicas "
                f"({fmt_rate(cap.rate_rps / replicas)} req/s per replica)" if replicas else
                f"{fmt_rate(cap.rate_rps)} req/s per replica")
        return (
            f"Capacity: {held} within the SLOs"
            + (f" (first failing rate {fmt_rate(cap.first_failing_rate_rps)} req/s, {cap.binding})."
               if cap.first_failing_rate_rps is not None else " (no rate failed: a lower bound).")
            + f" Target rate per replica: {fmt_rate(a.target_rate_rps_per_replica)} req/s."
        )
    held = (f"{cap.concurrency} concurrent users for the {replicas} replicas "
            f"({cap.concurrency / replicas:g} per replica)" if replicas else
            f"{cap.concurrency} concurrent users per replica")
    return (
        f"Capacity: {held} within the SLOs"
        + (f" (first failing level {cap.first_failing}, {cap.binding})." if cap.first_failing else " (no level failed: a lower bound).")
        + f" Target concurrency per replica: {a.target_concurrency_per_replica}."
    )


def _scale_up_advice(scale_up_s: float | None) -> str:
    """What the scale-up time covers, and (when --scale-up-s was not given) to measure and pass it."""
    covers = ("the polling interval below, the HPA's sync period (15 s), scheduling, image pull and "
              "model load")
    if scale_up_s is None:
        return (f"The time from a threshold crossing to a new replica serving includes {covers}: measure it "
                "and pass it as --scale-up-s to derive the headroom.")
    return (f"The time from a threshold crossing to a new replica serving was given as {scale_up_s:g} s "
            f"(--scale-up-s); it includes {covers}.")


def render_autoscaling_yaml(analysis: Analysis) -> str:
    a = analysis.autoscaling
    head = _comment(f"autoscaling.yaml, written by loadtest for run '{analysis.name}' from its measured capacity.")
    best = a.best_signal() if a is not None else None
    if a is None or best is None or (best.threshold is None and not best.placeholder):
        why = a.paragraph if a is not None else "no analysis."
        return head + _comment("No manifest: there is no server-side signal to scale on. " + why)
    threshold = autoscaler_target(best)
    # a threshold the run did not measure is written as a placeholder, never as the few scrapes' number
    value, quantity = (PLACEHOLDER, PLACEHOLDER) if threshold is None else (f"{threshold:g}", k8s_quantity(threshold))
    top, top_why = _max_replicas(analysis)
    cap = analysis.capacity
    out = [
        head,
        _comment(_capacity_line(cap, a)),
        _comment(f"Trigger: {_trigger(best)} per replica. Why: {best.why}"
                 + (f" The manifests aim for {threshold:g} waiting per replica: both autoscalers add a replica "
                    "only when ceil(total / target) exceeds the replicas running, so at 1 one waiting request "
                    "would not add one." if threshold != best.threshold else "")
                 + (f" Replace {PLACEHOLDER} (the threshold, per replica) with a value measured with more scrapes "
                    "per level, or leave the trigger out: this run cannot give one." if threshold is None else "")),
        _comment(a.paragraph),
        "#\n",
        _comment(
            "Two alternatives follow: apply ONE of them, not both (KEDA creates and owns an HPA of its own). "
            "Replace every <PLACEHOLDER>: " + (f"{PLACEHOLDER} (see Why above), " if threshold is None else "")
            + "<NAMESPACE> and <DEPLOYMENT> (the model server's Deployment), "
            "<PROMETHEUS_URL> (e.g. http://prometheus-operated.monitoring.svc:9090) and <POD_SELECTOR> "
            "(PromQL labels that pick this deployment's pods, e.g. namespace=\"llm\",pod=~\"vllm-.*\"). "
            + (f"maxReplicas ({top}) is the peak's: {top_why} (--peak-users / --peak-rps)."
             if top_why else
             f"maxReplicas ({MAX_REPLICAS}) is a placeholder too: "
             + (f"peak requests/s / {a.target_rate_rps_per_replica:g} (target rate per replica), rounded up "
                "(or give --peak-rps)."
                if a.target_rate_rps_per_replica is not None else
                f"peak concurrent users / {a.mean_concurrency_per_replica():g} (users per replica on average), "
                "rounded up (or give --peak-users)."))
        ),
        "#\n",
        _comment(f"Headroom {a.headroom:.0%} ({a.headroom_source}). {_scale_up_advice(a.options.scale_up_s)}"),
        "---\n",
        "# Option 1: KEDA ScaledObject with a Prometheus trigger.\n",
        "apiVersion: keda.sh/v1alpha1\n",
        "kind: ScaledObject\n",
        "metadata:\n",
        f"  name: {_q('<DEPLOYMENT>-loadtest')}\n",
        f"  namespace: {_q('<NAMESPACE>')}\n",
        "spec:\n",
        "  scaleTargetRef:\n",
        f"    name: {_q('<DEPLOYMENT>')}\n",
        "  minReplicaCount: 1\n",
        f"  maxReplicaCount: {top}  # {top_why or 'placeholder: size to your peak'}\n",
        "  pollingInterval: 15  # seconds between Prometheus queries (part of the scale-up time)\n",
        "  cooldownPeriod: 300  # seconds before scaling to minReplicaCount again\n",
        "  triggers:\n",
        "    - type: prometheus\n",
        "      metadata:\n",
        f"        serverAddress: {_q('<PROMETHEUS_URL>')}\n",
        "        # The total over all replicas: KEDA divides it by the threshold to get the replica count.\n",
        f"        query: {_q(f'sum({best.metric}{{<POD_SELECTOR>}})')}\n",
        f"        threshold: {_q(value)}  # per replica, "
        + ("not measured: fill in\n" if threshold is None else
           "from this run: the client's requests in flight (see Why above)\n" if best.basis == "client_in_flight"
           else "from this run\n"),
        "---\n",
        "# Option 2: HorizontalPodAutoscaler (autoscaling/v2) on the same signal as a Pods metric.\n",
        _comment(
            f"It needs prometheus-adapter (or another custom-metrics API server) to serve {best.metric} per pod as "
            f"'{adapter_metric_name(best.metric)}', e.g. with the rule seriesQuery: '{best.metric}' and "
            f"name: {{matches: '^(.*)$', as: '{adapter_metric_name(best.metric)}'}}. Through an external-metrics "
            "adapter, use type: External with the same name and target instead."
        ),
        "apiVersion: autoscaling/v2\n",
        "kind: HorizontalPodAutoscaler\n",
        "metadata:\n",
        f"  name: {_q('<DEPLOYMENT>')}\n",
        f"  namespace: {_q('<NAMESPACE>')}\n",
        "spec:\n",
        "  scaleTargetRef:\n",
        "    apiVersion: apps/v1\n",
        "    kind: Deployment\n",
        f"    name: {_q('<DEPLOYMENT>')}\n",
        "  minReplicas: 1\n",
        f"  maxReplicas: {top}  # {top_why or 'placeholder: size to your peak'}\n",
        "  metrics:\n",
        "    - type: Pods\n",
        "      pods:\n",
        "        metric:\n",
        f"          name: {_q(adapter_metric_name(best.metric))}\n",
        "        target:\n",
        "          type: AverageValue\n",
        f"          averageValue: {_q(quantity)}  # {value} per replica\n",
        "  behavior:\n",
        "    scaleUp:\n",
        "      stabilizationWindowSeconds: 0  # react at once: the headroom is sized for the scale-up time\n",
        "    scaleDown:\n",
        "      stabilizationWindowSeconds: 300  # avoid flapping: a replica is slow to bring back\n",
    ]
    return "".join(out)


def write_autoscaling_yaml(run_dir: Path | str, analysis: Analysis) -> Path:
    path = Path(run_dir) / AUTOSCALING_YAML
    replace_text(path, render_autoscaling_yaml(analysis))
    return path

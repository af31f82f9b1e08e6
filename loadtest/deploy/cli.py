"""``loadtest k8s render``: print the manifests for one scenario (for teams without Kustomize or Helm)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from loadtest.argtypes import non_empty
from loadtest.deploy.cron import schedule_problem
from loadtest.errors import InputError

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def add_arguments(sub: argparse._SubParsersAction, positive_int) -> None:
    # the renderer: only for `loadtest k8s` (the CLI's other commands never load it)
    from loadtest.deploy.k8s import DEFAULT_IMAGE, DEFAULT_SCHEDULE, RenderOptions

    defaults = RenderOptions()
    p = sub.add_parser("k8s", help="Kubernetes: print the manifests for one scenario")
    verbs = p.add_subparsers(dest="k8s_command", required=True, metavar="VERB")
    r = verbs.add_parser("render", help="print the ConfigMaps, master Job, workers Job, headless Service and nightly CronJob")
    r.add_argument("scenario", help="scenario YAML file (it goes into the loadtest-scenario ConfigMap)")
    r.add_argument("--workers", type=positive_int, default=defaults.workers, metavar="N",
                   help=f"worker pods; the master waits for all of them (default {defaults.workers})")
    r.add_argument("--namespace", help="put every object in this namespace (default: kubectl's)")
    r.add_argument("--schedule", default=DEFAULT_SCHEDULE, help=f"the nightly gate's cron line, UTC (default {DEFAULT_SCHEDULE!r})")
    r.add_argument("--image", default=DEFAULT_IMAGE, help=f"the image built from the Dockerfile (default {DEFAULT_IMAGE})")
    r.add_argument("--target", default=defaults.target_url, help="TARGET_URL in the settings ConfigMap")
    r.add_argument("--model", type=non_empty, default=defaults.model, help="MODEL in the settings ConfigMap")
    r.add_argument("--results", default=defaults.results_url, metavar="URL",
                   help="RESULTS_URL: where run folders go, s3://bucket/prefix/ (default %(default)s)")
    r.set_defaults(func=_cmd_render)


def _cmd_render(args: argparse.Namespace) -> int:
    # the renderer and the scenario schema: only for `loadtest k8s render`
    from loadtest.deploy.k8s import RenderOptions, render
    from loadtest.load.modes import load_mode
    from loadtest.run_record import RATE_MODE_WORDS
    from loadtest.scenario import load_scenario

    scenario = load_scenario(args.scenario)  # a bad scenario is one line, before any YAML is printed
    for flag, value in (("--image", args.image), ("--model", args.model), ("--schedule", args.schedule),
                        ("--namespace", args.namespace), ("--target", args.target), ("--results", args.results)):
        if value is not None and not value.strip():  # rendered as `image: ''`: a pod that never starts
            raise InputError(f"{flag}: must not be empty")
    if any(c.isspace() for c in args.image):
        raise InputError(f"--image {args.image!r}: an image reference has no spaces (e.g. registry.example/loadtest:1.4)")
    problem = schedule_problem(args.schedule)
    if problem:
        raise InputError(f"--schedule {args.schedule!r}: {problem}")
    if args.namespace is not None and not _DNS_LABEL.match(args.namespace):
        raise InputError(f"--namespace {args.namespace!r}: not a valid namespace (lower-case letters, digits and '-')")
    try:
        target = urlsplit(args.target)
        usable = target.scheme in ("http", "https") and bool(target.hostname) and (target.port or 0) >= 0
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        usable = False
    if not usable:
        raise InputError(f"--target {args.target!r}: expected the server's http:// or https:// URL, "
                         "e.g. http://vllm.staging.svc:8000/v1")
    if not args.results.startswith("s3://") or len(args.results.rstrip("/")) <= len("s3://"):
        raise InputError(f"--results {args.results!r}: expected s3://bucket/prefix/ (a path inside a pod is "
                         "lost when its Job ends)")
    # the run folders go *under* the prefix: without the "/" the nightly's folders would be named
    # s3://bucket/prefixnightly-… and its baseline s3://bucket/prefixbaseline
    results = args.results if args.results.endswith("/") else args.results + "/"
    opts = RenderOptions(workers=args.workers, namespace=args.namespace, schedule=args.schedule.strip(), image=args.image,
                         target_url=args.target, model=args.model, results_url=results)
    text = Path(args.scenario).read_text(encoding="utf-8")
    mode = load_mode(scenario).name
    if mode in RATE_MODE_WORDS:  # the manifests are still right for one run; the CronJob's nights are not
        print(f"loadtest k8s render: warning: {args.scenario} is {RATE_MODE_WORDS[mode]}: the nightly CronJob's gate "
              "compares closed-loop runs only, so far, so its nights would exit 2; apply the master and workers "
              "alone (docs/gate.md)", file=sys.stderr)
    sys.stdout.write(render(text, scenario.target.secret_env_names(), opts))
    return 0

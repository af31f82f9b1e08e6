"""``loadtest k8s render``: print the manifests for one scenario (for teams without Kustomize or Helm)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from loadtest.argtypes import non_empty
from loadtest.deploy.cron import schedule_problem
from loadtest.deploy.inline_secrets import inline_secret_paths, url_secret_parts
from loadtest.errors import InputError
from loadtest.redact import scrubbed_lines

if TYPE_CHECKING:  # the schema (pydantic): only for `loadtest k8s render`, imported there
    from loadtest.scenario import Scenario

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def add_arguments(sub: argparse._SubParsersAction, positive_int) -> None:
    # the renderer: only for `loadtest k8s` (the CLI's other commands never load it)
    from loadtest.deploy.k8s import DEFAULT_IMAGE, DEFAULT_SCHEDULE, RenderOptions

    defaults = RenderOptions(target_url="", model="")  # the workers and the bucket; the target is the scenario's
    p = sub.add_parser("k8s", help="Kubernetes: print the manifests for one scenario")
    verbs = p.add_subparsers(dest="k8s_command", required=True, metavar="VERB")
    r = verbs.add_parser("render", help="print the ConfigMaps, master Job, workers Job, headless Service and nightly CronJob")
    r.add_argument("scenario", help="scenario YAML file (it goes into the loadtest-scenario ConfigMap)")
    r.add_argument("--workers", type=positive_int, default=defaults.workers, metavar="N",
                   help=f"worker pods; the master waits for all of them (default {defaults.workers})")
    r.add_argument("--namespace", help="put every object in this namespace (default: kubectl's)")
    r.add_argument("--schedule", default=DEFAULT_SCHEDULE, help=f"the nightly gate's cron line, UTC (default {DEFAULT_SCHEDULE!r})")
    r.add_argument("--image", default=DEFAULT_IMAGE, help=f"the image built from the Dockerfile (default {DEFAULT_IMAGE})")
    # the pods run `--target $(TARGET_URL) --model $(MODEL)`: a default other than the scenario's own
    # would override its target in every pod (it once was a made-up host and model)
    r.add_argument("--target", help="TARGET_URL in the settings ConfigMap (default: the scenario's target.base_url)")
    r.add_argument("--model", type=non_empty, help="MODEL in the settings ConfigMap (default: the scenario's target.model)")
    r.add_argument("--results", default=defaults.results_url, metavar="URL",
                   help="RESULTS_URL: where run folders go, s3://bucket/prefix/ (default %(default)s)")
    r.set_defaults(func=_cmd_render)


def _cmd_render(args: argparse.Namespace) -> int:
    # the renderer and the scenario schema: only for `loadtest k8s render`
    from loadtest.deploy.k8s import RenderOptions, render
    from loadtest.scenario import load_scenario

    scenario = load_scenario(args.scenario)  # a bad scenario is one line, before any YAML is printed
    text = Path(args.scenario).read_text(encoding="utf-8")
    refuse_inline_secrets(args.scenario, scenario, text)
    # the scenario's own endpoint unless overridden: the pods pass these to --target and --model
    target_url = scenario.target.base_url if args.target is None else args.target
    model = scenario.target.model if args.model is None else args.model
    for flag, value in (("--image", args.image), ("--model", model), ("--schedule", args.schedule),
                        ("--namespace", args.namespace), ("--target", target_url), ("--results", args.results)):
        if value is not None and not value.strip():  # rendered as `image: ''`: a pod that never starts
            raise InputError(f"{flag}: must not be empty")
    for flag, value in (("--target", target_url), ("--results", args.results)):
        parts = url_secret_parts(value)
        if parts:  # the settings ConfigMap is no Secret either (and stdout would print <redacted> there)
            raise InputError(f"{flag}: the URL holds a secret ({', '.join(parts)}; not shown): the settings "
                             "ConfigMap is no place for it; give the URL without it, and the key through "
                             "the scenario's target.api_key_env or target.headers_env")
    if any(c.isspace() for c in args.image):
        raise InputError(f"--image {args.image!r}: an image reference has no spaces (e.g. registry.example/loadtest:1.4)")
    problem = schedule_problem(args.schedule)
    if problem:
        raise InputError(f"--schedule {args.schedule!r}: {problem}")
    if args.namespace is not None and not _DNS_LABEL.match(args.namespace):
        raise InputError(f"--namespace {args.namespace!r}: not a valid namespace (lower-case letters, digits and '-')")
    try:
        target = urlsplit(target_url)
        usable = target.scheme in ("http", "https") and bool(target.hostname) and (target.port or 0) >= 0
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        usable = False
    if not usable:
        raise InputError(f"--target {target_url!r}: expected the server's http:// or https:// URL, "
                         "e.g. http://vllm.staging.svc:8000/v1")
    if not args.results.startswith("s3://") or len(args.results.rstrip("/")) <= len("s3://"):
        raise InputError(f"--results {args.results!r}: expected s3://bucket/prefix/ (a path inside a pod is "
                         "lost when its Job ends)")
    if not args.results[len("s3://"):].split("/", 1)[0]:  # s3:///x: every pod's upload would fail after its run
        raise InputError(f"--results {args.results!r}: no bucket name (expected s3://bucket/prefix/)")
    # the run folders go *under* the prefix: without the "/" the nightly's folders would be named
    # s3://bucket/prefixnightly-… and its baseline s3://bucket/prefixbaseline
    results = args.results if args.results.endswith("/") else args.results + "/"
    opts = RenderOptions(workers=args.workers, namespace=args.namespace, schedule=args.schedule.strip(), image=args.image,
                         target_url=target_url, model=model, results_url=results)
    manifests = render(text, scenario.target.secret_env_names(), opts)
    if scrubbed_lines(manifests):  # not expected after the checks above: never apply what stdout would alter
        raise InputError(f"{args.scenario}: the manifests hold text that reads as a credential (loadtest's output "
                         "would print <redacted> there); check the scenario and the --target/--model/--results values")
    sys.stdout.write(manifests)
    return 0


#: How to keep a secret out of the scenario, for the one line that refuses it.
_HOW = ("a ConfigMap is readable by anyone who may read the namespace, so k8s render copies no secret into one; "
        "read it from a variable kept in the loadtest-secrets Secret instead: target.api_key_env for the API key, "
        "target.headers_env {header: VARIABLE} for a header (a key sent in the body or the URL can usually "
        "travel as a header)")


def refuse_inline_secrets(where: str, scenario: Scenario, text: str) -> None:
    """:class:`InputError` (one line, exit 2) for a scenario that holds a secret value, naming where, not what.

    A ``loadtest run`` keeps these values out of run.json; a ConfigMap would have held them
    verbatim, or, for the ones shaped like a credential, the text ``<redacted>`` that stdout's
    scrubber wrote over them (an ``Authorization: Bearer <redacted>`` header: a 401 every night).
    """
    paths = inline_secret_paths(scenario)
    if paths:
        noun = "an inline secret" if len(paths) == 1 else "inline secrets"
        raise InputError(f"{where}: {noun} at {', '.join(paths)} (not shown): {_HOW}")
    lines = scrubbed_lines(text)
    if lines:  # a comment, or text the scenario's fields do not hold as written
        shown = ", ".join(str(n) for n in lines[:5]) + (" …" if len(lines) > 5 else "")
        several = len(lines) > 1
        raise InputError(f"{where}: line{'s' if several else ''} {shown} read{'' if several else 's'} as a credential "
                         "(an sk-… key, a Bearer or Basic value, a JWT, a user:password@ or a key query parameter in a "
                         "URL), which loadtest's output would print as <redacted>; remove it from the file. "
                         f"{_HOW[0].upper()}{_HOW[1:]}")

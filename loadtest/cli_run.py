"""``loadtest run`` and ``loadtest worker``: their arguments, and the glue from them to the pipeline.

``run`` checks everything it can before any load is sent (conflicting flags, the
``--out`` folder, the baseline's workload, the metrics port), then runs the
scenario once per planned run (``--repeat``, ``--warmup-run``: repeats.py) and,
with ``--baseline``, the gate. The load stage is imported only by the handlers
that send load, after ``import locust`` (gevent's patches must come first, and
only in the processes that send).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from loadtest.argtypes import non_empty, port_number
from loadtest.cli_common import (
    add_autoscaling_args, autoscaling_overrides, levels_arg, non_negative_float, positive_float, positive_int, rates_arg,
)
from loadtest.fingerprint import fingerprint
from loadtest.compare.gate import add_gate_arguments, output_targets, run_gate
from loadtest.compare.rules import parse_rules
from loadtest.cost_cli import add_cost_args, check_peak_for_mode, cost_options
from loadtest.deploy.operator_flags import add_master_flags, add_worker_flags
from loadtest.errors import InputError
from loadtest.export.flags import add_export_arguments, check_metrics_port, check_port_free, push_after_run
from loadtest.load.cores import check_local_workers
from loadtest.load.modes import load_mode
from loadtest.paths import input_folder, output_folder
from loadtest.redact import ScrubbingFormatter, install_for, remember, url_secrets
from loadtest.repeats import plan, warmup_default
from loadtest.run import RunOptions, check_secret_env, default_run_dir, run_scenario
from loadtest.scenario import load_scenario
from loadtest.storage.glue import GATE_OUTPUTS, remote_io, staged_run
from loadtest.storage.remote import path_arg


def _cmd_run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario).with_overrides(
        target=args.target, model=args.model, levels=args.levels, rates=args.rates, level_duration_s=args.level_duration,
        server_metrics=False if args.no_server_metrics else None,
    )
    check_secret_env(scenario)  # before a staged folder, an s3 download or any request
    # s3:// paths: the baseline is downloaded, the run folder staged locally and uploaded as it grows.
    with remote_io(args, inputs=("baseline", "history")), staged_run(args, scenario), remote_io(args, outputs=GATE_OUTPUTS):
        return _run_and_gate(args, scenario)


def _run_and_gate(args: argparse.Namespace, scenario) -> int:
    if args.levels is not None and args.rates is not None:
        raise InputError("--levels and --rates: choose one (--levels is closed loop, --rates open loop)")
    check_peak_for_mode(cost_options(args), load_mode(scenario).name)
    if args.baseline is not None:
        _check_baseline(args, scenario)
    else:
        gate_flags = [f"--{name.replace('_', '-')}" for name in ("tolerance", "fail_on", "inconclusive", "junit", "markdown", "html", "json", "history")
                      if getattr(args, name) is not None]
        if gate_flags:
            raise InputError(f"{', '.join(gate_flags)}: only with --baseline RUN_DIR (they configure the comparison)")
    if args.out is not None:
        output_folder(args.out, "--out")  # before any load, and never a NotADirectoryError after it
    if args.workers is not None:  # 0 or far more than the cores: one line before any process is spawned
        warning = check_local_workers(args.workers)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    master_only = [f for f, given in (("--expect-workers", args.expect_workers is not None),
                                      ("--master-bind-port", args.master_bind_port != 5557),
                                      ("--master-bind-host", args.master_bind_host != "*")) if given]
    if master_only and not args.master:
        raise InputError(f"{', '.join(master_only)}: only with --master (the master waits for remote workers; "
                         "--workers N starts local ones)")
    if args.workers and args.master:
        raise InputError("--workers and --master: choose one (--workers starts local workers; --master waits for remote ones)")
    _refuse_flags_without_their_switch(args, load_mode(scenario).name)
    _refuse_one_port_twice(args)
    if args.metrics_port is not None:
        check_metrics_port(args.metrics_host, args.metrics_port)
    if args.pushgateway:  # its URL was checked with the arguments; its user and password are secrets too
        remember(*url_secrets(args.pushgateway))
    if args.master:  # locust's master would fail on a taken port with an RPCError traceback, after the start-up
        check_port_free("--master-bind-port", "" if args.master_bind_host == "*" else args.master_bind_host,
                        args.master_bind_port, interface_names=True)
    if args.web:
        check_port_free("--web-port", args.web_host, args.web_port)
    warmup = warmup_default(args.warmup_run, args.baseline is not None, args.web)
    if args.web and (args.repeat > 1 or warmup):
        raise InputError("--web: not with --repeat or --warmup-run (the web UI waits for Start in every run)")
    planned, gate_dir = plan(args.out or default_run_dir(scenario, Path("reports")), args.repeat, warmup)
    measured: list[Path] = []
    lost: list[str] = []  # a measured run whose target stopped answering, in words
    for step in planned:
        outcome = run_scenario(scenario, _run_options(args, step.folder, step.warmup))
        if args.pushgateway and not step.warmup:
            push_after_run(args.pushgateway, outcome.run_dir)
        # An interrupted run is not a completed one: CI must not mistake it for a result.
        if outcome.interrupted:
            return 130
        if not step.warmup:
            measured.append(outcome.run_dir)
        # the target went away mid-run: exit 3, as when the preflight finds it unusable, not a capacity with 0
        if outcome.target_lost is not None and not step.warmup:
            print(f"loadtest run: {outcome.target_lost} (exit 3; the run is analyzed and reported in "
                  f"{outcome.run_dir})", file=sys.stderr)
            if args.baseline is None:
                return 3
            lost.append(outcome.target_lost)
    if args.baseline is not None:
        # the gate judges it first (a server that dies under load is a regression it may show); where it
        # would pass (the baseline failed first at that level too), the outage is not a pass
        code = run_gate(args, args.baseline, measured, default_dir=gate_dir)
        if code == 0 and lost:
            print("loadtest run: the gate found no regression, but the target stopped answering during the run: "
                  "exit 3, not a pass", file=sys.stderr)
            return 3
        return code
    return 0


def _refuse_flags_without_their_switch(args: argparse.Namespace, mode: str) -> None:
    """A flag that would do nothing is refused, as ``--tolerance`` without ``--baseline`` is.

    ``--web-linger 5`` without ``--web`` ran without a word, and the user waited for a UI that never
    came; ``--rate-resolution`` without ``--refine``, or in closed loop (which refines by one user),
    changed nothing either.
    """
    web_only = [flag for flag, given in (("--web-host", args.web_host != "127.0.0.1"), ("--web-port", args.web_port != 8089),
                                         ("--web-linger", args.web_linger != 120.0)) if given]
    if web_only and not args.web:
        raise InputError(f"{', '.join(web_only)}: only with --web (they configure the web UI)")
    if args.rate_resolution is not None:
        if not args.refine:
            raise InputError(f"--rate-resolution {args.rate_resolution:g}: only with --refine (it says when refine stops)")
        if mode == "closed_loop":
            raise InputError(f"--rate-resolution {args.rate_resolution:g}: only in open loop or trace replay "
                             "(closed loop refines to one user)")


def _refuse_one_port_twice(args: argparse.Namespace) -> None:
    """Two of the run's own listeners on one port: the second failed only after the preflight and the warm-up.

    ``check_port_free`` asks whether another process holds a port; two flags giving the same port pass
    it, and the web UI then failed to bind after the run folder was made and traffic was sent.
    """
    ports = [(flag, port) for flag, port, on in (("--web-port", args.web_port, args.web),
                                                 ("--metrics-port", args.metrics_port, args.metrics_port is not None),
                                                 ("--master-bind-port", args.master_bind_port, args.master)) if on]
    for i, (flag, port) in enumerate(ports):
        for other, same in ports[i + 1:]:
            if port == same:
                raise InputError(f"{flag} {port} and {other} {same}: the same port for two listeners of this run; "
                                 "give each its own")


def _run_options(args: argparse.Namespace, out: Path, warmup: bool) -> RunOptions:
    """The run's options from the command line, for one (possibly warm-up) run into ``out``."""
    return RunOptions(
        warmup_run=warmup,
        out=out,
        refine=args.refine,
        rate_resolution=args.rate_resolution,
        workers=args.workers or 0,
        master=args.master,
        expect_workers=args.expect_workers or 1,
        master_bind_host=args.master_bind_host,
        master_bind_port=args.master_bind_port,
        worker_timeout_s=args.worker_timeout,
        autoscaling={k: v for k, v in autoscaling_overrides(args).items() if v is not None},
        cost=cost_options(args),
        web=args.web,
        web_host=args.web_host,
        web_port=args.web_port,
        web_linger_s=args.web_linger,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )


def _check_baseline(args: argparse.Namespace, scenario) -> None:
    """Refuse before any load is sent: a missing baseline, one of another workload, or a --history
    folder that is not there (exit 2)."""
    # start-up time: the comparison's stack (pandas, SciPy) only for a run with --baseline
    from loadtest.compare.alike import require_same_workload, side_fingerprint
    from loadtest.compare.inputs import load_run, mode_words

    parse_rules([t for group in (args.tolerance or []) for t in group], args.fail_on or (), args.inconclusive)
    output_targets(args)
    mode = load_mode(scenario).name  # the scenario with its command-line overrides (--rates) is what would run
    for baseline in args.baseline:
        side = load_run(baseline, records=False, arg="--baseline")
        if side.mode != mode:  # levels of users and of rates are not one axis: refused before any load
            raise InputError(f"incomparable runs: --baseline {side.label} is {mode_words(side.mode)} and the run of "
                             f"{args.scenario} would be {mode_words(mode)}; compare runs of one load mode")
        base = side_fingerprint(side, "baseline")
        require_same_workload(base, fingerprint(scenario.public_dict()), prefix=f"--baseline {baseline}: ")
    for folder in args.history or ():  # a mistyped --history was refused only after the whole load
        input_folder(folder, "--history")


def _cmd_worker(args: argparse.Namespace) -> int:
    # Locust patches the standard library for gevent: before the load stage's modules, and only here
    # (a top-level import would patch every command's process).
    import locust  # noqa: F401

    from loadtest.load.distributed import run_worker

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ScrubbingFormatter("[%(asctime)s] %(levelname)s/%(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])

    scenario = load_scenario(args.scenario).with_overrides(target=args.target, model=args.model)
    check_secret_env(scenario)  # before connecting to the master: a bad key would fail every request
    install_for(scenario.target, scenario.request_bodies())
    run_worker(scenario, args.master_host, args.master_port, args.master_timeout, master_wait_s=args.master_wait)
    return 0


def add_run_commands(sub: argparse._SubParsersAction) -> None:
    """``run`` and ``worker``."""
    p = sub.add_parser("run", help="run a scenario: rising concurrency, per-chunk records, capacity")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--target", help="override target.base_url (e.g. http://127.0.0.1:8000/v1)")
    p.add_argument("--model", type=non_empty, help="override target.model")
    p.add_argument("--out", type=path_arg, help="run folder (default reports/<name>-<UTC timestamp>/); s3://bucket/prefix/ "
                   "puts it under the prefix (written locally, uploaded as it grows)")
    p.add_argument("--levels", type=levels_arg, help="override load levels, e.g. 1,2,4,8")
    p.add_argument("--level-duration", type=positive_float, metavar="S", help="override load.level_duration_s")
    p.add_argument("--rates", type=rates_arg, help="open loop: override load rates (requests/s), e.g. 1,2,4")
    p.add_argument("--refine", action="store_true", help="bisect between the last passing and first failing level")
    p.add_argument("--rate-resolution", type=positive_float, metavar="R",
                   help="open loop: --refine stops when the rate bracket is this narrow (req/s; default 5%% of the failing rate), "
                   "or sooner where a probe would lie within a window's Poisson noise of the bracket's ends")
    p.add_argument("--no-server-metrics", action="store_true", help="do not scrape the target's Prometheus /metrics")
    add_autoscaling_args(p)
    add_cost_args(p)
    web = p.add_argument_group("web UI (Locust's own, with a Levels tab and charts)")
    web.add_argument("--web", action="store_true", help="serve Locust's web UI; its Start button begins the levels, Stop ends the run like Ctrl-C")
    web.add_argument("--web-host", default="127.0.0.1", help="interface for the web UI (default 127.0.0.1)")
    web.add_argument("--web-port", type=port_number, default=8089, help="port for the web UI (default 8089)")
    web.add_argument("--web-linger", type=non_negative_float, default=120.0, metavar="S",
                     help="keep the web UI up this long after the report is written (default 120; Stop or Ctrl-C end it sooner)")
    add_export_arguments(p)
    dist = p.add_argument_group("distributed load (Locust master/workers)")
    dist.add_argument("--workers", type=int, default=None, metavar="N",
                      help="run a master plus N local worker processes (-1: one per core; at most 4 per core)")
    dist.add_argument("--master", action="store_true", help="act as master and wait for workers started with 'loadtest worker'")
    dist.add_argument("--expect-workers", type=positive_int, default=None, metavar="N", help="with --master: workers to wait for (default 1)")
    dist.add_argument("--master-bind-host", default="*", help="with --master: interface to listen on (default all)")
    dist.add_argument("--master-bind-port", type=port_number, default=5557, help="with --master: port (default 5557)")
    dist.add_argument("--worker-timeout", type=positive_float, default=60.0, metavar="S", help="how long to wait for workers (default 60)")
    add_master_flags(dist)  # what the Locust Kubernetes operator appends (hidden)
    p.add_argument("--baseline", type=path_arg, nargs="+", metavar="RUN_DIR",
                   help="after the run, compare it with this run, or these runs as a group, local or s3:// "
                        "(exit code: the comparison's; outputs in the run folder)")
    p.add_argument("--repeat", type=int, default=1, metavar="K",
                   help="run the scenario K times, each in its own folder (--out DIR/run-01 ...); "
                        "with --baseline the gate compares the K runs as a group")
    p.add_argument("--warmup-run", action=argparse.BooleanOptionalAction, default=None,
                   help="first a full warm-up run, kept (DIR-warmup or DIR/warmup) and marked in run.json, "
                        "never compared (default: on with --baseline)")
    add_gate_arguments(p, default_outputs_note=" (with --baseline all four go into the run folder by default)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("worker", help="serve as a Locust worker for a 'loadtest run --master'")
    p.add_argument("scenario", help="the same scenario file the master runs")
    p.add_argument("--master-host", default="127.0.0.1", help="the master's host (default 127.0.0.1)")
    p.add_argument("--master-port", type=port_number, default=5557, help="the master's port (default 5557)")
    p.add_argument("--master-timeout", type=positive_float, default=5.0, metavar="S",
                   help="stop the users and exit (code 4) after this long without the master's heartbeat (default 5)")
    p.add_argument("--master-wait", type=positive_float, default=None, metavar="S",
                   help="exit (code 4) if no master has answered S seconds after start (default: --master-timeout); "
                        "give more when workers start alongside the master (compose, Kubernetes)")
    p.add_argument("--target", help="override target.base_url")
    p.add_argument("--model", type=non_empty, help="override target.model")
    add_worker_flags(p)
    p.set_defaults(func=_cmd_worker)

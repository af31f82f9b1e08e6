"""The ``loadtest`` command: a thin argparse layer over the pipeline's modules.

Each sub-command lives in the module that owns its stage; this file only wires
arguments to them and turns :class:`~loadtest.errors.LoadtestError` into one
line on stderr and an exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from loadtest import __version__
from loadtest.argtypes import positive
from loadtest.errors import LoadtestError

def _cmd_mock(args: argparse.Namespace) -> int:
    from loadtest.mock.cli import run

    return run(args)


def _add_mock(sub: argparse._SubParsersAction) -> None:
    from loadtest.mock.cli import add_arguments

    p = sub.add_parser("mock", help="serve the built-in simulated OpenAI-compatible LLM server")
    add_arguments(p)
    p.set_defaults(func=_cmd_mock)


def _levels_arg(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,2,4; got {text!r}") from None
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError(f"levels must be positive integers; got {text!r}")
    return levels


def _rates_arg(text: str) -> list[float]:
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated rates like 1,2,4 (requests/s); got {text!r}") from None
    if not rates or any(not rate > 0 for rate in rates):
        raise argparse.ArgumentTypeError(f"rates must be positive numbers (requests/s); got {text!r}")
    return rates


_positive = positive  # (loadtest/argtypes.py, shared with the other option modules)
_positive_int = _positive(int)
_positive_float = _positive(float)


def _non_negative_float(text: str) -> float:
    """Seconds that may be zero (``--web-linger 0``: close the UI with the run)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be zero or more; got {text!r}")
    return value


def _fraction(text: str) -> float:
    """A share as ``0.2`` or ``20%`` (the headroom, the traffic growth per minute)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction like 0.2 or a percentage like 20%; got {text!r}") from None
    if not raw.endswith("%") and value > 1:
        raise argparse.ArgumentTypeError(f"a fraction must be at most 1 (for a percentage write {text}%); got {text!r}")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 100%; got {text!r}")
    return value


_fraction.__name__ = "fraction"


def _add_autoscaling_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("autoscaling thresholds (summary.json autoscaling, autoscaling.yaml)")
    g.add_argument("--headroom", type=_fraction, metavar="H", help="scale out this far below capacity (default 20%%)")
    g.add_argument("--scale-up-s", type=_positive_float, metavar="S",
                   help="seconds from a threshold crossing to a new replica serving; derives the headroom from --traffic-growth")
    g.add_argument("--traffic-growth", type=_fraction, metavar="G",
                   help="assumed traffic growth per minute for --scale-up-s (default 10%%)")


def _autoscaling_overrides(args: argparse.Namespace) -> dict[str, float | None]:
    return {"headroom": args.headroom, "scale_up_s": args.scale_up_s, "traffic_growth_per_min": args.traffic_growth}


def _cmd_validate(args: argparse.Namespace) -> int:
    from loadtest.scenario import load_scenario

    from loadtest.workload import prepare

    scenario = load_scenario(args.scenario)
    datasets = prepare(scenario)
    load = scenario.load
    steps = load.rate_levels() if load.open_loop else load.concurrency_levels()
    levels = ", ".join(f"{level:g}" for level in steps)
    total = len(steps) * load.level_duration_s
    what = f"rates {levels} req/s ({load.arrival} arrivals)" if load.open_loop else f"levels {levels}"
    print(f"{args.scenario}: ok ({scenario.name}: {what}, about {total:g} s of load)")
    for d in datasets:
        skipped = f", {d['skipped']} skipped" if d["skipped"] else ""
        print(f"  dataset {d['path']}: {d['rows']} {d['format']} prompts{skipped}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from loadtest.scenario import load_scenario

    scenario = load_scenario(args.scenario).with_overrides(
        target=args.target, model=args.model, levels=args.levels, rates=args.rates, level_duration_s=args.level_duration,
        server_metrics=False if args.no_server_metrics else None,
    )
    from loadtest.storage.glue import GATE_OUTPUTS, remote_io, staged_run

    # s3:// paths: the baseline is downloaded, the run folder staged locally and uploaded as it grows.
    with remote_io(args, inputs=("baseline", "history")), staged_run(args, scenario), remote_io(args, outputs=GATE_OUTPUTS):
        return _run_and_gate(args, scenario)


def _run_and_gate(args: argparse.Namespace, scenario) -> int:
    from loadtest.errors import InputError
    from loadtest.run import RunOptions, run_scenario

    if args.levels is not None and args.rates is not None:
        raise InputError("--levels and --rates: choose one (--levels is closed loop, --rates open loop)")
    if args.baseline is not None:
        _check_baseline(args, scenario)
    else:
        gate_flags = [f"--{name.replace('_', '-')}" for name in ("tolerance", "fail_on", "inconclusive", "junit", "markdown", "html", "json", "history")
                      if getattr(args, name) is not None]
        if gate_flags:
            raise InputError(f"{', '.join(gate_flags)}: only with --baseline RUN_DIR (they configure the comparison)")
    if args.out is not None:
        from loadtest.paths import output_folder

        output_folder(args.out, "--out")  # before any load, and never a NotADirectoryError after it
    if args.workers and args.master:
        raise InputError("--workers and --master: choose one (--workers starts local workers; --master waits for remote ones)")
    if args.metrics_port is not None:
        from loadtest.export.flags import check_metrics_port

        check_metrics_port(args.metrics_host, args.metrics_port)
    from pathlib import Path

    from loadtest.repeats import plan, warmup_default
    from loadtest.run import default_run_dir

    warmup = warmup_default(args.warmup_run, args.baseline is not None, args.web)
    if args.web and (args.repeat > 1 or warmup):
        raise InputError("--web: not with --repeat or --warmup-run (the web UI waits for Start in every run)")
    planned, gate_dir = plan(args.out or default_run_dir(scenario, Path("reports")), args.repeat, warmup)
    measured: list[Path] = []
    for step in planned:
        outcome = run_scenario(scenario, _run_options(args, RunOptions, step.folder, step.warmup))
        if args.pushgateway and not step.warmup:
            from loadtest.export.flags import push_after_run

            push_after_run(args.pushgateway, outcome.run_dir)
        # An interrupted run is not a completed one: CI must not mistake it for a result.
        if outcome.interrupted:
            return 130
        if not step.warmup:
            measured.append(outcome.run_dir)
    if args.baseline is not None:
        from loadtest.compare.gate import run_gate

        return run_gate(args, args.baseline, measured, default_dir=gate_dir)
    return 0


def _run_options(args: argparse.Namespace, RunOptions, out: Path, warmup: bool):  # noqa: N803 (the class, imported late)
    """The run's options from the command line, for one (possibly warm-up) run into ``out``."""
    from loadtest.cost_cli import cost_options

    return RunOptions(
        warmup_run=warmup,
        out=out,
        refine=args.refine,
        rate_resolution=args.rate_resolution,
        workers=args.workers,
        master=args.master,
        expect_workers=args.expect_workers,
        master_bind_host=args.master_bind_host,
        master_bind_port=args.master_bind_port,
        worker_timeout_s=args.worker_timeout,
        autoscaling={k: v for k, v in _autoscaling_overrides(args).items() if v is not None},
        cost=cost_options(args),
        web=args.web,
        web_host=args.web_host,
        web_port=args.web_port,
        web_linger_s=args.web_linger,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )


def _check_baseline(args: argparse.Namespace, scenario) -> None:
    """Refuse before any load is sent: a missing baseline, or one of another workload (exit 2)."""
    from loadtest.compare.engine import require_same_workload, side_fingerprint
    from loadtest.fingerprint import fingerprint
    from loadtest.compare.gate import output_targets
    from loadtest.compare.inputs import load_run
    from loadtest.compare.rules import parse_rules

    parse_rules([t for group in (args.tolerance or []) for t in group], args.fail_on or (), args.inconclusive)
    output_targets(args)
    for baseline in args.baseline:
        base = side_fingerprint(load_run(baseline, records=False, arg="--baseline"), "baseline")
        require_same_workload(base, fingerprint(scenario.public_dict()), prefix=f"--baseline {baseline}: ")


def _cmd_compare(args: argparse.Namespace) -> int:
    from loadtest.compare.gate import run_gate
    from loadtest.storage.glue import GATE_OUTPUTS, remote_io

    with remote_io(args, inputs=("baseline", "candidate", "also_baseline", "also_candidate", "history"), outputs=GATE_OUTPUTS):
        return run_gate(args, [args.baseline, *args.also_baseline], [args.candidate, *args.also_candidate])


def _cmd_history(args: argparse.Namespace) -> int:
    from loadtest.compare.history import run_history
    from loadtest.storage.glue import remote_io

    from loadtest.compare.rules import parse_rules

    rules = parse_rules([t for group in (args.tolerance or []) for t in group])
    with remote_io(args, inputs=("dirs",), outputs=("html", "json")):
        return run_history(args.dirs, scenario=args.scenario, html=args.html, json_path=args.json,
                           fail_on_change_point=args.fail_on_change_point, rules=rules)


def _cmd_worker(args: argparse.Namespace) -> int:
    import locust  # noqa: F401  (gevent's patches go first)

    import logging

    from loadtest.load.distributed import run_worker
    from loadtest.redact import ScrubbingFormatter, install_for
    from loadtest.scenario import load_scenario

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ScrubbingFormatter("[%(asctime)s] %(levelname)s/%(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])

    scenario = load_scenario(args.scenario).with_overrides(target=args.target, model=args.model)
    install_for(scenario.target, scenario.request_bodies())
    run_worker(scenario, args.master_host, args.master_port, args.master_timeout)
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from loadtest.storage.glue import remote_io

    with remote_io(args, write_back=("run_dir",)):  # s3://: downloaded, and the reports uploaded back
        return _analyze(args)


def _analyze(args: argparse.Namespace) -> int:
    from rich.console import Console

    from loadtest.cost_cli import cost_options, merge_cost_options
    from loadtest.analysis import analyze_run
    from loadtest.report import write_reports
    from loadtest.report.terminal import print_summary

    from loadtest.paths import run_folder

    run_folder(args.run_dir, "run_dir", writable=True)
    analysis = analyze_run(args.run_dir, slo_overrides=args.slo or (), autoscaling_overrides=_autoscaling_overrides(args))
    analysis.run["cost_options"] = merge_cost_options(analysis.run.get("cost_options"), cost_options(args))
    paths = write_reports(args.run_dir, analysis)
    print_summary(analysis, console=Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120))
    for path in paths.values():
        print(f"wrote {path}")
    return 0


def _add_pipeline_commands(sub: argparse._SubParsersAction) -> None:
    from pathlib import Path

    from loadtest.cost_cli import add_cost_args
    from loadtest.storage.remote import path_arg

    p = sub.add_parser("run", help="run a scenario: rising concurrency, per-chunk records, capacity")
    p.add_argument("scenario", help="scenario YAML file")
    p.add_argument("--target", help="override target.base_url (e.g. http://127.0.0.1:8000/v1)")
    p.add_argument("--model", help="override target.model")
    p.add_argument("--out", type=path_arg, help="run folder (default reports/<name>-<UTC timestamp>/); s3://bucket/prefix/ "
                   "puts it under the prefix (written locally, uploaded as it grows)")
    p.add_argument("--levels", type=_levels_arg, help="override load levels, e.g. 1,2,4,8")
    p.add_argument("--level-duration", type=_positive_float, metavar="S", help="override load.level_duration_s")
    p.add_argument("--rates", type=_rates_arg, help="open loop: override load rates (requests/s), e.g. 1,2,4")
    p.add_argument("--refine", action="store_true", help="bisect between the last passing and first failing level")
    p.add_argument("--rate-resolution", type=_positive_float, metavar="R",
                   help="open loop: --refine stops when the rate bracket is this narrow (req/s; default 5%% of the failing rate)")
    p.add_argument("--no-server-metrics", action="store_true", help="do not scrape the target's Prometheus /metrics")
    _add_autoscaling_args(p)
    add_cost_args(p)
    web = p.add_argument_group("web UI (Locust's own, with a Levels tab and charts)")
    web.add_argument("--web", action="store_true", help="serve Locust's web UI; its Start button begins the levels, Stop ends the run like Ctrl-C")
    web.add_argument("--web-host", default="127.0.0.1", help="interface for the web UI (default 127.0.0.1)")
    web.add_argument("--web-port", type=_positive_int, default=8089, help="port for the web UI (default 8089)")
    web.add_argument("--web-linger", type=_non_negative_float, default=120.0, metavar="S",
                     help="keep the web UI up this long after the report is written (default 120; Stop or Ctrl-C end it sooner)")
    from loadtest.export.flags import add_export_arguments

    add_export_arguments(p, _positive_int)
    dist = p.add_argument_group("distributed load (Locust master/workers)")
    dist.add_argument("--workers", type=int, default=0, metavar="N", help="run a master plus N local worker processes (-1: one per core)")
    dist.add_argument("--master", action="store_true", help="act as master and wait for workers started with 'loadtest worker'")
    dist.add_argument("--expect-workers", type=_positive_int, default=1, metavar="N", help="with --master: workers to wait for (default 1)")
    dist.add_argument("--master-bind-host", default="*", help="with --master: interface to listen on (default all)")
    dist.add_argument("--master-bind-port", type=_positive_int, default=5557, help="with --master: port (default 5557)")
    dist.add_argument("--worker-timeout", type=_positive_float, default=60.0, metavar="S", help="how long to wait for workers (default 60)")
    from loadtest.deploy.operator_flags import add_master_flags, add_worker_flags

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
    from loadtest.compare.gate import add_gate_arguments

    add_gate_arguments(p, default_outputs_note=" (with --baseline all four go into the run folder by default)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("worker", help="serve as a Locust worker for a 'loadtest run --master'")
    p.add_argument("scenario", help="the same scenario file the master runs")
    p.add_argument("--master-host", default="127.0.0.1", help="the master's host (default 127.0.0.1)")
    p.add_argument("--master-port", type=_positive_int, default=5557, help="the master's port (default 5557)")
    p.add_argument("--master-timeout", type=_positive_float, default=5.0, metavar="S",
                   help="stop the users and exit (code 4) after this long without the master's heartbeat (default 5)")
    p.add_argument("--target", help="override target.base_url")
    p.add_argument("--model", help="override target.model")
    add_worker_flags(p)
    p.set_defaults(func=_cmd_worker)

    p = sub.add_parser("validate", help="check a scenario file without running it")
    p.add_argument("scenario", help="scenario YAML file")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("analyze", help="re-analyze a saved run (optionally with other SLOs)")
    p.add_argument("run_dir", type=path_arg, help="a run folder written by 'loadtest run' (local or s3://)")
    p.add_argument("--slo", action="append", metavar="METRIC.PCT=LIMIT", help="override an SLO, e.g. itl_ms.p95=40 or max_error_rate=0.05")
    _add_autoscaling_args(p)
    add_cost_args(p)
    p.set_defaults(func=_cmd_analyze)

    p = sub.add_parser("compare", help="regression gate: compare a candidate run with a baseline run")
    p.add_argument("baseline", type=path_arg, help="baseline run folder (or its summary.json), local or s3://")
    p.add_argument("candidate", type=path_arg, help="candidate run folder (or its summary.json), local or s3://")
    p.add_argument("--also-baseline", nargs="+", action="extend", type=path_arg, default=[], metavar="RUN_DIR",
                   help="more baseline runs: the gate compares the groups' means")
    p.add_argument("--also-candidate", nargs="+", action="extend", type=path_arg, default=[], metavar="RUN_DIR",
                   help="more candidate runs (e.g. the folders of run --repeat)")
    add_gate_arguments(p)
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("history", help="every run of one scenario over time: a table and an HTML page")
    p.add_argument("dirs", type=path_arg, nargs="+", metavar="DIR", help="folders to search for run folders (e.g. reports/, s3://bucket/prefix/)")
    p.add_argument("--scenario", metavar="NAME", help="the scenario to show when the folders hold several")
    p.add_argument("--html", type=Path, metavar="FILE", default=Path("history.html"), help="the page to write (default history.html)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the table and the change points as JSON")
    p.add_argument("--fail-on-change-point", action="store_true",
                   help="exit 1 when the newest run starts (or continues) a change point that is worse than the tolerance")
    p.add_argument("--tolerance", action="append", nargs="+", metavar="TOL",
                   help="how large a worsening change point must be to fail (default 5%%; per check as for compare)")
    p.set_defaults(func=_cmd_history)

    from loadtest.profile.cli import add_profile_command

    add_profile_command(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadtest",
        description="Capacity testing for OpenAI-compatible LLM endpoints.",
    )
    parser.add_argument("--version", action="version", version=f"loadtest {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_pipeline_commands(sub)
    _add_mock(sub)
    from loadtest.deploy.cli import add_arguments as add_k8s

    add_k8s(sub, _positive_int)
    from loadtest.storage.baseline import add_arguments as add_baseline

    add_baseline(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from loadtest.redact import scrubbed_std_streams

    parser = build_parser()
    args = parser.parse_args(argv)
    with scrubbed_std_streams():  # no secret reaches stdout or stderr, tracebacks included
        try:
            return int(args.func(args) or 0)
        except LoadtestError as err:
            print(f"loadtest {args.command}: error: {err}", file=sys.stderr)
            return err.exit_code
        except OSError as err:
            from loadtest.diskfull import RunFolderFull, full_disk_message, is_disk_full

            if not is_disk_full(err):
                if not err.filename:
                    raise
                # A path problem no check foresaw: still one line naming the file, never a traceback.
                print(f"loadtest {args.command}: error: {err.filename}: {(err.strerror or str(err)).lower()}", file=sys.stderr)
                return 2
            # Any write not handled on the spot (a report, an analysis's outputs): one line, not a traceback.
            print(f"loadtest {args.command}: error: {full_disk_message(err)}", file=sys.stderr)
            return RunFolderFull.exit_code
        except KeyboardInterrupt:
            print(f"loadtest {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())

"""``loadtest validate``, ``analyze``, ``compare`` and ``history``: the commands that read, their arguments and glue.

None of them sends load. The analysis and report stacks (scipy, plotly, rich)
are imported by the handlers that use them, so ``loadtest --help`` and
``validate`` stay quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loadtest.cli_common import add_autoscaling_args, autoscaling_overrides
from loadtest.compare.gate import add_gate_arguments, run_gate
from loadtest.compare.rules import parse_rules
from loadtest.cost_cli import add_cost_args, check_peak_for_mode, cost_options, merge_cost_options
from loadtest.load.modes import load_mode
from loadtest.errors import InputError
from loadtest.paths import read_run_json, run_folder, run_records
from loadtest.redact import public_url
from loadtest.scenario import Scenario, load_scenario
from loadtest.staged_paths import shown
from loadtest.storage.glue import GATE_OUTPUTS, remote_io
from loadtest.storage.remote import path_arg
from loadtest.workload import prepare


def _target_line(scenario: Scenario) -> str:
    """Which endpoint ``run`` would load, and whether the file chose it.

    A scenario without ``target.base_url`` validated as "ok" with no word of where its load would
    go: the default is the built-in mock's address, which a user who forgot the key did not mean.
    """
    target = scenario.target
    chosen = "base_url" in target.model_fields_set
    return (f"target: {public_url(target.base_url)} ({target.api}, model {target.model})"
            + ("" if chosen else ": the default, the built-in mock's address; set target.base_url or pass --target"))


def _cmd_validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    datasets = prepare(scenario)
    mode = load_mode(scenario)
    total = len(mode.levels()) * scenario.load.level_duration_s
    what = mode.describe()
    print(f"{args.scenario}: ok ({scenario.name}: {what}, about {total:g} s of load)")
    print("  " + _target_line(scenario))
    for d in datasets:
        skipped = f", {d['skipped']} skipped" if d["skipped"] else ""
        print(f"  dataset {d['path']}: {d['rows']} {d['format']} prompts{skipped}")
    if scenario.workload.trace is not None:  # read now, as `run` would: a bad trace is one line here too
        # the trace reader: only for a trace-replay scenario
        from loadtest.workload.trace import load_trace

        trace = load_trace(scenario.workload.trace)
        skipped = f", {trace.skipped} skipped" if trace.skipped else ""
        print(f"  trace {trace.path}: {len(trace.rows)} {trace.format} requests in a {trace.period_s:g} s window{skipped}")
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    with remote_io(args, write_back=("run_dir",)):  # s3://: downloaded, and the reports uploaded back
        return _analyze(args)


def _analyze(args: argparse.Namespace) -> int:
    # The analysis and report stacks (scipy, plotly, rich): only for the commands that draw them.
    from loadtest.analysis import analyze_run
    from loadtest.analysis.stop import no_load
    from loadtest.report import write_reports
    from loadtest.report.terminal import print_summary, stdout_console

    run_folder(args.run_dir, "run_dir", writable=True)
    stopped = read_run_json(args.run_dir, "run_dir")
    if (why := no_load(stopped)) is not None:
        raise InputError(f"run_dir {args.run_dir}: {why}; there is nothing to analyze")
    run_records(args.run_dir, "run_dir")
    check_peak_for_mode(cost_options(args), stopped.get("load_mode"))
    analysis = analyze_run(args.run_dir, slo_overrides=args.slo or (), autoscaling_overrides=autoscaling_overrides(args))
    analysis.run["cost_options"] = merge_cost_options(analysis.run.get("cost_options"), cost_options(args))
    paths = write_reports(args.run_dir, analysis)
    print_summary(analysis, console=stdout_console())
    for path in paths.values():
        print(f"wrote {shown(path)}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    with remote_io(args, inputs=("baseline", "candidate", "also_baseline", "also_candidate", "history"), outputs=GATE_OUTPUTS):
        return run_gate(args, [args.baseline, *args.also_baseline], [args.candidate, *args.also_candidate])


def _cmd_history(args: argparse.Namespace) -> int:
    from loadtest.compare.history_page import run_history  # plotly and rich: only for the page it draws

    rules = parse_rules([t for group in (args.tolerance or []) for t in group])
    with remote_io(args, inputs=("dirs",), outputs=("html", "json")):
        return run_history(args.dirs, scenario=args.scenario, html=args.html, json_path=args.json,
                           fail_on_change_point=args.fail_on_change_point, rules=rules)


def add_read_commands(sub: argparse._SubParsersAction) -> None:
    """``validate``, ``analyze``, ``compare`` and ``history``."""
    p = sub.add_parser("validate", help="check a scenario file without running it")
    p.add_argument("scenario", help="scenario YAML file")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("analyze", help="re-analyze a saved run (optionally with other SLOs)")
    p.add_argument("run_dir", type=path_arg, help="a run folder written by 'loadtest run' (local or s3://)")
    p.add_argument("--slo", action="append", metavar="METRIC.PCT=LIMIT", help="override an SLO, e.g. itl_ms.p95=40, max_error_rate=0.05 or min_valid_output_rate=0.99")
    add_autoscaling_args(p)
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

"""``loadtest profile SCENARIO``: the options, and the command (wired into loadtest/cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadtest.argtypes import non_empty, non_negative_int, positive
from loadtest.errors import InputError
from loadtest.profile.plan import ProfilePlan
from loadtest.scenario import load_scenario


_positive_int = positive(int)
_positive_float = positive(float)


def add_profile_command(sub: argparse._SubParsersAction) -> None:
    d = ProfilePlan()
    p = sub.add_parser("profile", help="measure the prefill and decode curves: why it is slow, and what bounds it")
    p.add_argument("scenario", help="scenario YAML file (its target, auth, hardware: and model:; its load is not used)")
    p.add_argument("--target", help="override target.base_url")
    p.add_argument("--model", type=non_empty, help="override target.model")
    p.add_argument("--out", type=Path, help="profile folder (default reports/<name>-profile-<UTC timestamp>/)")
    g = p.add_argument_group("the load plan")
    g.add_argument("--max-prompt-tokens", type=_positive_int, default=d.max_prompt_tokens, metavar="N",
                   help="longest prompt of the prefill ladder (powers of two from 128; capped by the server's context) (default %(default)s)")
    g.add_argument("--prefill-s", type=_positive_float, default=d.prefill_duration_s, metavar="S",
                   help="length of the prefill sweep, one user (default %(default)s)")
    g.add_argument("--max-batch", type=_positive_int, default=d.max_batch, metavar="N",
                   help="largest batch of the decode ladder 1, 2, 4, ..., in sequences per replica (against a fleet "
                        "each level runs that many users per replica) (default %(default)s)")
    g.add_argument("--decode-level-s", type=_positive_float, default=d.decode_level_s, metavar="S",
                   help="length of each decode level (default %(default)s)")
    g.add_argument("--decode-prompt-tokens", type=_positive_int, default=d.decode_prompt_tokens, metavar="N",
                   help="prompt words per decode request: short, so that admitting a request adds little prefill to a step (default %(default)s)")
    g.add_argument("--decode-max-tokens", type=_positive_int, default=d.decode_max_tokens, metavar="N",
                   help="output tokens per decode request, ignore_eos (default %(default)s)")
    g.add_argument("--warmup", type=_positive_float, default=d.warmup_s, metavar="S",
                   help="unmeasured start of each level (default %(default)s)")
    g.add_argument("--knee-rounds", type=non_negative_int, default=d.knee_rounds, metavar="N",
                   help="rounds of batch sizes between the two measured either side of the fitted knee, "
                        f"up to {d.knee_probes} levels each; 0: none (default %(default)s)")
    p.set_defaults(func=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    # gevent's patching before any socket opens, and only in the process that sends load; the
    # analysis and report stacks (scipy, plotly, rich) are not for `loadtest --help`.
    import locust  # noqa: F401
    from loadtest.analysis.stack import resolve
    from loadtest.profile.output import print_profile, profile_dict, write_profile_html, write_profile_json
    from loadtest.profile.runner import ProfileOptions, run_profile
    from loadtest.report.terminal import stdout_console
    from loadtest.run import check_secret_env

    scenario = load_scenario(args.scenario).with_overrides(target=args.target, model=args.model)
    check_secret_env(scenario)  # before the profile folder and the server-facts requests
    if args.warmup >= args.decode_level_s or args.warmup >= args.prefill_s:
        raise InputError(f"--warmup {args.warmup:g}: must be shorter than --decode-level-s and --prefill-s")
    plan = ProfilePlan(
        max_prompt_tokens=args.max_prompt_tokens, prefill_duration_s=args.prefill_s, max_batch=args.max_batch,
        decode_level_s=args.decode_level_s, decode_max_tokens=args.decode_max_tokens, warmup_s=args.warmup,
        decode_prompt_tokens=args.decode_prompt_tokens, knee_rounds=args.knee_rounds,
    )
    if args.max_prompt_tokens < plan.min_prompt_tokens:
        plan.min_prompt_tokens = max(8, args.max_prompt_tokens // 4)
    data = run_profile(scenario, ProfileOptions(out=args.out, plan=plan))
    ceilings, model = resolve(scenario, data.server_facts)
    profile = profile_dict(data, ceilings, model)
    write_profile_json(data.folder, profile)
    write_profile_html(data.folder, profile)
    console = stdout_console()
    print_profile(profile, console)
    console.print(f"profile: {data.folder / 'profile.json'} ({profile['wall_s']:.0f} s); report: {data.folder / 'report.html'}")
    return 130 if data.interrupted else 0

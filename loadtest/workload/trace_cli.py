"""``loadtest trace synth``: write a synthetic trace (see :mod:`loadtest.workload.trace_synth`)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from loadtest.argtypes import non_negative_int
from loadtest.cli_common import fraction, positive_float, positive_int
from loadtest.errors import InputError
from loadtest.paths import output_file
from loadtest.workload.trace import FORMATS, Trace, read_trace
from loadtest.workload.trace_synth import SynthSpec, synth_rows, write_trace


def add_trace_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="production traces: write a synthetic one (synth)")
    tsub = p.add_subparsers(dest="trace_command", required=True, metavar="SUBCOMMAND")
    s = tsub.add_parser("synth", help="write a trace (mooncake, azure, burstgpt) from a rate, burstiness, lengths and prefix sharing")
    s.add_argument("output", help="the file to write")
    s.add_argument("--format", choices=FORMATS, default="mooncake", help="the trace format (default mooncake)")
    s.add_argument("--rate", type=positive_float, required=True, help="mean arrivals per second")
    s.add_argument("--duration-s", type=positive_float, required=True, help="the trace's length in seconds")
    s.add_argument("--burstiness", type=positive_float, default=1.0, help="gamma shape of the gaps: 1 Poisson, <1 burstier (default 1)")
    s.add_argument("--input-mean", type=positive_int, default=512, help="mean input length, tokens (default 512)")
    s.add_argument("--input-stddev", type=_spread, default=0.0, help="its standard deviation (default 0)")
    s.add_argument("--output-mean", type=positive_int, default=64, help="mean output length, tokens (default 64)")
    s.add_argument("--output-stddev", type=_spread, default=0.0, help="its standard deviation (default 0)")
    s.add_argument("--prefix-groups", type=non_negative_int, default=0, help="shared prefixes (mooncake hash_ids; default 0: none)")
    s.add_argument("--prefix-blocks", type=positive_int, default=1, help="blocks in each shared prefix (default 1)")
    s.add_argument("--prefix-share", type=fraction, default=1.0, help="share of requests that draw a shared prefix (default 1)")
    s.add_argument("--block-tokens", type=positive_int, default=512, help="tokens per hash block (default 512)")
    s.add_argument("--seed", type=int, default=0, help="the same seed writes the same file (default 0)")
    s.set_defaults(func=_cmd_synth)


def _spread(text: str) -> float:
    """A standard deviation: zero or more and finite, checked per flag so that the line names the one that is wrong."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more (and finite); got {text!r}")
    return value


#: The most requests ``trace synth`` writes (rate × duration): a day at 50 req/s is 4.3M. The rows are
#: built in memory, so ``--rate 1e9 --duration-s 1e9`` must be one line, not a MemoryError an hour in.
MAX_SYNTH_REQUESTS = 5_000_000


def _cmd_synth(args: argparse.Namespace) -> int:
    expected = args.rate * args.duration_s
    if not expected <= MAX_SYNTH_REQUESTS:
        raise InputError(f"--rate {args.rate:g} × --duration-s {args.duration_s:g} is {expected:.3g} requests; "
                         f"trace synth writes at most {MAX_SYNTH_REQUESTS:,} (a shorter trace replayed at a higher load.speedups gives a higher rate)")
    spec = SynthSpec(
        rate_rps=args.rate, duration_s=args.duration_s, burstiness=args.burstiness,
        input_mean=args.input_mean, input_stddev=args.input_stddev,
        output_mean=args.output_mean, output_stddev=args.output_stddev,
        prefix_groups=args.prefix_groups, prefix_blocks=args.prefix_blocks, prefix_share=args.prefix_share,
        block_tokens=args.block_tokens, seed=args.seed,
    )
    out = output_file(args.output, "output")  # a folder, a dangling link, no permission: one line, before any work
    rows = synth_rows(spec)
    if len(rows) < 2:  # before any file: a refused trace used to leave a 0-byte one behind
        raise InputError(f"{args.output}: --rate {args.rate:g} × --duration-s {args.duration_s:g} drew {len(rows)} "
                         "request(s); a trace needs at least 2 (raise --rate or --duration-s); nothing written")
    trace = _write_checked(out, args, rows)
    print(f"{args.output}: {len(rows)} {args.format} requests over {trace.period_s:.1f} s "
          f"(mean {trace.mean_rate_rps:.2f} req/s at speedup 1)")
    return 0


def _write_checked(out: Path, args: argparse.Namespace, rows: list) -> Trace:
    """Write the trace beside ``out``, read it back as a replay would, and only then put it at ``out``.

    A file the reader refuses (every row in one millisecond, say) is removed with
    its one line: neither it nor a 0-byte ``out`` is left behind, and a file that
    was at ``out`` before is kept.
    """
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_trace(part, args.format, rows)
        trace = read_trace(str(part), args.format, block_tokens=args.block_tokens)  # what a replay will read
        os.replace(part, out)
    except OSError as err:
        raise InputError(f"{args.output}: cannot write: {err.strerror or err}") from None
    except InputError as err:
        raise InputError(str(err).replace(str(part), args.output)) from None
    finally:
        part.unlink(missing_ok=True)
    return trace

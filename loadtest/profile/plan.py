"""The profile's load plan: which runs, at which loads, with which requests.

Why these shapes:

- **Prefill**: one user (nothing else runs, so TTFT is prefill plus a fixed
  cost, never queueing), a few output tokens, prompts on a ladder of lengths
  (powers of two from 128 to a cap, bounded by the server's context where it
  says). The lengths are request classes of one run, drawn at random, so a
  drift in the server over the run spreads over all lengths alike.
- **Decode**: closed loop at batch sizes 1, 2, 4, … with short prompts and
  long ``ignore_eos`` outputs, so that every user is decoding nearly all the
  time and the server's batch is the users. First one user alone (the
  baseline step), then the ladder up to a cap with ``itl_ms.p50 <= 2 ×
  baseline`` as its SLO, so the ordinary stop-at-first-failing-level ends it
  once the step has doubled. Then the batch sizes between the two measured
  either side of the fitted knee (at most two rounds), so the knee is placed
  to within one sequence.

Each level runs a fixed time (min = max = its duration): a profile wants the
same amount of data at every point, not an early SLO verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.scenario import Scenario, parse_scenario

#: Past this many sequences a server is rarely still memory-bound; the ladder stops here by default.
DEFAULT_MAX_BATCH = 64
DEFAULT_MAX_PROMPT = 2048
#: Leave room in the context for the output and the run's nonce words.
_CONTEXT_MARGIN = 64


@dataclass
class ProfilePlan:
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT
    min_prompt_tokens: int = 128
    prefill_duration_s: float = 20.0
    prefill_max_tokens: int = 2
    max_batch: int = DEFAULT_MAX_BATCH
    decode_prompt_tokens: int = 32
    decode_max_tokens: int = 256
    decode_level_s: float = 10.0
    warmup_s: float = 2.0
    #: Rounds of knee refinement, each at most ``knee_probes`` batch sizes.
    knee_rounds: int = 2
    knee_probes: int = 3
    #: The ladder stops once ITL p50 exceeds this multiple of one user's.
    itl_growth_stop: float = 2.0
    notes: list[str] = field(default_factory=list)

    def prompt_ladder(self, context_tokens: int | None = None) -> list[int]:
        """Powers of two from ``min_prompt_tokens`` up to the cap (and the server's context)."""
        cap = self.max_prompt_tokens
        if context_tokens:
            fit = context_tokens - self.prefill_max_tokens - _CONTEXT_MARGIN
            if fit < cap:
                cap = fit
                self.notes.append(f"prompt ladder capped at {fit} tokens by the server's context of {context_tokens}")
        out, value = [], self.min_prompt_tokens
        while value <= cap:
            out.append(value)
            value *= 2
        if len(out) < 2:
            out = [max(8, cap // 4), max(16, cap)]
        return out

    def short_level_note(self, itl_p50_ms_1: float) -> str | None:
        """A note when a decode request outlasts the decode levels (None when it fits).

        The decode fit reads chunk gaps, so it needs no finished request; but each sub-run's own
        table counts requests that ended in a level's window, and shows a level none ended in as
        having no data. The ladder runs until the step has grown ``itl_growth_stop`` times, so its
        last levels' requests take that much longer than one user's.
        """
        if not itl_p50_ms_1 > 0:
            return None
        one_s = itl_p50_ms_1 * self.decode_max_tokens / 1000.0
        longest_s = one_s * self.itl_growth_stop
        window_s = self.decode_level_s - self.warmup_s
        if longest_s <= window_s:
            return None
        return (
            f"a decode request takes about {one_s:.1f} s at one user ({self.decode_max_tokens} tokens at "
            f"{itl_p50_ms_1:.1f} ms) and up to {longest_s:.1f} s at the ladder's top, longer than a decode level's "
            f"{window_s:g} s window: the fit reads chunk gaps and is unaffected, but the sub-runs' tables count only "
            f"requests that ended in a level and may show no data (--decode-level-s above "
            f"{longest_s + self.warmup_s:.0f} or a smaller --decode-max-tokens gives them their requests)"
        )

    def batch_ladder(self) -> list[int]:
        out, value = [], 2
        while value <= self.max_batch:
            out.append(value)
            value *= 2
        return out


def _base(scenario: Scenario) -> dict[str, Any]:
    data = scenario.model_dump()
    data["workload"].update(dataset=None, shared_prefix=None, conversation=None, classes=[], cache_bust=True)
    data["workload"]["ignore_eos"] = True
    return data


def _fixed_levels(data: dict[str, Any], levels: list[int], duration_s: float, warmup_s: float) -> None:
    data["load"] = {
        "levels": levels,
        "level_duration_s": duration_s,
        "min_level_duration_s": duration_s,
        "max_level_duration_s": duration_s,
        "warmup_s": warmup_s,
        "warmup_requests": 1,
        "client_limits": data["load"].get("client_limits") or {},
    }


def prefill_scenario(scenario: Scenario, plan: ProfilePlan, lengths: list[int]) -> Scenario:
    """One user, one class per prompt length, a few output tokens; no latency SLO."""
    data = _base(scenario)
    data["name"] = f"{scenario.name}-prefill"
    data["workload"].update(prompt_tokens={"mean": lengths[0], "stddev": 0}, max_tokens=plan.prefill_max_tokens)
    data["workload"]["classes"] = [
        {"name": f"p{n}", "prompt_tokens": {"mean": n, "stddev": 0}} for n in lengths
    ]
    _fixed_levels(data, [1], plan.prefill_duration_s, plan.warmup_s)
    data["slo"] = {"max_error_rate": scenario.slo.max_error_rate}
    return parse_scenario(data, source="profile plan")


def decode_scenario(
    scenario: Scenario, plan: ProfilePlan, levels: list[int], suffix: str, itl_limit_ms: float | None = None
) -> Scenario:
    """Short prompts, long outputs, fixed-length levels; an ITL p50 limit ends the ladder once the step doubled."""
    data = _base(scenario)
    data["name"] = f"{scenario.name}-{suffix}"
    data["workload"].update(
        prompt_tokens={"mean": plan.decode_prompt_tokens, "stddev": 0}, max_tokens=plan.decode_max_tokens
    )
    _fixed_levels(data, levels, plan.decode_level_s, plan.warmup_s)
    slo: dict[str, Any] = {"max_error_rate": scenario.slo.max_error_rate}
    if itl_limit_ms is not None:
        slo["itl_ms"] = {"p50": round(itl_limit_ms, 3)}
    data["slo"] = slo
    return parse_scenario(data, source="profile plan")

"""Shared prefixes: system prompts that many requests share, so a prefix cache serves them.

A server with prefix caching (vLLM's APC, SGLang's radix cache, llama.cpp's
slot cache) skips the prefill of a prefix it has seen. Real traffic has a few
system prompts shared by most requests; ``workload.shared_prefix`` measures
that on purpose: ``groups`` distinct prefixes of ``tokens`` words, each
request drawing one. The prefixes are the same for every user and every
worker (they are seeded by the workload seed alone) and differ between runs
only through the per-run ``salt``.
"""

from __future__ import annotations

import random

from loadtest.scenario import SharedPrefix
from loadtest.workload.words import synthetic_text


def shared_prefixes(spec: SharedPrefix, seed: int, salt: str = "") -> list[str]:
    """The ``spec.groups`` prefix texts, ``spec.tokens`` words each."""
    out = []
    for group in range(spec.groups):
        rng = random.Random(f"shared-prefix-{seed}-{group}-{salt}")
        # The group number leads, so two groups never share a first token.
        head = f"{salt}-p{group}" if salt else f"p{group}"
        out.append(head + " " + synthetic_text(rng, spec.tokens - 1, with_nonce=False) if spec.tokens > 1 else head)
    return out

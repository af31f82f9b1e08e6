"""Prompts for trace rows: as long as the row says, sharing exactly the blocks its ``hash_ids`` name.

Mooncake's ``hash_ids`` name fixed-size blocks of a prompt (``block_tokens``
each, 512 in Mooncake's traces): two requests whose lists start with the same
ids share that prefix, and a server's prefix cache can serve it. The prompt of
a row is built block by block: block ``i`` holds the words of ``hash_ids[i]``
(a seeded function of the hash id, so every request naming it gets the very
same words), and the last block is cut to the row's ``input_length``. Words
past the named blocks, and whole prompts of rows without hashes (Azure,
BurstGPT), are the row's own. Each block starts with a word that names it, so
two prompts that share blocks differ from the first word after them, not a
few words later by chance.

The words are one token each (:mod:`loadtest.workload.words`) and the leading
word of a block one to a few, so a prompt is the row's length to within a few
tokens per block; the server's ``usage`` gives the exact count.

Salt. ``scope`` is mixed into every block's words and names: the run's salt,
and the level and repetition of the window being replayed
(:mod:`loadtest.load.trace_replay`). So the sharing inside one replay of the
window is the trace's, while no run and no other level (nor the next
repetition of the window) finds its prefixes already cached.
"""

from __future__ import annotations

import random

from loadtest.workload.trace import TraceRow
from loadtest.workload.words import WORDS


def block_words(hash_id: int, n_words: int, scope: str) -> list[str]:
    """The first ``n_words`` of block ``hash_id``: its name, then seeded one-token words."""
    rng = random.Random(f"trace-block-{scope}-{hash_id}")
    head = f"{scope}-b{hash_id}" if scope else f"b{hash_id}"
    return [head] + rng.choices(WORDS, k=max(0, n_words - 1))


def trace_prompt(row: TraceRow, row_key: str, block_tokens: int, scope: str = "") -> str:
    """The prompt for ``row``: its blocks, then its own words, ``row.input_tokens`` words in all.

    ``row_key`` names the row within its replay (its own words are seeded by it).
    """
    words: list[str] = []
    want = row.input_tokens
    for hash_id in row.hash_ids:
        if len(words) >= want:
            break
        words += block_words(hash_id, min(block_tokens, want - len(words)), scope)
    if len(words) < want:
        rng = random.Random(f"trace-row-{scope}-{row_key}")
        head = f"{scope}-r{row_key}" if scope else f"r{row_key}"
        words += [head] + rng.choices(WORDS, k=want - len(words) - 1)
    return " ".join(words)

"""Synthetic text: common English words that are one token each.

The words are a single token in the usual BPE vocabularies (GPT, Llama, Qwen,
Mistral), so "N words" is close to "N tokens" without downloading a
tokenizer: the tool works offline. The same word count is the fallback
estimate of a prompt's tokens when the server reports no ``usage``.
"""

from __future__ import annotations

import random

# Short, frequent words: one token each in common tokenizers, with a leading space.
WORDS = (
    "the of and to in is was for on that with as by at from his it an were are which this be "
    "or has had first one their its new after but who not they have her she two been other when "
    "there all during into school time may years more most only over city some world would where "
    "later up such used many can state about national out known university united then made also "
    "team three well like part film people while since under both number region house family "
    "season early before war day life name being including these area year through same long second "
    "because play music river place point water light small large great old public high work south "
    "north east west home city game show line party court group members book town power road early "
    "death left right back local late major best side field final open total church body order"
).split()


def nonce(rng: random.Random, salt: str = "") -> str:
    """A random word that makes a prompt unique; ``salt`` (per run) is mixed in when given."""
    bits = f"{rng.getrandbits(32):08x}"
    return f"{salt}-{bits}" if salt else bits


def synthetic_text(rng: random.Random, n_words: int, *, salt: str = "", with_nonce: bool = True) -> str:
    """``n_words`` words; the first is a nonce, so a prefix cache cannot serve one prompt from another."""
    if not with_nonce:
        return " ".join(rng.choices(WORDS, k=max(0, n_words)))
    return nonce(rng, salt) + " " + " ".join(rng.choices(WORDS, k=max(0, n_words - 1)))


def count_words(text: str) -> int:
    """The word-count token estimate: whitespace-separated words."""
    return len(text.split())

"""``loadtest mock --prefix-cache-blocks N``: a prefix cache, so that hits shorten prefill as they do in vLLM.

The model: a prompt (its words: the mock's tokens) is cut into blocks of
``block_tokens``; block *i* is named by a hash of blocks 0..i (a chain, as
vLLM's automatic prefix caching and SGLang's radix tree key a block by its
whole prefix). A request's cached tokens are its leading blocks already in the
cache, up to the first miss; then every full block of its prompt is put in the
cache, which holds at most ``capacity_blocks`` and evicts the least recently
used. The engine prefills only the uncached tokens
(``prefill_per_token_ms × (prompt − cached)``), the response's
``usage.prompt_tokens_details.cached_tokens`` says how many were cached, and
``/metrics`` counts them as vLLM does: ``vllm:prefix_cache_queries_total``
(prompt tokens looked up) and ``vllm:prefix_cache_hits_total`` (of them, hits).

Simplification (MODEL.md): the lookup happens when a request arrives, not when
it is admitted, so a request that arrives while another with the same prefix
waits hits at once, where a real engine would hit only after that prefill ran.
"""

from __future__ import annotations

from collections import OrderedDict


class PrefixCache:
    """An LRU set of block-chain hashes, with the hit and query counters /metrics reports."""

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()
        #: Prompt tokens looked up, and of them found cached (vLLM's counters, in tokens).
        self.queries = 0
        self.hits = 0

    def lookup(self, prompt: str) -> int:
        """The prompt's cached tokens (its leading cached blocks × block_tokens); caches its full blocks."""
        words = prompt.split()
        size = self.block_tokens
        cached = 0
        missed = False
        chain = 0
        for start in range(0, len(words) - size + 1, size):
            chain = hash((chain, *words[start : start + size]))
            if not missed and chain in self._blocks:
                self._blocks.move_to_end(chain)
                cached += size
                continue
            missed = True
            self._blocks[chain] = None
            if len(self._blocks) > self.capacity_blocks:
                self._blocks.popitem(last=False)
        self.queries += len(words)
        self.hits += cached
        return cached

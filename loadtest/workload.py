"""Request bodies for a scenario's workload: synthetic prompts of a target length.

Prompts are built from common English words that are a single token in the
usual BPE vocabularies (GPT, Llama, Qwen, Mistral), so "N words" is close to
"N tokens" without downloading a tokenizer: the tool works offline. Each prompt
starts with a nonce so that servers with prefix caching cannot serve one
request's prefill from another's, which would flatter TTFT. The nonce starts
with the run's random *salt* (run.json ``prompt_salt``), so a second run
against the same server (vLLM and SGLang cache prefixes by default) does not
hit the first run's cache either; ``workload.seed`` still fixes the lengths and
the words, so runs stay comparable.
"""

from __future__ import annotations

import random
from typing import Collection, Iterator

from loadtest.client.wire import build_body
from loadtest.scenario import Scenario

# Short, frequent words: one token each in common tokenizers, with a leading space.
_WORDS = (
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


class Workload:
    """An endless, seeded stream of request bodies for one user.

    Seeding by user index makes a run repeatable while keeping users' prompts
    different from one another.
    """

    def __init__(
        self,
        scenario: Scenario,
        seed: int = 0,
        continuous_usage: bool = False,
        salt: str = "",
        drop: Collection[str] = (),
        max_tokens_field: str | None = None,
    ) -> None:
        self._scenario = scenario
        self._rng = random.Random(f"{scenario.workload.seed}-{seed}")
        self._continuous_usage = continuous_usage
        self._salt = salt
        #: What the preflight learned about the target's wire (see client.wire.build_body).
        self._drop = tuple(drop)
        self._max_tokens_field = max_tokens_field or scenario.target.max_tokens_field

    def prompt_length(self) -> int:
        return self._scenario.workload.prompt_tokens.sample(self._rng)

    def output_length(self) -> int:
        max_tokens = self._scenario.workload.max_tokens
        return max_tokens if isinstance(max_tokens, int) else max_tokens.sample(self._rng)

    def prompt(self, n_words: int) -> str:
        rng = self._rng
        nonce = f"{self._salt}{rng.getrandbits(32):08x}"
        return nonce + " " + " ".join(rng.choices(_WORDS, k=max(0, n_words - 1)))

    def next_body(self) -> bytes:
        w = self._scenario.workload
        t = self._scenario.target
        return build_body(
            t.api,
            t.model,
            self.prompt(self.prompt_length()),
            self.output_length(),
            temperature=w.temperature,
            ignore_eos=w.ignore_eos,
            continuous_usage=self._continuous_usage,
            extra_body=w.extra_body,
            max_tokens_field=self._max_tokens_field,
            drop=self._drop,
        )

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield self.next_body()

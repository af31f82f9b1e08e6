"""Write the two small sample datasets shipped in scenarios/data/ (seeded: the output never changes).

    python scenarios/data/make_datasets.py

* ``chat-prompts.jsonl``: 300 chat prompts in loadtest's JSONL format: most are
  ``{"prompt": ...}``, every fifth is ``{"messages": [system, user]}``, and
  every third carries its own ``max_tokens``;
* ``sharegpt-sample.json``: 120 conversations in ShareGPT's format (a JSON
  array of ``{"id", "conversations": [{"from": "human"|"gpt", "value"}]}``),
  2 to 6 turns each, answers of 20 to 160 words; two of them open with the
  assistant and have no human turn, as real ShareGPT dumps do, and are skipped.

Written by hand for this project: no download, no third-party text.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent

TASKS = [
    "Explain {topic} to a new engineer in a few short paragraphs.",
    "Write a checklist for {topic}.",
    "What are the three most common mistakes in {topic}, and how do I avoid them?",
    "Summarize the trade-offs of {topic} in a table.",
    "Give me a step-by-step plan to get started with {topic} this week.",
    "Draft a short email to my team proposing we adopt {topic}.",
    "Compare {topic} with the approach we use today and say when each one wins.",
    "Write five interview questions about {topic}, with what a good answer contains.",
    "I have ten minutes before a meeting about {topic}. What should I know?",
    "Write a haiku about {topic}, then explain it in one sentence.",
]
TOPICS = [
    "capacity planning for an LLM endpoint", "prefix caching", "continuous batching", "blue-green deployments",
    "database connection pooling", "rate limiting an API", "writing good commit messages", "on-call handovers",
    "load testing with realistic traffic", "choosing SLOs for latency", "structured logging", "feature flags",
    "canary releases", "cost control for GPU clusters", "incident post-mortems", "unit testing legacy code",
    "designing a REST API", "caching with a TTL", "queue back-pressure", "autoscaling on queue depth",
    "reading a flame graph", "tail latency", "retry budgets", "schema migrations without downtime",
    "tokenizers and token counts", "speculative decoding", "quantized model serving", "GPU memory planning",
    "prompt templates", "evaluating a chatbot",
]
SYSTEMS = [
    "You are a concise assistant for a platform engineering team.",
    "You are a patient teacher. Prefer examples over definitions.",
    "You answer in plain English, without jargon, in at most 200 words.",
]
FILLER = (
    "In practice the answer depends on the traffic you expect and the budget you have. Start small, measure, "
    "and change one thing at a time. Keep the numbers that matter visible to the whole team. Write down what "
    "you decided and why, so the next person does not have to guess. When in doubt, prefer the simpler option "
    "and revisit it once real data arrives."
).split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n))


def chat_prompts(rng: random.Random, n: int = 300) -> list[dict]:
    rows = []
    for i in range(n):
        prompt = rng.choice(TASKS).format(topic=rng.choice(TOPICS))
        if i % 4 == 3:
            prompt += " Context: " + words(rng, rng.randint(20, 120)) + "."
        row: dict = (
            {"messages": [{"role": "system", "content": rng.choice(SYSTEMS)}, {"role": "user", "content": prompt}]}
            if i % 5 == 4
            else {"prompt": prompt}
        )
        if i % 3 == 0:
            row["max_tokens"] = rng.choice([16, 32, 64, 128])
        rows.append(row)
    return rows


def sharegpt(rng: random.Random, n: int = 120) -> list[dict]:
    out = []
    for i in range(n):
        turns = []
        if i in (17, 83):  # no human turn: skipped by loaders, as in real dumps
            turns.append({"from": "gpt", "value": "Hello! How can I help you today?"})
        else:
            for _ in range(rng.randint(1, 3)):
                question = rng.choice(TASKS).format(topic=rng.choice(TOPICS))
                turns.append({"from": "human", "value": question})
                turns.append({"from": "gpt", "value": words(rng, rng.randint(20, 160)) + "."})
        out.append({"id": f"sample-{i:04d}", "conversations": turns})
    return out


def main() -> None:
    rng = random.Random(14)
    with open(HERE / "chat-prompts.jsonl", "w") as fh:
        for row in chat_prompts(rng):
            fh.write(json.dumps(row) + "\n")
    (HERE / "sharegpt-sample.json").write_text(json.dumps(sharegpt(rng), indent=1) + "\n")


if __name__ == "__main__":
    main()

"""One user's stream of requests: class, prompt source, shared prefix and conversation state.

Each Locust user owns a :class:`Workload`. For every request it

1. picks the request's class (weighted, seeded per user); in multi-turn use the
   class and the shared prefix are picked once per conversation;
2. takes the next user message from the class's source: synthetic words of the
   class's ``prompt_tokens``, or the next dataset row;
3. puts the class's shared prefix first (a system message), then the
   conversation's history, then the new message;
4. returns a :class:`PlannedRequest`: the body plus the tags a record carries
   (class, turn, conversation id) and the word-count estimate of its prompt.

After the request, :meth:`Workload.answered` hands back the assistant text
that was actually streamed, which becomes part of the next turn's history: the
prompt grows as it does in real use. A failed turn ends its conversation (the
history would otherwise hold an answer that never came).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Collection, Iterator

from loadtest.client.output_check import OutputCheck, output_check
from loadtest.client.wire import build_body
from loadtest.scenario import Scenario
from loadtest.scenario import Workload as WorkloadSpec
from loadtest.scenario._structured import body_fields
from loadtest.workload.dataset import Cursor, Entry, cursor_for
from loadtest.errors import InputError
from loadtest.workload.image_server import served_urls
from loadtest.workload.image_sources import merge, row_image_set
from loadtest.workload.images import ImageMaker, ImageSet
from loadtest.workload.prefix import shared_prefixes
from loadtest.workload.trace import TraceArrival, load_trace
from loadtest.workload.trace_prompt import trace_prompt
from loadtest.workload.words import count_words, synthetic_text


@dataclass(frozen=True)
class PlannedRequest:
    """A request body and what its record must say about it."""

    body: bytes
    class_name: str | None = None
    turn: int | None = None
    conversation_id: str | None = None
    #: Words sent (prefix, history and message): the prompt-token estimate without usage.
    prompt_words: int = 0
    #: Keep the streamed text: the next turn resends it, or ``output_check`` judges it.
    capture_text: bool = False
    #: What the answer must be (tool calls, a JSON schema); None: free text, not checked.
    output_check: OutputCheck | None = None
    #: Images sent with the request, and their encoded bytes (``workload.images``; None without).
    images: int | None = None
    image_bytes: int | None = None
    #: Where ``prompt_words`` came from when the server gives no usage: "estimate" (words sent) or "trace" (the row's length).
    prompt_source: str = "estimate"


@dataclass
class _ClassPlan:
    """A class's resolved workload and its prompt sources."""

    name: str | None
    weight: float
    spec: WorkloadSpec
    prefixes: list[str]
    cursor: Cursor | None
    #: The model its requests name (the class's override, else target.model).
    model: str | None = None
    #: Body fields for tools / response_format, and the check of the answer they ask for.
    fields: dict | None = None
    check: OutputCheck | None = None
    images: ImageMaker | None = None


@dataclass
class _Conversation:
    plan: _ClassPlan
    ident: str
    prefix: str | None
    turns: int
    turn: int = 0
    history: list[tuple[str, str]] = field(default_factory=list)
    pending: tuple[str, str] | None = None


class Workload:
    """An endless, seeded stream of requests for one user.

    Seeding by user index makes a run repeatable while keeping users' prompts
    different from one another. ``salt`` (a per-run random string, empty by
    default) is mixed into every nonce and shared prefix so that a server's
    prefix cache cannot reuse a previous run's prompts; dataset prompts carry
    it as a leading word when it is set.
    """

    def __init__(
        self,
        scenario: Scenario,
        seed: int = 0,
        continuous_usage: bool = False,
        *,
        salt: str = "",
        drop: Collection[str] = (),
        max_tokens_field: str | None = None,
        stream_seed: int = 0,
        user_tag: str = "",
    ) -> None:
        self._scenario = scenario
        #: What the preflight learned about the target's wire (see client.wire.build_body).
        self._drop = tuple(drop)
        self._max_tokens_field = max_tokens_field or scenario.target.max_tokens_field
        self._rng = random.Random(f"{scenario.workload.seed}-{seed}")
        self._continuous_usage = continuous_usage
        self._salt = salt
        self._user_tag = user_tag or str(seed)
        # images are per user (its own seed): a worker's users share a dataset cursor, never an image
        self._plans = _class_plans(scenario.workload, salt, f"{scenario.workload.seed}-{stream_seed}",
                                   f"{scenario.workload.seed}-{seed}-{user_tag}")
        self._weights = [p.weight for p in self._plans]
        # dataset.images_as served: the run's image server's URLs (image_server.py), read once per user
        self._served = served_urls() if any(p.spec.dataset is not None and p.spec.dataset.images_as == "served"
                                            for p in self._plans) else None
        for plan in self._plans:  # a row's images are image_url parts of a chat message: nothing else carries them
            rows = plan.cursor.dataset.with_images if plan.cursor is not None else 0
            if rows and scenario.target.api != "chat":
                raise InputError(f"{plan.cursor.dataset.path}: {rows} rows name images; only target.api chat "  # type: ignore[union-attr]
                                 f"sends them (image_url parts), not {scenario.target.api}")
        self._conversation: _Conversation | None = None
        self._conversations = 0

    # -- the synthetic source (also used by the preflight) --------------------------------------

    def prompt_length(self) -> int:
        return self._scenario.workload.prompt_tokens.sample(self._rng)

    def output_length(self) -> int:
        return _output_length(self._scenario.workload, self._rng)

    def prompt(self, n_words: int) -> str:
        return synthetic_text(self._rng, n_words, salt=self._salt)

    # -- requests -------------------------------------------------------------------------------

    def next_request(self) -> PlannedRequest:
        conv = self._conversation
        if conv is None or conv.turn >= conv.turns:
            conv = self._conversation = self._start()
        plan = conv.plan
        conv.turn += 1
        entry = plan.cursor.next() if plan.cursor is not None else None
        message = self._message(plan, entry)
        max_tokens = _output_length(plan.spec, self._rng)
        if entry is not None and plan.spec.dataset.use_output_lengths and entry.output_tokens:
            max_tokens = entry.output_tokens
        multi_turn = plan.spec.conversation is not None
        if multi_turn:
            messages = conv.history + [("user", message)]
            conv.pending = ("user", message)
        elif entry is not None and entry.messages is not None:
            messages = list(entry.messages)
            if self._salt:
                messages = _salted(messages, self._salt)
        else:
            messages = [("user", message)]
        if conv.prefix is not None:
            messages = [("system", conv.prefix)] + messages
        api = self._scenario.target.api
        if api in ("embeddings", "rerank", "score"):  # a batch: each input from the class's source
            if api != "embeddings" and plan.spec.query_tokens is not None and entry is None:  # the query's own length
                messages = [("user", synthetic_text(self._rng, plan.spec.query_tokens.sample(self._rng), salt=self._salt))]
            # rerank / score: the first text is the query (text_1), then batch_size documents (pairs)
            extra = plan.spec.batch_size - (1 if api == "embeddings" else 0)
            messages += [("user", self._message(plan, plan.cursor.next() if plan.cursor is not None else None))
                         for _ in range(extra)]
        pictures = plan.images.next() if plan.images is not None else None
        if entry is not None and entry.images:  # the row's own images first (files as data URIs, URLs as they are)
            # served, but no image server running ({}): a file is refused in one line, never sent inline
            served = (self._served or {}) if plan.spec.dataset.images_as == "served" else None  # type: ignore[union-attr]
            pictures = merge(row_image_set(entry.images, served), pictures)
        return PlannedRequest(
            body=self._body(plan, messages, max_tokens, pictures),
            images=pictures.count if pictures is not None else None,
            image_bytes=pictures.bytes if pictures is not None else None,
            class_name=plan.name,
            turn=conv.turn if multi_turn else None,
            conversation_id=conv.ident if multi_turn else None,
            prompt_words=sum(count_words(content) for _, content in messages),
            capture_text=multi_turn or plan.check is not None,
            output_check=plan.check,
        )

    def trace_request(self, arrival: TraceArrival) -> PlannedRequest:
        """The request for one trace arrival: the row's lengths, its shared blocks (see :mod:`trace_prompt`)."""
        spec = self._scenario.workload
        trace = load_trace(spec.trace)
        row = trace.rows[arrival.row]
        scope = f"{self._salt}.L{arrival.level}.R{arrival.rep}" if self._salt else ""
        prompt = trace_prompt(row, str(arrival.row), trace.block_tokens, scope)
        return PlannedRequest(
            body=self._body(self._plans[0], [("user", prompt)], row.output_tokens),  # a trace has no classes: the one plan
            prompt_words=row.input_tokens,
            prompt_source="trace",
        )

    def answered(self, ok: bool, text: str | None) -> None:
        """The last request ended: its streamed answer joins the history (a failure ends the conversation)."""
        conv = self._conversation
        if conv is None or conv.pending is None:
            return
        if ok:
            conv.history += [conv.pending, ("assistant", text or "")]
            conv.pending = None
        else:
            self._conversation = None

    def think_time_s(self) -> float:
        """The pause before the next request: think time between a conversation's turns, else 0."""
        conv = self._conversation
        if conv is None or conv.turn >= conv.turns or conv.plan.spec.conversation is None:
            return 0.0
        return conv.plan.spec.conversation.think_time_s

    def next_body(self) -> bytes:
        return self.next_request().body

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield self.next_body()

    # -- helpers -----------------------------------------------------------------------------

    def _start(self) -> _Conversation:
        plan = self._rng.choices(self._plans, self._weights)[0] if len(self._plans) > 1 else self._plans[0]
        self._conversations += 1
        prefix = self._rng.choice(plan.prefixes) if plan.prefixes else None
        turns = plan.spec.conversation.turns if plan.spec.conversation is not None else 1
        return _Conversation(plan, f"{self._user_tag}-{self._conversations}", prefix, turns)

    def _message(self, plan: _ClassPlan, entry: Entry | None) -> str:
        if entry is None:
            return synthetic_text(self._rng, plan.spec.prompt_tokens.sample(self._rng), salt=self._salt)
        return f"{self._salt} {entry.prompt}" if self._salt else entry.prompt

    def _body(
        self, plan: _ClassPlan, messages: list[tuple[str, str]], max_tokens: int, pictures: ImageSet | None = None
    ) -> bytes:
        t = self._scenario.target
        spec = plan.spec
        if t.api in ("chat", "responses"):  # Responses takes the same role/content messages as input
            prompt: str | list = [{"role": role, "content": content} for role, content in messages]
            if pictures is not None:  # the new message's text, then its images
                prompt[-1] = {"role": "user", "content": [{"type": "text", "text": messages[-1][1]}, *pictures.parts]}
        elif t.api in ("embeddings", "rerank", "score"):  # the inputs; rerank/score: the query first
            prompt = [content for _, content in messages]
        else:
            prompt = "\n\n".join(content for _, content in messages)
        return build_body(
            t.api,
            plan.model or t.model,
            prompt,
            max_tokens,
            temperature=spec.temperature,
            ignore_eos=spec.ignore_eos,
            continuous_usage=self._continuous_usage,
            extra_body=spec.extra_body,
            max_tokens_field=self._max_tokens_field,
            drop=self._drop,
            fields=plan.fields,
        )


def _output_length(spec: WorkloadSpec, rng: random.Random) -> int:
    return spec.max_tokens if isinstance(spec.max_tokens, int) else spec.max_tokens.sample(rng)


def _salted(messages: list[tuple[str, str]], salt: str) -> list[tuple[str, str]]:
    """Put the run's salt in front of the first user message."""
    out = list(messages)
    for i, (role, content) in enumerate(out):
        if role == "user":
            out[i] = (role, f"{salt} {content}")
            break
    return out


def _check_for(spec: WorkloadSpec) -> OutputCheck | None:
    """The structured-output check of a class's requests (None: free text)."""
    fields = body_fields(spec.tools, spec.tool_choice, spec.response_format)
    fmt = fields.get("response_format")
    if fmt is not None and fmt.get("type") == "text":
        fmt = None
    return output_check(fields.get("tools"), fields.get("tool_choice"), fmt)


def _class_plans(workload: WorkloadSpec, salt: str, stream_seed: str, user_seed: str = "") -> list[_ClassPlan]:
    classes = workload.classes or [None]
    plans = []
    for request_class in classes:
        spec = workload.for_class(request_class)
        plans.append(
            _ClassPlan(
                name=request_class.name if request_class is not None else None,
                weight=request_class.weight if request_class is not None else 1.0,
                spec=spec,
                prefixes=shared_prefixes(spec.shared_prefix, workload.seed, salt) if spec.shared_prefix else [],
                cursor=cursor_for(spec.dataset, stream_seed) if spec.dataset is not None else None,
                model=request_class.model if request_class is not None else None,
                fields=body_fields(spec.tools, spec.tool_choice, spec.response_format) or None,
                check=_check_for(spec),
                images=ImageMaker(spec.images, f"{user_seed}-{salt}-{request_class.name if request_class else ''}")
                if spec.images is not None else None,
            )
        )
    return plans

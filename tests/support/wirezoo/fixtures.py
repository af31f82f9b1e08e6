"""The wire zoo: recorded-style responses of real servers, one per family and quirk.

Each fixture holds the exact bytes a server writes (written from the server's
documented format or its source, named in ``source``), split into the writes it
makes, and the record the client must produce from them. The replay server
sends the writes ``pace_ms`` apart; ``chunk_writes`` says in which write each
content chunk arrives, so the test can check TTFT and every chunk time against
the moment the server sent it.

A record's expectation lists only what the fixture is about plus the always-
checked basics (status, error kind, token source, chunk tokens, completion
tokens); ``None`` means "must be null".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Fixture:
    name: str
    server: str
    source: str
    writes: list[bytes]
    expect: dict[str, Any]
    #: For each content chunk, the index of the write that carries it.
    chunk_writes: list[int] = field(default_factory=list)
    api: str = "chat"
    status: int = 200
    reason: str = "OK"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    framing: str = "chunked"  # chunked | close | length
    pace_ms: float = 15.0
    cut: bool = False         # chunked framing without its last chunk (connection dropped)
    #: The prompt the test builds the request body from (rerank / score: the query, then the documents).
    prompt: Any = "hi"


def _ev(*events: bytes) -> list[bytes]:
    """One write per SSE event, each with its blank line."""
    return [e + b"\n\n" for e in events]


# -- OpenAI (platform.openai.com/docs/api-reference/chat-streaming) ---------------------------
_OA = b'"id":"chatcmpl-AbC","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1"'
OPENAI_CHAT = Fixture(
    "openai-chat", "OpenAI chat completions, include_usage",
    "platform.openai.com/docs/api-reference/chat-streaming/streaming",
    _ev(
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}',
        b'data: {' + _OA + b',"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1], "completion_tokens": 3, "prompt_tokens": 9,
     "reasoning_tokens": 0},
    chunk_writes=[1, 2, 3],
)

# o-series / gpt-5: reasoning tokens are counted in completion_tokens but never streamed.
_O = b'"id":"chatcmpl-R1","object":"chat.completion.chunk","created":1732000000,"model":"o4-mini-2025-04-16","service_tier":"default","system_fingerprint":null'
OPENAI_REASONING_HIDDEN = Fixture(
    "openai-reasoning-hidden", "OpenAI o4-mini / gpt-5: hidden reasoning tokens, obfuscation padding",
    "platform.openai.com/docs/guides/reasoning (usage.completion_tokens_details.reasoning_tokens)",
    _ev(
        b'data: {' + _O + b',"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}],"usage":null,"obfuscation":"Xy1"}',
        b'data: {' + _O + b',"choices":[{"index":0,"delta":{"content":"Forty"},"finish_reason":null}],"usage":null,"obfuscation":"a9"}',
        b'data: {' + _O + b',"choices":[{"index":0,"delta":{"content":"-two"},"finish_reason":null}],"usage":null,"obfuscation":"Qe"}',
        b'data: {' + _O + b',"choices":[{"index":0,"delta":{"content":"."},"finish_reason":null}],"usage":null,"obfuscation":"Zk7"}',
        b'data: {' + _O + b',"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null,"obfuscation":"p"}',
        b'data: {' + _O + b',"choices":[],"usage":{"prompt_tokens":14,"completion_tokens":195,"total_tokens":209,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":192,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"k"}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1], "completion_tokens": 3, "reasoning_tokens": 192},
    chunk_writes=[1, 2, 3],
)

# -- Azure OpenAI: a prompt-filter chunk with no choices comes first ---------------------------
_AZ = b'"created":1732000000,"id":"chatcmpl-Az9","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_b705f0c291"'
_CF = b'"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}'
AZURE_CHAT = Fixture(
    "azure-chat", "Azure OpenAI: prompt_filter_results first, content_filter_results per choice",
    "learn.microsoft.com/azure/ai-services/openai/concepts/content-filter (streaming)",
    _ev(
        b'data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,' + _CF + b'}]}',
        b'data: {"choices":[{"content_filter_results":{},"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],' + _AZ + b',"usage":null}',
        b'data: {"choices":[{' + _CF + b',"delta":{"content":"Hi"},"finish_reason":null,"index":0,"logprobs":null}],' + _AZ + b',"usage":null}',
        b'data: {"choices":[{' + _CF + b',"delta":{"content":" you"},"finish_reason":null,"index":0,"logprobs":null}],' + _AZ + b',"usage":null}',
        b'data: {"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"length","index":0,"logprobs":null}],' + _AZ + b',"usage":null}',
        b'data: {"choices":[],' + _AZ + b',"usage":{"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":0},"prompt_tokens":11,"total_tokens":13}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1], "completion_tokens": 2, "prompt_tokens": 11},
    chunk_writes=[2, 3],
)

# -- vLLM -------------------------------------------------------------------------------------
_V = b'"id":"chatcmpl-9f2","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct"'
VLLM_CONTINUOUS = Fixture(
    "vllm-continuous-usage", "vLLM, stream_options.continuous_usage_stats (one chunk of 3 tokens: speculative decoding)",
    "vllm/entrypoints/openai/serving_chat.py (chat_completion_stream_generator)",
    _ev(
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0}}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":" The"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1}}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":" sky"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":" is blue"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":10,"completion_tokens":5}}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":" today"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":12,"completion_tokens":7}}',
        b'data: {' + _V + b',"choices":[],"usage":{"prompt_tokens":5,"total_tokens":12,"completion_tokens":7}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "continuous_usage", "chunk_tokens": [1, 1, 3, 2], "completion_tokens": 7, "prompt_tokens": 5},
    chunk_writes=[1, 2, 3, 4],
)

VLLM_ABORT = Fixture(
    "vllm-abort", "vLLM: the engine aborts the request (finish_reason abort)",
    "vllm/v1/engine/__init__.py (FinishReason.ABORT -> 'abort')",
    _ev(
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":" One"},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"abort","stop_reason":null}]}',
        b"data: [DONE]",
    ),
    {"ok": False, "error_kind": "aborted", "token_source": "chunks", "chunk_tokens": [1], "completion_tokens": 1},
    chunk_writes=[1],
)

VLLM_OLD_ERROR = Fixture(
    "vllm-object-error", "vLLM (< 0.6): an error inside the stream without an 'error' key",
    "vllm/entrypoints/openai/protocol.py (ErrorResponse: object='error', message, type, code)",
    _ev(
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"role":"assistant"},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}',
        b'data: {"object":"error","message":"The decoder prompt (length 9000) is longer than the maximum model length of 8192.","type":"BadRequestError","param":null,"code":400}',
        b"data: [DONE]",
    ),
    {"ok": False, "error_kind": "stream_error", "chunk_tokens": [1], "completion_tokens": 1},
    chunk_writes=[1],
)

VLLM_REASONING = Fixture(
    "vllm-reasoning-streamed", "vLLM --reasoning-parser (DeepSeek-R1, Qwen3): reasoning_content streamed",
    "vllm/entrypoints/openai/serving_chat.py (DeltaMessage.reasoning_content)",
    _ev(
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"reasoning_content":"Let me"},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"reasoning_content":" think"},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":"Yes"},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"content":"."},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}',
        b'data: {' + _V + b',"choices":[],"usage":{"prompt_tokens":7,"total_tokens":13,"completion_tokens":6}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [2, 2, 1, 1], "completion_tokens": 6, "reasoning_tokens": None},
    chunk_writes=[1, 2, 3, 4],
)

# -- SGLang -----------------------------------------------------------------------------------
_S = b'"id":"5b0b2b","object":"chat.completion.chunk","created":1732000000,"model":"Qwen/Qwen2.5-7B-Instruct"'
SGLANG_ABORT = Fixture(
    "sglang-abort", "SGLang: request aborted (finish_reason abort, matched_stop null)",
    "sglang/srt/entrypoints/openai/serving_chat.py (finish_reason_type 'abort')",
    _ev(
        b'data: {' + _S + b',"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
        b'data: {' + _S + b',"choices":[{"index":0,"delta":{"role":null,"content":"Sure","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
        b'data: {' + _S + b',"choices":[{"index":0,"delta":{"role":null,"content":",","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
        b'data: {' + _S + b',"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"abort","matched_stop":null}],"usage":null}',
        b'data: {' + _S + b',"choices":[],"usage":{"prompt_tokens":8,"total_tokens":10,"completion_tokens":2,"prompt_tokens_details":null}}',
        b"data: [DONE]",
    ),
    {"ok": False, "error_kind": "aborted", "chunk_tokens": [1, 1], "completion_tokens": 2},
    chunk_writes=[1, 2],
)

# -- TGI (Messages API) -----------------------------------------------------------------------
_T = b'"object":"chat.completion.chunk","id":"","created":1732000000,"model":"tgi","system_fingerprint":"3.0.1-sha-bb9095a"'
TGI_USAGE_ON_LAST_CONTENT = Fixture(
    "tgi-usage-on-last-token", "TGI: no role-only chunk; usage on the last token's chunk, with its content",
    "text-generation-inference/router/src/server.rs (chat_completions stream, usage on the final token)",
    _ev(
        b'data: {' + _T + b',"choices":[{"index":0,"delta":{"role":"assistant","content":"Deep"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _T + b',"choices":[{"index":0,"delta":{"role":"assistant","content":" learning"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _T + b',"choices":[{"index":0,"delta":{"role":"assistant","content":" is"},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _T + b',"choices":[{"index":0,"delta":{"role":"assistant","content":" a"},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1, 1], "completion_tokens": 4, "prompt_tokens": 10},
    chunk_writes=[0, 1, 2, 3],
)

TGI_ERROR_EVENT = Fixture(
    "tgi-error-event", "TGI: a generation error as an SSE 'event: error' (no space after the colons)",
    "text-generation-inference/router/src/server.rs (Event::default().event(\"error\").json_data(ErrorResponse))",
    [
        b'data:{' + _T + b',"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n',
        b'event:error\ndata:{"message":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"}\n\n',
    ],
    {"ok": False, "error_kind": "stream_error", "chunk_tokens": [1], "completion_tokens": 1},
    chunk_writes=[0],
)

# -- llama.cpp --------------------------------------------------------------------------------
_L = b'"created":1732000000,"id":"chatcmpl-p4i","model":"tiny.gguf","system_fingerprint":"b4800-1a2b3c4","object":"chat.completion.chunk"'
LLAMACPP_CHAT = Fixture(
    "llamacpp-chat", "llama.cpp llama-server (2025+): usage-only last chunk with 'timings'",
    "llama.cpp/tools/server/server.cpp (recorded from the llama-server built by the tests)",
    _ev(
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],' + _L + b'}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" used"}}],' + _L + b'}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" state"}}],' + _L + b'}',
        b'data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],' + _L + b'}',
        b'data: {"choices":[],' + _L + b',"usage":{"completion_tokens":2,"prompt_tokens":60,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":60,"prompt_ms":1.466,"prompt_per_token_ms":0.024,"prompt_per_second":40927.7,"predicted_n":2,"predicted_ms":0.644,"predicted_per_token_ms":0.322,"predicted_per_second":3105.6}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1], "completion_tokens": 2, "prompt_tokens": 60},
    chunk_writes=[1, 2],
)

LLAMACPP_OLD_USAGE_ON_FINISH = Fixture(
    "llamacpp-old-usage-on-finish", "llama.cpp (2024, b3xxx): usage and timings on the finish chunk, which has choices",
    "llama.cpp/examples/server/utils.hpp (format_partial_response_oaicompat, final chunk)",
    _ev(
        b'data: {"choices":[{"delta":{"content":"A"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"delta":{"content":" B"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"delta":{"content":" C"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"delta":{"content":" D"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"delta":{},"finish_reason":"length","index":0}],"created":1,"id":"chatcmpl-x","model":"gpt-3.5-turbo","object":"chat.completion.chunk","usage":{"completion_tokens":4,"prompt_tokens":6,"total_tokens":10},"timings":{"predicted_n":4,"predicted_ms":20.1}}',
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1, 1], "completion_tokens": 4, "prompt_tokens": 6},
    chunk_writes=[0, 1, 2, 3],
)

LLAMACPP_COMPLETIONS = Fixture(
    "llamacpp-completions", "llama.cpp /v1/completions (text_completion chunks)",
    "llama.cpp/tools/server/server.cpp (recorded from the llama-server built by the tests)",
    _ev(
        b'data: {"choices":[{"text":" used","index":0,"logprobs":null,"finish_reason":null}],"created":1732000000,"model":"tiny.gguf","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-c1"}',
        b'data: {"choices":[{"text":" state","index":0,"logprobs":null,"finish_reason":null}],"created":1732000000,"model":"tiny.gguf","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-c1"}',
        b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1732000000,"model":"tiny.gguf","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-c1"}',
        b'data: {"choices":[],"created":1732000000,"model":"tiny.gguf","system_fingerprint":"b0-unknown","object":"text_completion","id":"chatcmpl-c1","usage":{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1], "completion_tokens": 2, "prompt_tokens": 5},
    chunk_writes=[0, 1],
    api="completions",
)

# -- Usage repeated on every content chunk with the running total it will end at -------------
USAGE_ON_EVERY_CHUNK = Fixture(
    "usage-total-on-every-chunk", "a gateway that repeats the final usage on every chunk",
    "seen behind OpenAI-compatible proxies; counts that do not rise are not per-chunk counts",
    _ev(*(
        [b'data: {"id":"g1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"w%d"},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":8,"total_tokens":11}}' % i for i in range(4)]
        + [b'data: {"id":"g1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":8,"total_tokens":11}}',
           b"data: [DONE]"]
    )),
    {"ok": True, "token_source": "usage", "chunk_tokens": [2, 2, 2, 2], "completion_tokens": 8, "prompt_tokens": 3},
    chunk_writes=[0, 1, 2, 3],
)

# -- SSE edge cases ---------------------------------------------------------------------------
_G = b'"id":"x","object":"chat.completion.chunk","model":"m"'
DONE_WITHOUT_BLANK_LINE = Fixture(
    "done-without-blank-line", "a server that ends with 'data: [DONE]\\n' and closes the connection",
    "WHATWG would drop the unterminated event; the stream is complete all the same",
    [
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n',
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}\n\n',
        b"data: [DONE]\n",
    ],
    {"ok": True, "token_source": "chunks", "chunk_tokens": [1, 1], "completion_tokens": 2},
    chunk_writes=[0, 1],
    framing="close",
)

DONE_WITH_TRAILING_SPACE = Fixture(
    "done-trailing-space", "'[DONE] ' with trailing whitespace",
    "seen from hand-written OpenAI-compatible servers",
    _ev(
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}',
        b"data: [DONE] \t",
    ),
    {"ok": True, "token_source": "chunks", "chunk_tokens": [1, 1], "completion_tokens": 2},
    chunk_writes=[0, 1],
)

_LONG = b"x" * 200_000
_LONG_EVENT = b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"' + _LONG + b'"},"finish_reason":null}]}\n\n'
LONG_EVENT = Fixture(
    "long-event-many-reads", "one 200 kB event written in 400 pieces (a huge tool call or base64 payload)",
    "any server; the parser must not rescan the event on every read",
    [_LONG_EVENT[i:i + 512] for i in range(0, len(_LONG_EVENT), 512)]
    + [b'data: {' + _G + b',"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"],
    {"ok": True, "token_source": "chunks", "chunk_tokens": [1], "completion_tokens": 1},
    chunk_writes=[len(range(0, len(_LONG_EVENT), 512)) - 1],
    pace_ms=0.0,
)

EMPTY_STREAM = Fixture(
    "empty-stream", "a 200 stream that ends without any content (role chunk, finish, [DONE])",
    "vLLM/llama.cpp when the model emits EOS at once, or a broken backend",
    _ev(
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        b'data: {' + _G + b',"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":0,"total_tokens":4}}',
        b"data: [DONE]",
    ),
    {"ok": False, "error_kind": "empty", "token_source": "usage", "chunk_tokens": [], "completion_tokens": 0},
)

CUT_STREAM = Fixture(
    "cut-mid-stream", "the connection drops mid-stream (no [DONE], no final chunk)",
    "any server restarted or a proxy timeout",
    _ev(
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}',
    ),
    {"ok": False, "error_kind": "disconnect", "chunk_tokens": [1, 1], "completion_tokens": 2},
    chunk_writes=[0, 1],
    framing="close",
)

USAGE_WRONG_TYPE = Fixture(
    "usage-wrong-type", "usage counts as strings (a hand-written proxy)",
    "a count that is not an integer is a malformed chunk, never a crash or a bad Parquet row",
    _ev(
        b'data: {' + _G + b',"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
        b'data: {' + _G + b',"choices":[],"usage":{"prompt_tokens":"3","completion_tokens":"1"}}',
        b"data: [DONE]",
    ),
    {"ok": False, "error_kind": "malformed", "token_source": "chunks", "chunk_tokens": [1], "completion_tokens": 1,
     "prompt_tokens": None},
    chunk_writes=[0],
)

# -- Statuses ---------------------------------------------------------------------------------
REDIRECT = Fixture(
    "redirect-307", "a gateway that redirects http to https",
    "RFC 9110 15.4.8 (307 keeps the method; loadtest does not follow redirects for a POST)",
    [b""],
    {"ok": False, "error_kind": "http_3xx", "status": 307, "chunk_tokens": [], "completion_tokens": 0},
    status=307, reason="Temporary Redirect",
    headers={"Location": "https://example.invalid/v1/chat/completions"}, framing="length",
)

NO_CONTENT = Fixture(
    "status-204", "a 2xx other than 200 (204 No Content)",
    "misconfigured gateways",
    [b""],
    {"ok": False, "error_kind": "malformed", "status": 204, "chunk_tokens": [], "completion_tokens": 0},
    status=204, reason="No Content", headers={}, framing="length",
)

FASTAPI_422 = Fixture(
    "fastapi-422", "FastAPI-based servers (vLLM, SGLang) reject an unknown field with 422",
    "fastapi/exception_handlers.py (request_validation_exception_handler)",
    [b'{"detail":[{"type":"extra_forbidden","loc":["body","stream_options","continuous_usage_stats"],"msg":"Extra inputs are not permitted","input":true}]}'],
    {"ok": False, "error_kind": "http_4xx", "status": 422, "chunk_tokens": [], "completion_tokens": 0,
     "error_contains": "stream_options.continuous_usage_stats: Extra inputs are not permitted"},
    status=422, reason="Unprocessable Entity", headers={"Content-Type": "application/json"}, framing="length",
)

RATE_LIMITED_NOW = Fixture(
    "rate-limited-retry-after-0", "429 with Retry-After: 0",
    "RFC 9110 10.2.3",
    [b'{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}'],
    {"ok": False, "error_kind": "rate_limited", "status": 429, "chunk_tokens": [], "completion_tokens": 0,
     "retry_after_s": 0.0},
    status=429, reason="Too Many Requests",
    headers={"Content-Type": "application/json", "Retry-After": "0"}, framing="length",
)

# -- tool calls: a streamed call is generated content (TTFT, ITL); a call-only answer is not empty --
OPENAI_TOOL_CALL = Fixture(
    "openai-tool-call", "OpenAI chat completions: a streamed tool call (role and call header in one chunk)",
    "platform.openai.com/docs/guides/function-calling (Streaming: delta.tool_calls, finish_reason tool_calls)",
    _ev(
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"location"}}]},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\":\\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"Paris"}}]},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}',
        b'data: {' + _OA + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}',
        b'data: {' + _OA + b',"choices":[],"usage":{"prompt_tokens":60,"completion_tokens":15,"total_tokens":75}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [3, 3, 3, 2, 2, 2], "completion_tokens": 15, "prompt_tokens": 60,
     "tool_calls": {0: ["get_weather", "", '{"', "location", '":"', "Paris", '"}']}},
    chunk_writes=[0, 1, 2, 3, 4, 5],
)

VLLM_TOOL_CALL = Fixture(
    "vllm-tool-call", "vLLM --enable-auto-tool-choice: role chunk, then the call's name, then its arguments",
    "vllm/entrypoints/openai/serving_chat.py (DeltaToolCall(id, type, index, function=DeltaFunctionCall(name)), "
    "arguments in later deltas, exclude_unset)",
    _ev(
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-4f1c","type":"function","index":0,"function":{"name":"get_weather"}}]},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": \\"Dallas\\""}}]},"logprobs":null,"finish_reason":null}]}',
        b'data: {' + _V + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":", \\"unit\\": \\"fahrenheit\\"}"}}]},"logprobs":null,"finish_reason":"tool_calls","stop_reason":128008}]}',
        b'data: {' + _V + b',"choices":[],"usage":{"prompt_tokens":310,"total_tokens":330,"completion_tokens":20}}',
        b"data: [DONE]",
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [7, 7, 6], "completion_tokens": 20, "prompt_tokens": 310,
     "tool_calls": {0: ["get_weather", '{"city": "Dallas"', ', "unit": "fahrenheit"}']}},
    chunk_writes=[1, 2, 3],
)

# -- embeddings: one JSON body, no stream (latency is e2e; no TTFT) --------------------------------
OPENAI_EMBEDDINGS = Fixture(
    "openai-embeddings", "OpenAI /v1/embeddings: one vector per input, usage.prompt_tokens",
    "platform.openai.com/docs/api-reference/embeddings/create (the embedding object)",
    [b'{"object":"list","data":[{"object":"embedding","embedding":[0.0023064255,-0.009327292,-0.0028842222],"index":0}],'
     b'"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}'],
    {"ok": True, "token_source": "usage", "chunk_tokens": [], "completion_tokens": 0, "prompt_tokens": 8, "items": 1},
    api="embeddings", headers={"Content-Type": "application/json"}, framing="length",
)

EMBEDDINGS_MISSING_VECTOR = Fixture(
    "embeddings-missing-vector", "an embeddings 200 with fewer vectors than inputs: not a success",
    "the OpenAI embeddings contract (one embedding object per input, by index)",
    [b'{"object":"list","data":[],"model":"e","usage":{"prompt_tokens":8,"total_tokens":8}}'],
    {"ok": False, "error_kind": "malformed", "chunk_tokens": [], "completion_tokens": 0, "error_contains": "0 embeddings for 1 inputs"},
    api="embeddings", headers={"Content-Type": "application/json"}, framing="length",
)

# -- rerank and score: a query against documents, one JSON body (vLLM's pooling protocol) --------------
_FRANCE = ["What is the capital of France?", "The capital of Brazil is Brasilia.", "The capital of France is Paris.",
           "Horses and cows are both animals"]


def _unary(name: str, server: str, source: str, body: list[bytes], expect: dict[str, Any], api: str,
           prompt: Any) -> Fixture:
    """A fixture answered in one JSON body (no stream, no content chunks), for ``prompt``'s request."""
    return Fixture(name, server, source, body, expect, api=api, headers={"Content-Type": "application/json"},
                   framing="length", prompt=prompt)


VLLM_RERANK = _unary(
    "vllm-rerank", "vLLM /v1/rerank: results sorted by relevance, each with its document, usage.prompt_tokens",
    "docs.vllm.ai serving/openai_compatible_server (Re-rank API example); vllm/entrypoints/pooling/score/protocol.py",
    [b'{"id":"rerank-b389becfb1070107","model":"BAAI/bge-reranker-base","usage":{"prompt_tokens":56,"total_tokens":56},'
     b'"results":[{"index":1,"document":{"text":"The capital of France is Paris.","multi_modal":null},"relevance_score":0.9985467791557312},'
     b'{"index":0,"document":{"text":"The capital of Brazil is Brasilia.","multi_modal":null},"relevance_score":0.0005859603406861424},'
     b'{"index":2,"document":{"text":"Horses and cows are both animals","multi_modal":null},"relevance_score":0.00005664825439453125}]}'],
    {"ok": True, "token_source": "usage", "chunk_tokens": [], "completion_tokens": 0, "prompt_tokens": 56, "items": 3},
    "rerank", _FRANCE,
)

COHERE_RERANK = _unary(
    "cohere-rerank", "Cohere /v2/rerank: results without documents, billed search units instead of tokens",
    "docs.cohere.com/v2/reference/rerank (the response example)",
    [b'{"results":[{"index":1,"relevance_score":0.999071},{"index":0,"relevance_score":0.32713068},'
     b'{"index":2,"relevance_score":0.0000018453284}],"id":"07734bd2-2473-4f07-94e1-0d9f0e6843cf",'
     b'"meta":{"api_version":{"version":"2","is_experimental":false},"billed_units":{"search_units":1}}}'],
    {"ok": True, "chunk_tokens": [], "completion_tokens": 0, "items": 3},
    "rerank", _FRANCE,
)

VLLM_SCORE = _unary(
    "vllm-score", "vLLM /score: one text_1 against two text_2, a score object per pair",
    "docs.vllm.ai serving/openai_compatible_server (Score API: single inference against a batch)",
    [b'{"id":"score-request-id","object":"list","created":693570,"model":"BAAI/bge-reranker-v2-m3",'
     b'"data":[{"index":0,"object":"score","score":0.001094818115234375},{"index":1,"object":"score","score":1.0}],'
     b'"usage":{"prompt_tokens":27,"total_tokens":27,"completion_tokens":0,"prompt_tokens_details":null}}'],
    {"ok": True, "token_source": "usage", "chunk_tokens": [], "completion_tokens": 0, "prompt_tokens": 27, "items": 2},
    "score", _FRANCE[:3],
)

RERANK_MISSING_RESULT = _unary(
    "rerank-missing-result", "a rerank 200 with fewer scored results than documents asked for: not a success",
    "the rerank contract (top_n results, each an index that was sent, with a relevance_score)",
    [b'{"id":"rerank-1","model":"m","usage":{"prompt_tokens":56,"total_tokens":56},'
     b'"results":[{"index":1,"relevance_score":0.99},{"index":7,"relevance_score":0.5}]}'],
    {"ok": False, "error_kind": "malformed", "chunk_tokens": [], "completion_tokens": 0, "items": 3,
     "error_contains": "1 scored results for 3 documents"},
    "rerank", _FRANCE,
)

# -- the Responses API: named events, no [DONE], usage on response.completed ------------------------
_R = b'"id":"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654","object":"response","created_at":1741290958,"model":"gpt-4.1-2025-04-14"'


def _rev(kind: str, body: bytes) -> bytes:
    """One named Responses event: ``event: <type>`` and its data."""
    return b"event: " + kind.encode() + b"\ndata: {\"type\":\"" + kind.encode() + b"\"," + body + b"}"


OPENAI_RESPONSES = Fixture(
    "openai-responses", "OpenAI Responses API, streamed text (response.output_text.delta, usage on response.completed)",
    "platform.openai.com/docs/api-reference/responses-streaming",
    _ev(
        _rev("response.created", b'"sequence_number":0,"response":{' + _R + b',"status":"in_progress","output":[],"usage":null}'),
        _rev("response.in_progress", b'"sequence_number":1,"response":{' + _R + b',"status":"in_progress","output":[],"usage":null}'),
        _rev("response.output_item.added", b'"sequence_number":2,"output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"in_progress","role":"assistant","content":[]}'),
        _rev("response.content_part.added", b'"sequence_number":3,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}'),
        _rev("response.output_text.delta", b'"sequence_number":4,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"Hi"'),
        _rev("response.output_text.delta", b'"sequence_number":5,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":" there"'),
        _rev("response.output_text.delta", b'"sequence_number":6,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"delta":"!"'),
        _rev("response.output_text.done", b'"sequence_number":7,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"text":"Hi there!"'),
        _rev("response.content_part.done", b'"sequence_number":8,"item_id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hi there!","annotations":[]}'),
        _rev("response.output_item.done", b'"sequence_number":9,"output_index":0,"item":{"id":"msg_67c9fdcf37fc8190ba82116e33fb28c507b8b0ad4e5eb654","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there!","annotations":[]}]}'),
        _rev("response.completed", b'"sequence_number":10,"response":{' + _R + b',"status":"completed","output":[],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":0},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}'),
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [4, 4, 3], "completion_tokens": 11, "prompt_tokens": 37,
     "reasoning_tokens": 0, "cached_tokens": 0},
    chunk_writes=[4, 5, 6], api="responses",
)

_VR = b'"response":{"id":"resp_9a1","object":"response","created_at":1741290958,"model":"Qwen/Qwen3-0.6B"'
VLLM_RESPONSES_REASONING = Fixture(
    "vllm-responses-reasoning", "vLLM /v1/responses with a reasoning parser: reasoning deltas, then text (data lines only)",
    "vllm/entrypoints/openai/serving_responses.py (ResponseReasoningTextDeltaEvent, ResponseTextDeltaEvent)",
    _ev(
        b'data: {"type":"response.created","sequence_number":0,' + _VR + b',"status":"in_progress","usage":null}}',
        b'data: {"type":"response.reasoning_text.delta","sequence_number":1,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"Think"}',
        b'data: {"type":"response.reasoning_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"ing"}',
        b'data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Yes","logprobs":[]}',
        b'data: {"type":"response.completed","sequence_number":4,' + _VR + b',"status":"completed","usage":{"input_tokens":12,"output_tokens":3,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":15}}}',
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1], "completion_tokens": 3, "prompt_tokens": 12,
     "reasoning_tokens": 2},
    chunk_writes=[1, 2, 3], api="responses",
)

RESPONSES_ERROR_EVENT = Fixture(
    "responses-error-event", "Responses API: an error event mid-stream",
    "platform.openai.com/docs/api-reference/responses-streaming/error",
    _ev(
        _rev("response.created", b'"sequence_number":0,"response":{' + _R + b',"status":"in_progress","usage":null}'),
        _rev("response.output_text.delta", b'"sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"'),
        _rev("error", b'"code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":2'),
    ),
    {"ok": False, "error_kind": "stream_error", "chunk_tokens": [1], "completion_tokens": 1,
     "error_contains": "The server had an error"},
    chunk_writes=[1], api="responses",
)

RESPONSES_FAILED = Fixture(
    "responses-failed", "Responses API: response.failed with its error",
    "platform.openai.com/docs/api-reference/responses-streaming/response/failed",
    _ev(
        _rev("response.created", b'"sequence_number":0,"response":{' + _R + b',"status":"in_progress","usage":null}'),
        _rev("response.failed", b'"sequence_number":1,"response":{' + _R + b',"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"usage":null}'),
    ),
    {"ok": False, "error_kind": "stream_error", "chunk_tokens": [], "completion_tokens": 0,
     "error_contains": "failed to generate"},
    api="responses",
)

RESPONSES_CUT = Fixture(
    "responses-cut", "Responses API: the stream ends without response.completed",
    "a stream without its terminal event is not a whole answer",
    _ev(
        _rev("response.created", b'"sequence_number":0,"response":{' + _R + b',"status":"in_progress","usage":null}'),
        _rev("response.output_text.delta", b'"sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"'),
    ),
    {"ok": False, "error_kind": "disconnect", "chunk_tokens": [1], "completion_tokens": 1},
    chunk_writes=[1], api="responses",
)

# llama-server (llama.cpp, llama-cpp-python 0.3.36's vendored copy) on /v1/responses: recorded from the real
# server (the tiny test model, a prompt it had cached): named events, no sequence_number, usage with
# input_tokens_details.cached_tokens on response.completed, and llama.cpp's timings beside the response.
LLAMACPP_RESPONSES = Fixture(
    "llamacpp-responses", "llama-server /v1/responses, recorded (usage and timings on response.completed)",
    "recorded from llama-server (llama.cpp in llama-cpp-python 0.3.36), tests/real/test_real_responses.py",
    _ev(
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_85iFwgFgSiP72MbYsx31BzX6ARAOiJ9p","object":"response","status":"in_progress"}}',
        b'event: response.in_progress\ndata: {"type":"response.in_progress","response":{"id":"resp_85iFwgFgSiP72MbYsx31BzX6ARAOiJ9p","object":"response","status":"in_progress"}}',
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added","item":{"content":[],"id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","role":"assistant","status":"in_progress","type":"message"}}',
        b'event: response.content_part.added\ndata: {"type":"response.content_part.added","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","part":{"type":"output_text","text":""}}',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","delta":" used"}',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","delta":" such"}',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","delta":" power"}',
        b'event: response.output_text.done\ndata: {"type":"response.output_text.done","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","text":" used such power"}',
        b'event: response.content_part.done\ndata: {"type":"response.content_part.done","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","part":{"type":"output_text","annotations":[],"logprobs":[],"text":" used such power"}}',
        b'event: response.output_item.done\ndata: {"type":"response.output_item.done","item":{"type":"message","status":"completed","id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":" used such power"}],"role":"assistant"}}',
        b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_85iFwgFgSiP72MbYsx31BzX6ARAOiJ9p","object":"response","created_at":1796170739,"status":"completed","model":"tiny-llama","output":[{"type":"message","status":"completed","id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":" used such power"}],"role":"assistant"}],"usage":{"input_tokens":57,"output_tokens":3,"total_tokens":60,"input_tokens_details":{"cached_tokens":56}}},"timings":{"cache_n":56,"prompt_n":1,"prompt_ms":3.395,"prompt_per_token_ms":3.395,"prompt_per_second":294.5508100147275,"predicted_n":3,"predicted_ms":5.455,"predicted_per_token_ms":2.7275,"predicted_per_second":366.6361136571952}}',
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [1, 1, 1], "completion_tokens": 3, "prompt_tokens": 57,
     "cached_tokens": 56, "server_timings": {"cache_n": 56, "prompt_n": 1, "prompt_ms": 3.395,
                                             "prompt_per_token_ms": 3.395, "prompt_per_second": 294.5508100147275,
                                             "predicted_n": 3, "predicted_ms": 5.455, "predicted_per_token_ms": 2.7275,
                                             "predicted_per_second": 366.6361136571952}},
    chunk_writes=[4, 5, 6], api="responses",
)

# llama-server's error after the first result on /v1/responses: format_oai_sse({"error": ...}) -- an unnamed
# data line in the chat dialect, not an ``event: error`` (tools/server/server-context.cpp, format_error), after
# an SSE ping comment (":") it sends while it waits; then it closes the stream.
LLAMACPP_RESPONSES_ERROR = Fixture(
    "llamacpp-responses-error", "llama-server /v1/responses: a mid-stream error as an unnamed data line",
    "llama.cpp tools/server/server-context.cpp (format_error: format_oai_sse(json {{\"error\", res_json}}))",
    _ev(
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_85iFwgFgSiP72MbYsx31BzX6ARAOiJ9p","object":"response","status":"in_progress"}}',
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_vuDRvWlLJ5A4V35UFJzwDoe3yksxToXq","delta":" used"}',
        b":",
        b'data: {"error":{"code":500,"message":"Invalid diff: now finding less tool calls!","type":"server_error"}}',
    ),
    {"ok": False, "error_kind": "stream_error", "chunk_tokens": [1], "completion_tokens": 1,
     "error_contains": "Invalid diff"},
    chunk_writes=[1], api="responses",
)

# llama-server's streamed tool call (--jinja, a Functionary v3.2 template, tool_choice required), recorded from the
# real server (tests/real/test_real_tool_calls.py's tiny model): the id, type, name and the arguments' first piece in
# one delta, then one piece per token, finish_reason tool_calls, usage (and timings) in a chunk of its own.
LLAMACPP_TOOL_CALL = Fixture(
    "llamacpp-tool-call", "llama-server chat completions: a streamed tool call, recorded",
    "recorded from llama-server (llama.cpp in llama-cpp-python 0.3.36), tests/real/test_real_tool_calls.py",
    _ev(
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1796171467,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"UGB3IiTA9GYQUmedjsz2v0SCCstKWOfN","type":"function","function":{"name":"get_weather","arguments":"{"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\""}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"c"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"i"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"t"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"y"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\""}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\""}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\""}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}',
        b'data: {"choices":[],"created":1796171468,"id":"chatcmpl-EdWNaBZPmMeJUPAjKRwoqMXzhqeRiWJn","model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk","usage":{"completion_tokens":24,"prompt_tokens":416,"total_tokens":440,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":416,"prompt_ms":80.794,"prompt_per_token_ms":0.19421634615384614,"prompt_per_second":5148.897195336288,"predicted_n":24,"predicted_ms":17.458,"predicted_per_token_ms":0.7590434782608695,"predicted_per_second":1317.4475884981098}}',
        b'data: [DONE]',
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2], "completion_tokens": 24,
     "prompt_tokens": 416, "tool_calls": {0: ["get_weather", "{", '"', "c", "i", "t", "y", '"', ":", '"', '"', "}"]}},
    chunk_writes=list(range(1, 12)),
)

# llama-server's Responses stream of a tool call (the same model, tool_choice required), recorded: the call's
# name on response.output_item.added (no token yet), its arguments as function_call_arguments.delta (content),
# no function_call_arguments.done, and usage on response.completed.
LLAMACPP_RESPONSES_TOOL_CALL = Fixture(
    "llamacpp-responses-tool-call", "llama-server /v1/responses: a streamed function call, recorded",
    "recorded from llama-server (llama.cpp in llama-cpp-python 0.3.36), tests/real/test_real_tool_calls.py",
    _ev(
        b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_RihpOokDzx3eftlvoPplOOZtxrI4HQtS","object":"response","status":"in_progress"}}',
        b'event: response.in_progress\ndata: {"type":"response.in_progress","response":{"id":"resp_RihpOokDzx3eftlvoPplOOZtxrI4HQtS","object":"response","status":"in_progress"}}',
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added","item":{"id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","arguments":"","call_id":"call_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","name":"get_weather","type":"function_call","status":"in_progress"}}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"{","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"\\"","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"c","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"i","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"t","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"y","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"\\"","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":":","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"\\"","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"\\"","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.function_call_arguments.delta\ndata: {"type":"response.function_call_arguments.delta","delta":"}","item_id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV"}',
        b'event: response.output_item.done\ndata: {"type":"response.output_item.done","item":{"id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","type":"function_call","status":"completed","arguments":"{\\"city\\":\\"\\"}","call_id":"call_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","name":"get_weather"}}',
        b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_RihpOokDzx3eftlvoPplOOZtxrI4HQtS","object":"response","created_at":1796172858,"status":"completed","model":"tiny-llama","output":[{"id":"fc_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","type":"function_call","status":"completed","arguments":"{\\"city\\":\\"\\"}","call_id":"call_Pn7fsYESVudxv7kKjCjAaLiyax4yLsGV","name":"get_weather"}],"usage":{"input_tokens":416,"output_tokens":24,"total_tokens":440,"input_tokens_details":{"cached_tokens":0}}},"timings":{"cache_n":0,"prompt_n":416,"prompt_ms":203.742,"prompt_per_token_ms":0.48976442307692303,"prompt_per_second":2041.7979601653071,"predicted_n":24,"predicted_ms":50.225,"predicted_per_token_ms":2.1836956521739133,"predicted_per_second":457.9392732702837}}',
    ),
    {"ok": True, "token_source": "usage", "chunk_tokens": [3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2], "completion_tokens": 24,
     "prompt_tokens": 416, "cached_tokens": 0},
    chunk_writes=list(range(3, 14)), api="responses",
)

ZOO = [
    OPENAI_CHAT, OPENAI_REASONING_HIDDEN, AZURE_CHAT, VLLM_CONTINUOUS, VLLM_ABORT, VLLM_OLD_ERROR,
    VLLM_REASONING, SGLANG_ABORT, TGI_USAGE_ON_LAST_CONTENT, TGI_ERROR_EVENT, LLAMACPP_CHAT,
    LLAMACPP_OLD_USAGE_ON_FINISH, LLAMACPP_COMPLETIONS, USAGE_ON_EVERY_CHUNK, DONE_WITHOUT_BLANK_LINE,
    DONE_WITH_TRAILING_SPACE, LONG_EVENT, EMPTY_STREAM, CUT_STREAM, USAGE_WRONG_TYPE, REDIRECT, NO_CONTENT, FASTAPI_422,
    RATE_LIMITED_NOW, OPENAI_TOOL_CALL, VLLM_TOOL_CALL, OPENAI_EMBEDDINGS, EMBEDDINGS_MISSING_VECTOR,
    OPENAI_RESPONSES, VLLM_RESPONSES_REASONING, RESPONSES_ERROR_EVENT, RESPONSES_FAILED, RESPONSES_CUT,
    LLAMACPP_RESPONSES, LLAMACPP_RESPONSES_ERROR, LLAMACPP_TOOL_CALL, LLAMACPP_RESPONSES_TOOL_CALL,
    VLLM_RERANK, COHERE_RERANK, VLLM_SCORE, RERANK_MISSING_RESULT,
]

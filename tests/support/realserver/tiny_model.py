"""Write a tiny random-weight llama GGUF that ``llama-server`` loads: no download.

The real-server tests need a model, but what they test is the wire (streaming,
usage, timings), not the text, so random weights do. The model is a 4-layer
llama with a SentencePiece-style vocabulary of common English words (and their
prefixes, so the SPM merge search reaches whole words), the 128 ASCII byte
tokens (byte fallback for anything else in a prompt) and the three specials.

Only whole-word tokens have non-zero output rows, so with greedy sampling the
model always emits a word: every generated token is printable text and becomes
exactly one SSE chunk (a special, an empty piece or a partial UTF-8 byte would
be held back or sent empty by the server, which would blur the per-chunk checks).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadtest.workload.words import WORDS as PROMPT_WORDS

#: The prompts' own words (one token each, as in real BPE vocabularies) and the chat roles.
WORDS = [*PROMPT_WORDS, "user", "assistant", "system", "hello"]

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

N_EMBD, N_HEAD, N_HEAD_KV, N_LAYER, N_FF, N_CTX = 384, 6, 2, 6, 1152, 4096


def vocabulary() -> tuple[list[str], list[float], list[int], set[int]]:
    """Tokens, scores, types and the ids of whole words (the only ones the model emits)."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(128)]
    types += [gguf.TokenType.BYTE] * 128
    pieces: dict[str, None] = {"\u2581": None}
    for ch in "abcdefghijklmnopqrstuvwxyz":
        pieces[ch] = None
    for word in dict.fromkeys(WORDS):
        spm = "\u2581" + word
        for end in range(2, len(spm) + 1):
            pieces[spm[:end]] = None
    words = {"\u2581" + w for w in WORDS}
    word_ids: set[int] = set()
    for piece in pieces:
        if piece in words:
            word_ids.add(len(tokens))
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
    # SPM merges the pair whose result scores highest: longer pieces first.
    scores = [0.0] * 131 + [float(len(t)) for t in tokens[131:]]
    return tokens, scores, [int(t) for t in types], word_ids


def write_tiny_llama(path: Path, seed: int = 0, layers: int = N_LAYER) -> Path:
    """Write the model to ``path`` (about 8 MB of f16 weights) and return it.

    ``layers``: more blocks make the same model slower per token (a "larger model" regression for
    the gate's benchmark against a real server); the suite's tests use the default.
    """
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    word_ids = _header(writer, "loadtest-tiny-random", layers)
    writer.add_chat_template(CHATML)
    n_vocab = _embeddings(writer, rng)
    output = _w(rng, n_vocab, N_EMBD, scale=1.0).astype(np.float32)
    mask = np.zeros(n_vocab, dtype=bool)
    mask[sorted(word_ids)] = True
    output[~mask] = 0.0  # logit exactly 0: never the argmax against ~250 random logits
    writer.add_tensor("output.weight", output)
    _blocks(writer, rng, layers, qk_norm=False)
    return _finish(writer, path)


def write_tiny_reranker(path: Path, seed: int = 0, layers: int = 2) -> Path:
    """Write a tiny cross-encoder reranker that ``llama-server --reranking`` serves on ``/v1/rerank``.

    llama.cpp ranks with pooling type ``rank``: the server builds each (query, document) pair as
    BOS, query, EOS, document, EOS (the vocabulary's ``add_eos``; no ``rerank`` chat template),
    takes the last token's hidden state (a causal model) through the classifier head
    ``cls.output`` and returns its first output as the score. The arch is ``qwen3`` because it is
    the decoder llama.cpp loads a ``cls.output`` head for (Qwen3-Reranker's layout: two labels,
    "yes" and "no", softmaxed, so a score is P(yes) in (0, 1)); plain ``llama`` loads none. The
    weights are random: the scores mean nothing, the wire and the cost per document are real.
    """
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen3")
    _header(writer, "loadtest-tiny-reranker", layers)
    writer.add_pooling_type(gguf.PoolingType.RANK)
    writer.add_classifier_output_labels(["yes", "no"])
    writer.add_add_eos_token(True)  # BOS query EOS document EOS: the pair's separator and its end
    _embeddings(writer, rng)
    # logits of about unit spread (the last hidden state has unit RMS), so scores spread over (0, 1)
    writer.add_tensor("cls.output.weight", _w(rng, 2, N_EMBD, scale=N_EMBD ** -0.5).astype(np.float32))
    _blocks(writer, rng, layers, qk_norm=True)
    return _finish(writer, path)


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.06) -> np.ndarray:
    """A random f16 matrix (f16 halves the file; llama.cpp computes with it on CPU)."""
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def _header(writer, name: str, layers: int) -> set[int]:
    """The shape, the rope and the SPM vocabulary (BOS, EOS, UNK) every tiny model shares; the word ids."""
    import gguf

    tokens, scores, types, word_ids = vocabulary()
    writer.add_name(name)
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    if writer.arch == "llama":
        writer.add_add_eos_token(False)
    return word_ids


def _embeddings(writer, rng: np.random.Generator) -> int:
    """The token embeddings and the output norm; returns the vocabulary's size."""
    n_vocab = len(vocabulary()[0])
    writer.add_tensor("token_embd.weight", _w(rng, n_vocab, N_EMBD, scale=1.0).astype(np.float32))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    return n_vocab


def _blocks(writer, rng: np.random.Generator, layers: int, qk_norm: bool, keep_dim0: bool = False) -> None:
    """The transformer blocks (``qk_norm``: Qwen3's per-head norms of q and k).

    ``keep_dim0``: no block writes to the residual stream's first dimension (the rows of the
    attention output and of the FFN's down projection for it are zero), so whatever the token
    embeddings put there reaches the output norm unchanged (tiny_tool_model's constant prior).
    """
    head_dim = N_EMBD // N_HEAD
    for i in range(layers):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(p + "attn_q.weight", _w(rng, N_HEAD * head_dim, N_EMBD))
        writer.add_tensor(p + "attn_k.weight", _w(rng, N_HEAD_KV * head_dim, N_EMBD))
        writer.add_tensor(p + "attn_v.weight", _w(rng, N_HEAD_KV * head_dim, N_EMBD))
        attn_out = _w(rng, N_EMBD, N_HEAD * head_dim)
        if keep_dim0:
            attn_out[0] = 0
        writer.add_tensor(p + "attn_output.weight", attn_out)
        if qk_norm:
            writer.add_tensor(p + "attn_q_norm.weight", np.ones(head_dim, dtype=np.float32))
            writer.add_tensor(p + "attn_k_norm.weight", np.ones(head_dim, dtype=np.float32))
        writer.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(p + "ffn_gate.weight", _w(rng, N_FF, N_EMBD))
        writer.add_tensor(p + "ffn_up.weight", _w(rng, N_FF, N_EMBD))
        down = _w(rng, N_EMBD, N_FF)
        if keep_dim0:
            down[0] = 0
        writer.add_tensor(p + "ffn_down.weight", down)


def _finish(writer, path: Path) -> Path:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    import sys

    print(write_tiny_llama(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama.gguf")))

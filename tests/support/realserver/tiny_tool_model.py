"""A tiny random-weight model whose tool calls llama-server's grammar closes at once: a real streamed tool call.

The suite's tiny llama (:mod:`tiny_model`) answers a ``tool_choice: required`` request in words:
its template has no tool format, so llama-server builds no grammar. A template llama.cpp knows is
not enough either: for Hermes-style templates (``<tool_call>`` JSON) its grammar allows free
text before the call, and a random model takes it. Two things together give a genuine call:

- **the template** is a minimal Functionary v3.2 one (``>>>recipient``): llama.cpp's parser for
  it has the generation prompt end in ``>>>``, and with ``tool_choice: required`` the grammar
  allows only ``all`` (text, then a call) or a function's name at that point;
- **a constant prior**: every token embedding has a large constant in its first dimension that
  no block changes (``keep_dim0``), so after the output norm that dimension is about
  ``sqrt(n_embd)`` whatever the context, and a token whose output row reads only that dimension
  gets a fixed logit. Fixed logits for the JSON structure (``"``, ``{``, ``}``, ``:``, ``,``),
  for ``g`` (the first letter of ``get_weather``, above ``a`` of ``all``) and for EOS (above ``g``,
  so a finished call ends the answer instead of starting a second) make greedy, grammar-
  constrained sampling write ``get_weather`` then ``{"city":""}`` and stop. Word tokens keep
  random logits far below those priors; where the grammar allows any character (inside a
  string), the closing quote wins at once.

The result is the wire of a real llama-server tool call (``delta.tool_calls`` with the id and name
in the first chunk, the arguments in pieces, ``finish_reason: tool_calls``) from a model that
cannot talk: without tools it breaks the template's format (llama-server answers 500), so it
serves only the tool-call tests. EOS ends the call, so requests must not set ``ignore_eos``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.realserver.tiny_model import N_EMBD, _blocks, _finish, _header, _w, vocabulary

#: Functionary v3.2's shape (llama.cpp detects it by ``>>>all`` and ``>>>${recipient}``): tools in
#: the system turn, an assistant's call as ``>>>name`` then the JSON arguments, text as ``>>>all``.
FUNCTIONARY = (
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nCall a function by replying "
    ">>>${recipient}\\n${content}; text for the user goes to >>>all\\n' }}"
    "{% if tools %}{% for tool in tools %}{{ tool | tojson }}{% endfor %}{% endif %}{{ '<|eot_id|>' }}"
    "{% for message in messages %}"
    "{% if message.role == 'assistant' and message.tool_calls %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% for tc in message.tool_calls %}"
    "{{ '>>>' + tc.function.name + '\\n' }}"
    "{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}"
    "{% endfor %}{{ '<|eot_id|>' }}"
    "{% else %}{{ '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' }}"
    "{% if message.role == 'assistant' %}{{ '>>>all\\n' }}{% endif %}{{ message.content }}{{ '<|eot_id|>' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n>>>' }}{% endif %}"
)

#: Fixed logits by token text; word tokens' random logits have a spread of about 7.
PRIOR = {'"': 60.0, "</s>": 50.0, "g": 40.0, "{": 30.0, "}": 30.0, ":": 30.0, ",": 30.0}

#: The constant in every embedding's first dimension (the other dimensions are N(0, 1)).
CONSTANT = 50.0


def write_tiny_tool_caller(path: Path, seed: int = 0, layers: int = 2) -> Path:
    """Write the model to ``path`` (a 2-block llama, about 9 MB) and return it."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, _, _, word_ids = vocabulary()
    n_vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), "llama")
    _header(writer, "loadtest-tiny-tool-caller", layers)
    writer.add_chat_template(FUNCTIONARY)
    embeddings = _w(rng, n_vocab, N_EMBD, scale=1.0).astype(np.float32)
    embeddings[:, 0] = CONSTANT
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    output = _w(rng, n_vocab, N_EMBD, scale=1.0).astype(np.float32)
    words = np.zeros(n_vocab, dtype=bool)
    words[sorted(word_ids)] = True
    output[~words] = 0.0
    output[:, 0] = 0.0  # words read the context, never the constant
    # the first dimension after RMS norm (the others are about 1 each before it)
    normed = CONSTANT / np.sqrt((CONSTANT ** 2 + N_EMBD - 1) / N_EMBD)
    for i, token in enumerate(tokens):
        text = chr(int(token[3:5], 16)) if token.startswith("<0x") else token
        if text in PRIOR:
            output[i] = 0.0
            output[i, 0] = PRIOR[text] / normed
    writer.add_tensor("output.weight", output)
    _blocks(writer, rng, layers, qk_norm=False, keep_dim0=True)
    return _finish(writer, path)

"""The KV-cache decoder interface: the names, datatypes and rules of a language engine whose
attention reads and writes its KV cache in place (ONNX Runtime's GroupQueryAttention), shared
by the exporter that writes such a graph, the builder stage's generation gate that checks
one, and the generation loop that runs one.

    inputs_embeds                 FP32  [batch, seq, hidden]  the tokens' embeddings
    position_ids                  INT64 [3, batch, seq]       M-RoPE (t, h, w) positions
    seqlens_k                     INT32 [batch]   per row: tokens in its cache after this run - 1
    logits_index                  INT64 [batch]   per row: the step position whose logits are out
    past_key_values.{i}.key/value CACHE [batch, kv_heads, capacity, head_dim]
    -> logits                     FP32  [batch, vocab]
       top_logits, top_ids        FP32, INT64 [batch, TOP_K]: the largest logits, descending
                                  (ties: the lower id first)
       present.{i}.key/value      CACHE [batch, kv_heads, capacity, head_dim]

CACHE is the engine's compute type (FP32, FP16 or BF16). ``capacity`` is fixed when the graph
is written: the longest sequence (prompt + answer) a row holds. Bound to the same buffers, a
present is its past: the run writes its ``seq`` new keys and values into each row's cache at
the row's own offset and reads nothing else back. The mode of a run follows from its shape:

| shape | mode | each row |
| --- | --- | --- |
| seq == 1 | decode | its token at position seqlens_k (the tokens before it are in its cache) |
| batch == 1, seq > 1 | continued prompt | seq tokens at seqlens_k + 1 - seq .. seqlens_k |
| batch > 1, seq > 1 | new prompts | seqlens_k + 1 tokens at 0 .. seqlens_k, right-padded to seq |

Rows that take no part in a run (free or mid-prompt slots inside a decode batch) are given a
seqlens_k whose write lands where nothing valid is kept (see the generation loop).
"""

from __future__ import annotations

EMBEDS = "inputs_embeds"
POSITIONS = "position_ids"
SEQLENS = "seqlens_k"
LOGITS_INDEX = "logits_index"
LOGITS = "logits"
TOP_LOGITS = "top_logits"
TOP_IDS = "top_ids"
TOP_K = 64  # candidates out per row: greedy choice under a repetition penalty needs no logits


def past_names(layers: int) -> list[str]:
    """``past_key_values.{i}.key``, ``.value`` for each layer, in order."""
    return [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def present_names(layers: int) -> list[str]:
    """``present.{i}.key``, ``.value`` for each layer, in order (each pairs with its past)."""
    return [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]


def input_names(layers: int) -> list[str]:
    """Every input, in graph order."""
    return [EMBEDS, POSITIONS, SEQLENS, LOGITS_INDEX, *past_names(layers)]


def output_names(layers: int) -> list[str]:
    """Every output, in graph order."""
    return [LOGITS, TOP_LOGITS, TOP_IDS, *present_names(layers)]

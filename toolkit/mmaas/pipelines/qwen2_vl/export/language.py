"""The language graph: the Qwen2 decoder of Qwen2-VL with an explicit KV cache.

One graph serves prefill (seq > 1, past 0), decode (seq 1, past > 0), chunked prefill and
left-padded batches; names follow HF optimum / onnxruntime-genai:

    inputs_embeds                  FP32  [batch, seq, hidden]
    attention_mask                 INT64 [batch, total]   total = past + seq; 1 attend, 0 pad
    position_ids                   INT64 [3, batch, seq]  M-RoPE (t, h, w)
    past_key_values.{i}.key/value  FP32  [batch, kv_heads, past, head_dim]
    -> logits                      FP32  [batch, 1, vocab]  (the last position only)
       present.{i}.key/value       FP32  [batch, kv_heads, past + seq, head_dim]

Why one graph (not a prefill and a decode graph): the weights exist once (on disk, in the
engine cache, in memory); one engine entry and hash; chunked prefill comes free. For
TensorRT the same graph takes two optimization profiles (prefill, decode) in one engine.
The mask's length is its own dimension ``total`` (torch.export takes no sum of two Dims);
the graph is only valid when total = past + seq, which the runtime guarantees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb

from mmaas.pipelines.qwen2_vl.export.onnx_io import save_program

OPSET = 18
MASK_MIN = torch.finfo(torch.float32).min


class KVCacheDecoder(torch.nn.Module):
    """Qwen2VLTextModel + lm_head as one step over an explicit KV cache, from transformers'
    own modules (same weights, RMSNorm, rotary and MLP code), with attention written out
    (MatMul -> Add(mask) -> Softmax -> MatMul) so the graph needs no cache object.

    The query at step position i sits at cache slot past + i and attends to the slots
    j <= past + i whose attention_mask is 1 (the most negative float elsewhere, so a fully
    masked padding row gives no NaN). GQA by reshaping the queries to [B, kv, groups, S, D]:
    keys and values are broadcast, never copied."""

    def __init__(self, model: Qwen2VLForConditionalGeneration) -> None:
        super().__init__()
        self.text = model.model.language_model
        self.lm_head = model.lm_head
        config = self.text.config
        self.num_heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.hidden_size // config.num_attention_heads

    def attention(
        self, layer: Any, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
        bias: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """One layer's self-attention -> (output [B, S, H], present key, present value)."""
        attn = layer.self_attn
        batch, seq, _ = hidden.shape
        q = attn.q_proj(hidden).view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        k = attn.k_proj(hidden).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = attn.v_proj(hidden).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        groups = self.num_heads // self.kv_heads
        q = q.reshape(batch, self.kv_heads, groups, seq, self.head_dim)
        scores = torch.matmul(q * attn.scaling, k.unsqueeze(2).transpose(-1, -2)) + bias
        out = torch.matmul(torch.softmax(scores, dim=-1), v.unsqueeze(2))
        out = out.reshape(batch, self.num_heads, seq, self.head_dim).transpose(1, 2)
        return attn.o_proj(out.reshape(batch, seq, -1)), k, v

    def forward(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        *past: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        """See the module docstring for shapes; returns (logits, *presents)."""
        seq = inputs_embeds.shape[1]
        total = attention_mask.shape[1]
        query_slot = torch.arange(seq, device=inputs_embeds.device) + (total - seq)
        key_slot = torch.arange(total, device=inputs_embeds.device)
        visible = (key_slot[None, :] <= query_slot[:, None])[None, :, :] & (
            attention_mask[:, None, :] > 0
        )
        bias = torch.where(visible, 0.0, MASK_MIN)[:, None, None, :, :]  # [B, 1, 1, S, T]
        cos, sin = self.text.rotary_emb(inputs_embeds, position_ids)
        hidden = inputs_embeds
        presents: list[torch.Tensor] = []
        for index, layer in enumerate(self.text.layers):
            attended, k, v = self.attention(
                layer,
                layer.input_layernorm(hidden),
                cos,
                sin,
                bias,
                past[2 * index],
                past[2 * index + 1],
            )
            hidden = hidden + attended
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
            presents += [k, v]
        last = self.text.norm(hidden[:, -1:, :])
        return (self.lm_head(last), *presents)


def language_names(num_layers: int) -> tuple[list[str], list[str]]:
    """Input and output names of the language graph, in order."""
    inputs = ["inputs_embeds", "attention_mask", "position_ids"]
    outputs = ["logits"]
    for i in range(num_layers):
        inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outputs += [f"present.{i}.key", f"present.{i}.value"]
    return inputs, outputs


def dims(config: Any) -> tuple[int, int, int, int]:
    """(layers, kv_heads, head_dim, hidden) of a Qwen2-VL text config."""
    head_dim = config.hidden_size // config.num_attention_heads
    return config.num_hidden_layers, config.num_key_value_heads, head_dim, config.hidden_size


def language_sample(
    config: Any, batch: int, seq: int, past: int, seed: int = 0, pad: int = 0
) -> list[torch.Tensor]:
    """Random inputs of the language graph; the first ``pad`` cache slots of batch row 0
    are left padding (mask 0). Positions increase, with t/h/w differing."""
    g = torch.Generator().manual_seed(seed)
    layers, kv, head_dim, hidden = dims(config)
    embeds = torch.randn(batch, seq, hidden, generator=g) * 0.1
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    mask[0, :pad] = 0
    base = torch.arange(past, past + seq).expand(3, batch, seq).clone()
    position_ids = base + torch.randint(0, 5, (3, batch, 1), generator=g)
    tensors = [embeds, mask, position_ids]
    for _ in range(2 * layers):
        tensors.append(torch.randn(batch, kv, past, head_dim, generator=g))
    return tensors


def export_language(model: Qwen2VLForConditionalGeneration, output: Path) -> None:
    """torch.onnx.export(dynamo=True), batch, seq, past and total symbolic (the sample has
    batch 2, seq 3, past 5: torch.export would specialise 0 and 1); written atomically."""
    config = model.model.language_model.config
    inputs, outputs = language_names(config.num_hidden_layers)
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=1, max=32768)
    past = torch.export.Dim("past", min=0, max=32768)
    total = torch.export.Dim("total", min=1, max=65536)
    dynamic = (
        {0: batch, 1: seq},
        {0: batch, 1: total},
        {1: batch, 2: seq},
        tuple({0: batch, 2: past} for _ in range(2 * config.num_hidden_layers)),
    )
    decoder = KVCacheDecoder(model).eval()
    program = torch.onnx.export(
        decoder,
        tuple(language_sample(config, batch=2, seq=3, past=5)),
        dynamo=True,
        input_names=inputs,
        output_names=outputs,
        dynamic_shapes=dynamic,
        opset_version=OPSET,
        verbose=False,
    )
    save_program(program, output, sum(p.numel() * 4 for p in decoder.parameters()))

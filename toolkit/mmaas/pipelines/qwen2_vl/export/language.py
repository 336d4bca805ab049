"""The language graph: the Qwen2 decoder of Qwen2-VL written as ONNX around ONNX Runtime's
``com.microsoft`` GroupQueryAttention, so that the KV cache is read and written in place (the
interface and its modes: :mod:`mmaas.core.decoder`).

Written node by node from the checkpoint's weights (no trace: nothing is baked at a traced
length, and a 28-layer model is written in seconds), in one compute type: ``fp32`` (the CPU
engine, equal to transformers in FP32), ``fp16`` or ``bf16`` (the GPU engines: weights, cache
and activations in that type; RMSNorm statistics, rotary tables and logits in FP32). Per layer:

    SkipSimplifiedLayerNormalization (residual add + RMSNorm) -> one q|k|v MatMul + bias ->
    RotaryEmbedding on q and k -> GroupQueryAttention (past = present, in place) -> o_proj ->
    SkipSimplifiedLayerNormalization -> gate|up MatMul -> SiLU(gate) * up -> down MatMul

Rotary (C44): the M-RoPE angles are computed per token from ``position_ids`` (never a table
cut at a traced length): frequency j uses the position of axis a(j) (``mrope_section``, e.g.
[16, 24, 24]: j < 16 the time axis, then height, then width), exactly transformers'
``position_ids.float() * inv_freq`` picked by section; the per-token cos/sin rows are the
RotaryEmbedding op's cache, indexed by each token's row number. GroupQueryAttention's
``total_sequence_length`` (a host-side input of its CUDA kernel) is computed from shapes
alone: ``seq`` for a batch of new prompts, the capacity otherwise, so the graph has no
host-to-device copy and a decode step can be captured as a CUDA graph. The logits are
computed only at ``logits_index`` of each row, then the top candidates (TopK).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mmaas.core import decoder
from mmaas.pipelines.qwen2_vl.export.onnx_io import save_model

DTYPES = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
OPSET = 18
# The vision export's IR version: onnxruntime-gpu 1.31 reads up to 13 (onnx 1.23 writes 14).
IR_VERSION = 10
MS = "com.microsoft"


def dims(config: Any) -> tuple[int, int, int, int]:
    """(layers, kv_heads, head_dim, hidden) of a Qwen2-VL text config."""
    head_dim = config.hidden_size // config.num_attention_heads
    return config.num_hidden_layers, config.num_key_value_heads, head_dim, config.hidden_size


def initializer(name: str, array: np.ndarray, dtype: int) -> TensorProto:
    """An FP32 ``array`` as a tensor of ``dtype`` (bf16: rounded to nearest even)."""
    array = np.ascontiguousarray(array, np.float32)
    if dtype == TensorProto.FLOAT16:
        return numpy_helper.from_array(array.astype(np.float16), name)
    if dtype == TensorProto.BFLOAT16:
        bits = array.view(np.uint32).astype(np.uint64)
        words = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        tensor = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=array.shape)
        tensor.raw_data = words.tobytes()
        return tensor
    return numpy_helper.from_array(array, name)


class Graph:
    """Nodes and initializers of one graph, with fresh value names."""

    def __init__(self, dtype: int) -> None:
        self.dtype = dtype
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[TensorProto] = []
        self.consts: set[str] = set()
        self.count = 0

    def op(self, kind: str, inputs: list[str], outputs: int = 1, domain: str = "",
           **attrs: Any) -> Any:  # fmt: skip
        """Add a node; returns its output name (or names, when ``outputs`` > 1)."""
        self.count += 1
        names = [f"{kind.lower()}_{self.count}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(kind, inputs, names, domain=domain or None, **attrs))
        return names[0] if outputs == 1 else names

    def weight(self, name: str, array: np.ndarray, dtype: int | None = None) -> str:
        """An initializer in the compute type (or ``dtype``)."""
        self.weights.append(initializer(name, array, self.dtype if dtype is None else dtype))
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        """An exact initializer (integers, FP32 tables), added once per name."""
        if name not in self.consts:
            self.consts.add(name)
            self.weights.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def shape_facts(self) -> tuple[str, str, str]:
        """(batch, seq, batch * seq): INT64 scalars computed from ``inputs_embeds``'s shape
        (host-side shape arithmetic in ONNX Runtime, never copied to the device)."""
        shape = self.op("Shape", [decoder.EMBEDS])
        batch = self.op("Gather", [shape, self.const("axis0", np.array(0, np.int64))], axis=0)
        seq = self.op("Gather", [shape, self.const("axis1", np.array(1, np.int64))], axis=0)
        return batch, seq, self.op("Mul", [batch, seq])


def rotary_tables(g: Graph, config: Any, head_dim: int, facts: tuple[str, str, str]
                  ) -> tuple[str, str, str]:  # fmt: skip
    """(cos, sin, row ids): per token, cos/sin [batch * seq, head_dim / 2] in the compute type
    and RotaryEmbedding's position ids INT64 [batch, seq] = each token's row number. The
    axis of each frequency is picked by a 0/1 mask and a sum (elementwise: exact, where a
    MatMul could run in TF32 on a GPU and round positions past 2048)."""
    rope = config.rope_parameters
    half = head_dim // 2
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / head_dim
    inv_freq = (1.0 / (rope["rope_theta"] ** exponent)).astype(np.float32)
    axis = np.repeat(np.arange(3), rope["mrope_section"])[:half]  # frequency -> its axis
    mask = (axis[None, :] == np.arange(3)[:, None]).astype(np.float32)[:, None, None, :]
    positions = g.op("Unsqueeze", [g.op("Cast", [decoder.POSITIONS], to=TensorProto.FLOAT),
                                   g.const("last_axis", np.array([-1], np.int64))])  # fmt: skip
    axis0 = g.const("axis0_list", np.array([0], np.int64))
    scaled = g.op("Mul", [positions, g.const("rope_axis_mask", mask)])
    picked = g.op("ReduceSum", [scaled, axis0], keepdims=0)
    angles = g.op("Mul", [picked, g.const("rope_inv_freq", inv_freq)])  # [B, S, half]
    flat = g.op("Reshape", [angles, g.const("rope_rows", np.array([-1, half], np.int64))])
    cos, sin = (g.op("Cast", [g.op(f, [flat])], to=g.dtype) for f in ("Cos", "Sin"))
    batch, seq, rows = facts
    ids = g.op("Range", [g.const("zero", np.array(0, np.int64)), rows,
                         g.const("one", np.array(1, np.int64))])  # fmt: skip
    batch_seq = g.op("Concat", [g.op("Unsqueeze", [x, axis0]) for x in (batch, seq)], axis=0)
    return cos, sin, g.op("Reshape", [ids, batch_seq])


def total_length(g: Graph, capacity: int, facts: tuple[str, str, str]) -> str:
    """GroupQueryAttention's total_sequence_length INT32 scalar, from shapes alone: seq when
    batch > 1 and seq > 1 (new prompts), else the capacity (decode, continued prompt)."""
    batch, seq, _ = facts
    one = g.const("one", np.array(1, np.int64))
    prompts = g.op("And", [g.op("Greater", [batch, one]), g.op("Greater", [seq, one])])
    total = g.op("Where", [prompts, seq, g.const("capacity", np.array(capacity, np.int64))])
    return g.op("Cast", [total], to=TensorProto.INT32)


def layer(g: Graph, i: int, weights: dict[str, np.ndarray], config: Any, hidden: str,
          residual: str | None, tables: tuple[str, str, str], total: str
          ) -> tuple[str, str]:  # fmt: skip
    """One decoder layer; returns (the MLP's output, the residual stream before it is added)."""
    p, eps = f"model.language_model.layers.{i}.", config.rms_norm_eps
    heads, kv, width = config.num_attention_heads, config.num_key_value_heads, config.hidden_size
    head_dim = width // heads
    if residual is None:
        normed = g.op("SimplifiedLayerNormalization",
                      [hidden, g.weight(f"{p}input_norm", weights[f"{p}input_layernorm.weight"])],
                      axis=-1, epsilon=eps, stash_type=1)  # fmt: skip
        residual = hidden
    else:
        normed, _, _, residual = g.op(
            "SkipSimplifiedLayerNormalization",
            [hidden, residual, g.weight(f"{p}input_norm", weights[f"{p}input_layernorm.weight"])],
            outputs=4,
            domain=MS,
            epsilon=eps,
        )
    a = f"{p}self_attn."
    qkv_w = np.concatenate([weights[f"{a}{n}_proj.weight"] for n in "qkv"]).T
    qkv_b = np.concatenate([weights[f"{a}{n}_proj.bias"] for n in "qkv"])
    qkv = g.op("Add", [g.op("MatMul", [normed, g.weight(f"{p}qkv", qkv_w)]),
                       g.weight(f"{p}qkv_bias", qkv_b)])  # fmt: skip
    sizes = g.const(f"{p}qkv_split", np.array([heads * head_dim, kv * head_dim, kv * head_dim]))
    q, k, v = g.op("Split", [qkv, sizes], outputs=3, axis=-1)
    cos, sin, ids = tables
    q, k = (g.op("RotaryEmbedding", [x, ids, cos, sin], domain=MS, num_heads=n, interleaved=0)
            for x, n in ((q, heads), (k, kv)))  # fmt: skip
    past_k, past_v = decoder.past_names(i + 1)[-2:]
    attended, _, _ = g.op(
        "GroupQueryAttention",
        [q, k, v, past_k, past_v, decoder.SEQLENS, total],
        outputs=3,
        domain=MS,
        num_heads=heads,
        kv_num_heads=kv,
    )
    g.nodes[-1].output[1:] = decoder.present_names(i + 1)[-2:]
    attn_out = g.op("MatMul", [attended, g.weight(f"{p}o", weights[f"{a}o_proj.weight"].T)])
    normed, _, _, residual = g.op(
        "SkipSimplifiedLayerNormalization",
        [attn_out, residual,
         g.weight(f"{p}post_norm", weights[f"{p}post_attention_layernorm.weight"])],
        outputs=4, domain=MS, epsilon=eps,
    )  # fmt: skip
    m = f"{p}mlp."
    gate_up_w = np.concatenate([weights[f"{m}gate_proj.weight"], weights[f"{m}up_proj.weight"]]).T
    gate, up = g.op("Split", [g.op("MatMul", [normed, g.weight(f"{p}gate_up", gate_up_w)])],
                    outputs=2, axis=-1, num_outputs=2)  # fmt: skip
    act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
    return g.op("MatMul", [act, g.weight(f"{p}down", weights[f"{m}down_proj.weight"].T)]), residual


def build_language(model: Any, precision: str, capacity: int) -> onnx.ModelProto:
    """The language graph of a loaded ``Qwen2VLForConditionalGeneration`` (FP32 weights) in
    ``precision`` with a KV cache of ``capacity`` tokens per row."""
    config = model.model.language_model.config
    layers, _, head_dim, width = dims(config)
    dtype = DTYPES[precision]
    weights = {
        name: t.detach().float().cpu().numpy()
        for name, t in model.state_dict().items()
        if name.startswith(("model.language_model.", "lm_head."))
    }
    g = Graph(dtype)
    facts = g.shape_facts()
    tables = rotary_tables(g, config, head_dim, facts)
    total = total_length(g, capacity, facts)
    hidden = g.op("Cast", [decoder.EMBEDS], to=dtype)
    residual: str | None = None
    for i in range(layers):
        hidden, residual = layer(g, i, weights, config, hidden, residual, tables, total)
    assert residual is not None
    flat = g.op("Reshape", [g.op("Add", [hidden, residual]),
                            g.const("rows_by_width", np.array([-1, width], np.int64))])  # fmt: skip
    _, seq, rows = facts
    starts = g.op("Range", [g.const("zero", np.array(0, np.int64)), rows, seq])  # b * seq
    picked = g.op("Gather", [flat, g.op("Add", [starts, decoder.LOGITS_INDEX])], axis=0)
    final = g.op("SimplifiedLayerNormalization",
                 [picked, g.weight("final_norm", weights["model.language_model.norm.weight"])],
                 axis=-1, epsilon=config.rms_norm_eps, stash_type=1)  # fmt: skip
    head = weights.get("lm_head.weight", weights["model.language_model.embed_tokens.weight"])
    logits = g.op("MatMul", [final, g.weight("lm_head", head.T)])
    g.nodes.append(helper.make_node("Cast", [logits], [decoder.LOGITS], to=TensorProto.FLOAT))
    g.nodes.append(helper.make_node("TopK", [decoder.LOGITS, g.const("top_k", np.array(
        [decoder.TOP_K], np.int64))], [decoder.TOP_LOGITS, decoder.TOP_IDS], axis=-1))  # fmt: skip
    return helper.make_model(
        helper.make_graph(g.nodes, "qwen2_vl_language", _inputs(config, dtype, capacity),
                          _outputs(config, dtype, capacity), g.weights),
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
        producer_name="mmaas",
        ir_version=IR_VERSION,
    )  # fmt: skip


def _inputs(config: Any, dtype: int, capacity: int) -> list[onnx.ValueInfoProto]:
    layers, kv, head_dim, width = dims(config)
    info = helper.make_tensor_value_info
    return [
        info(decoder.EMBEDS, TensorProto.FLOAT, ["batch", "seq", width]),
        info(decoder.POSITIONS, TensorProto.INT64, [3, "batch", "seq"]),
        info(decoder.SEQLENS, TensorProto.INT32, ["batch"]),
        info(decoder.LOGITS_INDEX, TensorProto.INT64, ["batch"]),
        *(info(n, dtype, ["batch", kv, capacity, head_dim]) for n in decoder.past_names(layers)),
    ]


def _outputs(config: Any, dtype: int, capacity: int) -> list[onnx.ValueInfoProto]:
    layers, kv, head_dim, _ = dims(config)
    info = helper.make_tensor_value_info
    top: list[str | int] = ["batch", decoder.TOP_K]
    return [
        info(decoder.LOGITS, TensorProto.FLOAT, ["batch", config.vocab_size]),
        info(decoder.TOP_LOGITS, TensorProto.FLOAT, top),
        info(decoder.TOP_IDS, TensorProto.INT64, top),
        *(info(n, dtype, ["batch", kv, capacity, head_dim]) for n in decoder.present_names(layers)),
    ]


def export_language(model: Any, output: Path, precision: str, capacity: int) -> None:
    """Write the language graph (:func:`build_language`) atomically; weights past protobuf's
    limit go to ``<name>.data`` beside it."""
    save_model(build_language(model, precision, capacity), output)

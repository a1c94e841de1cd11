"""The transformer both searches run: the encoder stack, one KV-cached decoder step and the
output projection, written from the weights op by op (so no exporter version can change what
they contain). The loop search runs it in its loop body; the BeamSearch op in its encoder and
decoder subgraphs (``search/op.py``), which also hand it their logits processors.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from graphgen.custom_ops.builder import FLOAT, FLOAT16, INT32, GraphBuilder, i64
from graphgen.model.attention import Attention
from graphgen.model.positions import Positions
from graphgen.model.spec import ModelSpec

NEG_INF = np.float32(-np.inf)

# Makes the output bias of a decoder step from its length (int64 [1], decoder start included):
# the BeamSearch op's in-graph logits processors (search/op.py).
OutputBias = Callable[[GraphBuilder, ModelSpec, str], str]


class Transformer(Attention, Positions):
    """The stacks; one instance per graph being built (see :class:`~graphgen.model.layers.Layers`
    for float16)."""

    def encoder(self, input_ids: str, mask: str) -> str:
        spec = self.spec
        x = self.embed(input_ids, "encoder", self.source_positions(input_ids))
        heads = spec.encoder_heads
        position_bias = self.source_relative_bias(input_ids) if spec.relative_attention is not None else ""
        attention_bias = self.source_bias(mask, heads, position_bias)
        for index in range(spec.encoder_layers):
            prefix = f"encoder.layers.{index}"

            def attend(h: str, prefix: str = prefix) -> str:
                q, k, v = self.fused_projections(h, [f"{prefix}.self_attn.{p}" for p in "qkv"])
                attended = self.attention(q, k, v, heads, attention_bias)
                return self.linear(attended, f"{prefix}.self_attn.out")

            x = self.sublayer(x, f"{prefix}.self_attn_layer_norm", attend)
            x = self.sublayer(x, f"{prefix}.final_layer_norm", partial(self.feed_forward, prefix=prefix))
        return self.stack_end(x, "encoder")

    def cross_caches(self, encoder_states: str) -> list[tuple[str, str]]:
        heads = self.spec.decoder_heads
        caches = []
        for index in range(self.spec.decoder_layers):
            prefix = f"decoder.layers.{index}.encoder_attn"
            key = self.split_heads(self.linear(encoder_states, f"{prefix}.k"), heads)
            value = self.split_heads(self.linear(encoder_states, f"{prefix}.v"), heads)
            caches.append((key, value))
        return caches

    def decoder_step(
        self,
        input_ids: str,
        past_length: str,
        past_self: list[tuple[str, str]] | None,
        cross: list[tuple[str, str]],
        mask: str,
        *,
        cross_bias: str | None = None,
        query_groups: tuple[str, str] | None = None,
        processors: OutputBias | None = None,
        flat_logits: bool = False,
        ids_type: int = INT32,
    ) -> tuple[str, list[tuple[str, str]]]:
        """One decoding step for ``input_ids`` [B, 1] (of ONNX element type ``ids_type``); returns
        logits [B, 1, V] (``[B, V]`` with ``flat_logits``) and the new self caches.

        ``cross_bias`` is ``padding_bias(mask)`` when the caller has it already (a search loop computes
        it once, not per step). Without ``processors`` the logits are the model's own (HF's
        ``outputs.logits``): the caller applies the logits processors itself; with them, the output
        bias is what ``processors`` makes of the step's length (the BeamSearch op's subgraphs).

        ``query_groups`` (the shape ``[items, K, H × D/H]``, and the name of the rows' symbolic dimension):
        the rows are the ``K`` beams of each item, and ``cross`` and ``cross_bias`` (``[items, H, K,
        S]``) are per item, not per row. Each item's beams then attend to its source as the ``K``
        query positions of one attention (a query position's softmax is its own), with the caches
        held and read once per item instead of once per beam.
        """
        b, spec = self.b, self.spec
        heads = spec.decoder_heads
        x = self.embed(input_ids, "decoder", self.step_positions(input_ids, past_length, ids_type))
        position_bias = self.step_relative_bias(input_ids, past_length) if spec.relative_attention is not None else ""
        presents = []
        if cross_bias is None:
            cross_bias = self.padding_bias(mask, heads)
        width = heads * spec.head_dim(heads)  # the attention's width (T5's may differ from d_model)
        rows_shape = b.const(i64(-1, 1, width), "rows_shape") if query_groups is not None else ""
        for index in range(spec.decoder_layers):
            prefix = f"decoder.layers.{index}"
            past = past_self[index] if past_self is not None else None

            def attend_self(h: str, prefix: str = prefix, past: tuple[str, str] | None = past) -> str:
                q, k, v = self.fused_projections(h, [f"{prefix}.self_attn.{p}" for p in "qkv"])
                attended, key, value = self.cached_self_attention(q, k, v, heads, past, position_bias)
                presents.append((key, value))
                return self.linear(attended, f"{prefix}.self_attn.out")

            def attend_source(h: str, prefix: str = prefix, index: int = index) -> str:
                q = self.linear(h, f"{prefix}.encoder_attn.q")
                if query_groups is not None:
                    q = b.op("Reshape", [q, query_groups[0]])
                attended = self.cross_attention(q, *cross[index], heads, cross_bias)
                if query_groups is not None:  # back to [rows, 1, H × D/H], stated so ORT still fuses the residual
                    attended = b.op("Reshape", [attended, rows_shape])
                    b.declare(attended, FLOAT16 if self.float16 else FLOAT, [query_groups[1], 1, width])
                return self.linear(attended, f"{prefix}.encoder_attn.out")

            x = self.sublayer(x, f"{prefix}.self_attn_layer_norm", attend_self)
            x = self.sublayer(x, f"{prefix}.encoder_attn_layer_norm", attend_source)
            x = self.sublayer(x, f"{prefix}.final_layer_norm", partial(self.feed_forward, prefix=prefix))
        x = self.stack_end(x, "decoder")
        if processors is None:
            return self.logits(x, flat=flat_logits), presents
        current_length = b.op("Add", [past_length, b.const(i64(1))])
        return self.logits(x, lambda: processors(b, spec, current_length), flat=flat_logits), presents

    def logits(self, hidden: str, output_bias: Callable[[], str] | None = None, *, flat: bool = False) -> str:
        """Output projection with the checkpoint's bias, or the bias ``output_bias`` makes (after the
        scaling, before the projection: the order the nodes have always had); ``[B, 1, V]``, or the
        projection's own ``[B, V]`` with ``flat``."""
        b, spec = self.b, self.spec
        if spec.output_scale != 1.0:
            hidden = self.scale_by(hidden, spec.output_scale, "output_scale")
        rows = b.reshape(hidden, [-1, spec.d_model])
        if output_bias is None and self.float16:
            # HF: the projection, rounded to float16, plus the float16 bias, then float32 for generate.
            logits = b.op("Gemm", [rows, self.w("lm_head.weight")], transB=1)
            bias_row = final_logits_bias(spec)
            if np.any(bias_row):
                logits = b.add(logits, b.derived("final_logits_bias_row.float16", bias_row.astype(np.float16)))
            logits = b.op("Cast", [logits], to=FLOAT)
            return logits if flat else b.reshape(logits, [-1, 1, spec.target_vocab_size])
        bias = b.derived("final_logits_bias_row", final_logits_bias(spec)) if output_bias is None else output_bias()
        logits = self.weights.output_projection(b, rows, self.spec.weight_name("lm_head.weight"), bias)
        return logits if flat else b.reshape(logits, [-1, 1, spec.target_vocab_size])


def final_logits_bias(spec: ModelSpec) -> np.ndarray:
    return spec.weight("final_logits_bias").reshape(-1).astype(np.float32).copy()

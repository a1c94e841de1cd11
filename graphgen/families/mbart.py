"""mBART (mBART-50 many-to-many, mBART-25 and their fine-tunes) → ModelSpec.

Pre-norm layers with a final norm per stack and a norm right after the embeddings; learned
position tables, one per stack, whose first two rows are never read (offset 2); an output bias.
"""

from __future__ import annotations

from graphgen.families import Adapter, CheckpointData, register
from graphgen.families._bart import bart_spec, norm_weights, shared_table_ties, tensor_reader
from graphgen.model.spec import ModelSpec
from graphgen.text.rules import TokenizerRule, lang_code_to_id, register_tokenizer

register_tokenizer("MBart50Tokenizer", TokenizerRule(lang_code_to_id, metaspace=True, spm_file="vocab_file"))
# mBART-25 (facebook/mbart-large-cc25 and its fine-tunes, mbart-large-en-ro): the source language
# after </s>, the target language as the decoder start (mbart-large-en-ro's config: ro_RO).
register_tokenizer(
    "MBartTokenizer", TokenizerRule(lang_code_to_id, metaspace=True, spm_file="vocab_file", target_starts_decoder=True)
)

MBART_POSITION_OFFSET = 2  # MBartLearnedPositionalEmbedding's fixed offset


def mbart_spec(checkpoint: CheckpointData) -> ModelSpec:
    tensors = shared_table_ties(checkpoint.config, checkpoint.tensors)
    tensor = tensor_reader(checkpoint, tensors)
    extra = norm_weights(
        tensor,
        {
            f"{side}.{name}": f"model.{side}.{hf_name}"
            for side in ("encoder", "decoder")
            for name, hf_name in (("layer_norm", "layer_norm"), ("embedding_norm", "layernorm_embedding"))
        },
    )
    extra["final_logits_bias"] = tensor("final_logits_bias").reshape(-1)
    for side in ("encoder", "decoder"):
        extra[f"{side}.positions"] = tensor(f"model.{side}.embed_positions.weight")
    return bart_spec(
        checkpoint,
        tensors,
        "MBartForConditionalGeneration",
        extra,
        pre_layer_norm=True,
        final_layer_norm=True,
        embedding_layer_norm=True,
        position_offset=MBART_POSITION_OFFSET,
    )


register(Adapter(config_class="MBartConfig", model_class="MBartForConditionalGeneration", to_spec=mbart_spec))

"""The checkpoint's generation config → the search defaults, refusing what the graph would not reproduce.

HF ``generate`` reads many keys of ``generation_config.json``. A key the graph ignores would give a
file that silently differs from HF (a forced first token, suppressed tokens, sampling, ...), so
every key is sorted into one of four groups, and a checkpoint that sets a key of the last group to
anything but HF's default stops the export with the key's name:

* implemented in the graph (``HONOURED``);
* without effect on the tokens generated (``NO_EFFECT``: output formats, caches, compilation);
* read by HF only in a mode that is itself refused (``SAMPLING_ONLY`` with ``do_sample``);
* everything else, including keys of future transformers versions: refused when set.

Adapters call :func:`generation_defaults`; builders never see the HF config.
"""

from __future__ import annotations

from typing import Any

from graphgen._errors import UnsupportedModelError
from graphgen.model.spec import GenerationDefaults

HONOURED = frozenset(
    {
        "max_length",
        "max_new_tokens",  # max_length = max_new_tokens + 1 (the decoder start), as HF computes it
        "min_length",
        "min_new_tokens",  # likewise
        "num_beams",
        "num_return_sequences",
        "length_penalty",
        "repetition_penalty",
        "early_stopping",
        "no_repeat_ngram_size",
        "bad_words_ids",  # single-token entries
        "renormalize_logits",
        "forced_bos_token_id",  # the default first token; a graph input overrides it
        "forced_eos_token_id",  # equal to eos_token_id
        "eos_token_id",  # one id
        "pad_token_id",
        "bos_token_id",  # not used by encoder-decoder generation
        "decoder_start_token_id",
    }
)
NO_EFFECT = frozenset(
    {
        "transformers_version",
        "_from_model_config",
        "use_cache",
        "cache_implementation",
        "cache_config",
        "max_cache_len",
        "compile_config",
        "disable_compile",
        "prefill_chunk_size",
        "continuous_batching_config",
        "low_memory",  # contrastive search only, which penalty_alpha would turn on (refused)
        "output_attentions",
        "output_hidden_states",
        "output_scores",
        "output_logits",
        "return_dict_in_generate",
        # Only used when generate is given an assistant model, which a config alone cannot do.
        "num_assistant_tokens",
        "num_assistant_tokens_schedule",
        "assistant_confidence_threshold",
        "assistant_lookbehind",
        "target_lookbehind",
        "assistant_early_exit",
        "assistant_ensemble_weight",
        "is_assistant",
    }
)
SAMPLING_ONLY = frozenset(
    {"temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "top_h"}
)

_REASONS = {
    "do_sample": "sampling is not implemented (the graph searches deterministically)",
    "forced_decoder_ids": "the graph does not force decoder tokens",
    "suppress_tokens": "the graph does not suppress tokens",
    "begin_suppress_tokens": "the graph does not suppress tokens",
    "num_beam_groups": "group (diverse) beam search is not implemented",
    "diversity_penalty": "group (diverse) beam search is not implemented",
    "encoder_no_repeat_ngram_size": "not implemented in the graph",
    "encoder_repetition_penalty": "not implemented in the graph",
    "exponential_decay_length_penalty": "not implemented in the graph",
    "sequence_bias": "not implemented in the graph",
    "penalty_alpha": "contrastive search is not implemented",
    "guidance_scale": "classifier-free guidance is not implemented",
    "constraints": "constrained beam search is not implemented",
    "force_words_ids": "constrained beam search is not implemented",
    "stop_strings": "stop strings are not implemented",
    "max_time": "a time limit cannot be reproduced",
    "remove_invalid_values": "not implemented in the graph",
    "watermarking_config": "watermarking is not implemented",
    "dola_layers": "DoLa decoding is not implemented",
    "prompt_lookup_num_tokens": "prompt lookup decoding is not implemented",
    "max_matching_ngram_size": "prompt lookup decoding is not implemented",
    "token_healing": "token healing is not implemented",
}


def _set_keys(generation_config: Any) -> dict[str, Any]:
    """The keys whose value differs from HF's default."""
    return dict(generation_config.to_diff_dict())


def refused_keys(generation_config: Any) -> dict[str, str]:
    """Keys set in ``generation_config`` that the graph would not honour, with the reason."""
    values = _set_keys(generation_config)
    refused = {}
    for key in sorted(values):
        if key in HONOURED or key in NO_EFFECT:
            continue
        if key in SAMPLING_ONLY and not values.get("do_sample"):
            continue  # HF reads these only when sampling
        refused[key] = _REASONS.get(key, "graphgen does not know this key")
    bad_words = generation_config.bad_words_ids or []
    if any(len(words) != 1 for words in bad_words):
        refused["bad_words_ids"] = "entries of several tokens are not implemented; only single tokens"
    if generation_config.early_stopping == "never":
        refused["early_stopping"] = '"never" has no equivalent in ORT BeamSearch'
    eos = generation_config.eos_token_id
    if isinstance(eos, list) and len(eos) > 1:
        refused["eos_token_id"] = "several end-of-sequence ids are not implemented"
    forced_eos = generation_config.forced_eos_token_id
    if forced_eos is not None and forced_eos != _single(eos):
        refused["forced_eos_token_id"] = "a forced EOS other than eos_token_id is not implemented"
    return refused


def _single(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def generation_defaults(generation_config: Any, max_positions: int) -> tuple[GenerationDefaults, bool, bool]:
    """Defaults for the search node, whether HF renormalises logits, and whether EOS is forced.

    Raises :class:`UnsupportedModelError` naming every key the graph would not reproduce.
    """
    refused = refused_keys(generation_config)
    if refused:
        listed = "; ".join(f"{key}={_set_keys(generation_config).get(key)!r}: {why}" for key, why in refused.items())
        raise UnsupportedModelError(
            f"generation_config.json sets what the exported file would not do as HF generate does ({listed}). "
            "Remove or change these keys in the checkpoint's generation_config.json to export it"
        )
    g = generation_config
    max_length = int(g.max_length or max_positions)
    if g.max_new_tokens is not None:
        max_length = int(g.max_new_tokens) + 1  # HF: new tokens after the one-token decoder start
    min_length = int(g.min_length or 0)
    if g.min_new_tokens is not None:
        min_length = int(g.min_new_tokens) + 1
    defaults = GenerationDefaults(
        max_length=max_length,
        min_length=min_length,
        num_beams=int(g.num_beams or 1),
        num_return_sequences=int(g.num_return_sequences or 1),
        length_penalty=float(g.length_penalty if g.length_penalty is not None else 1.0),
        repetition_penalty=float(g.repetition_penalty or 1.0),
        early_stopping=bool(g.early_stopping),
        no_repeat_ngram_size=int(g.no_repeat_ngram_size or 0),
        bad_token_ids=tuple(words[0] for words in (g.bad_words_ids or [])),
        forced_bos_token_id=None if g.forced_bos_token_id is None else int(g.forced_bos_token_id),
    )
    return defaults, bool(g.renormalize_logits), g.forced_eos_token_id is not None

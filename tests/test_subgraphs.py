"""Each subgraph, run on its own, against the torch model: logits and every cache; T5's relative
position buckets against HF's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import MarianMTModel

from graphgen._assemble import standalone_subgraph
from graphgen.checkpoint.load import load_checkpoint
from graphgen.model.positions import relative_buckets, sinusoidal_positions
from graphgen.model.spec import RelativeAttention
from graphgen.search.op import build_decoder_graph, build_encoder_graph
from graphgen.testing import open_session, random_marian

CONFIGS = {
    "swish-scaled": {},
    "gelu-unscaled": {"activation_function": "gelu", "scale_embedding": False, "encoder_layers": 1},
    "relu-wide": {"activation_function": "relu", "d_model": 48, "decoder_attention_heads": 6, "decoder_layers": 1},
    "separate-vocab": {
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
        "decoder_vocab_size": 71,
        "pad_token_id": 70,
        "decoder_start_token_id": 70,
    },
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_marian(tmp_path_factory.mktemp(request.param), seed=len(request.param), **CONFIGS[request.param])


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str, atol: float = 2e-4) -> None:
    """Equal within float32 noise, with -inf (masked logits) in the same places."""
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(actual)), f"{what}: -inf positions differ"
    np.testing.assert_allclose(actual[finite], expected[finite], atol=atol, rtol=1e-4, err_msg=what)


def _batch(batch: int, vocab: int, pad: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded random ids: row i has length max_len - 2*i (at least 1)."""
    rng = np.random.default_rng(seed)
    width = 9
    ids = rng.integers(1, vocab - 1, size=(batch, width)).astype(np.int32)
    mask = np.ones_like(ids)
    for row in range(batch):
        length = max(1, width - 3 * row)
        ids[row, length - 1] = 0  # </s>
        ids[row, length:] = pad
        mask[row, length:] = 0
    return ids, mask


def _outer(spec, **values: int) -> dict[str, np.ndarray]:
    return {
        "min_length": np.array([values.get("min_length", 0)], np.int32),
        "max_length": np.array([values.get("max_length", spec.generation.max_length)], np.int32),
    }


def _reference_logits(logits: np.ndarray, spec, current_length: int) -> np.ndarray:
    """What the subgraph should return: HF logits with the in-graph processors applied."""
    logits = logits.copy()
    logits[..., list(spec.generation.bad_token_ids)] = -np.inf
    if current_length == spec.generation.max_length - 1:
        keep = logits[..., spec.eos_token_id].copy()
        logits[...] = -np.inf
        logits[..., spec.eos_token_id] = keep
    return logits


def test_positions_match_hf(checkpoint: Path) -> None:
    model = MarianMTModel.from_pretrained(checkpoint)
    expected = model.model.encoder.embed_positions.weight.detach().numpy()
    np.testing.assert_array_equal(sinusoidal_positions(*expected.shape), expected)


@pytest.mark.parametrize("batch", [1, 3])
def test_encoder_subgraph(checkpoint: Path, batch: int) -> None:
    spec = load_checkpoint(checkpoint).spec
    model = MarianMTModel.from_pretrained(checkpoint).eval()
    session = open_session(standalone_subgraph(spec, build_encoder_graph(spec)))
    ids, mask = _batch(batch, spec.source_vocab_size, spec.pad_token_id, seed=batch)
    start = np.full((batch, 1), spec.decoder_start_token_id, np.int32)
    names = [o.name for o in session.get_outputs()]
    got = dict(
        zip(
            names,
            session.run(
                None,
                {"encoder_input_ids": ids, "encoder_attention_mask": mask, "decoder_input_ids": start, **_outer(spec)},
            ),
            strict=True,
        )
    )
    with torch.no_grad():
        ref = model(
            input_ids=torch.from_numpy(ids).long(),
            attention_mask=torch.from_numpy(mask).long(),
            decoder_input_ids=torch.from_numpy(start).long(),
            use_cache=True,
        )
    keep = mask.astype(bool)
    assert_close(got["encoder_hidden_states"][keep], ref.encoder_last_hidden_state.numpy()[keep], "encoder states")
    assert_close(got["logits"], _reference_logits(ref.logits.numpy(), spec, 1), "first-step logits")
    cache = ref.past_key_values
    for layer in range(spec.decoder_layers):
        self_layer, cross_layer = cache.self_attention_cache.layers[layer], cache.cross_attention_cache.layers[layer]
        assert_close(got[f"present_key_self_{layer}"], self_layer.keys.numpy(), f"self key {layer}")
        assert_close(got[f"present_value_self_{layer}"], self_layer.values.numpy(), f"self value {layer}")
        assert_close(got[f"present_key_cross_{layer}"], cross_layer.keys.numpy(), f"cross key {layer}")
        assert_close(got[f"present_value_cross_{layer}"], cross_layer.values.numpy(), f"cross value {layer}")


@pytest.mark.parametrize("past", [1, 4, 11])
def test_decoder_subgraph(checkpoint: Path, past: int) -> None:
    spec = load_checkpoint(checkpoint).spec
    model = MarianMTModel.from_pretrained(checkpoint).eval()
    session = open_session(standalone_subgraph(spec, build_decoder_graph(spec)))
    batch = 3
    ids, mask = _batch(batch, spec.source_vocab_size, spec.pad_token_id, seed=past)
    rng = np.random.default_rng(past)
    prefix = rng.integers(1, spec.target_vocab_size - 1, size=(batch, past + 1))
    prefix[:, 0] = spec.decoder_start_token_id
    with torch.no_grad():
        before = model(
            input_ids=torch.from_numpy(ids).long(),
            attention_mask=torch.from_numpy(mask).long(),
            decoder_input_ids=torch.from_numpy(prefix[:, :past]).long(),
            use_cache=True,
        )
        after = model(
            input_ids=torch.from_numpy(ids).long(),
            attention_mask=torch.from_numpy(mask).long(),
            decoder_input_ids=torch.from_numpy(prefix).long(),
            use_cache=True,
        )
    feeds = {"input_ids": prefix[:, past:].astype(np.int32), "encoder_attention_mask": mask, **_outer(spec)}
    for layer in range(spec.decoder_layers):
        self_layer = before.past_key_values.self_attention_cache.layers[layer]
        cross_layer = before.past_key_values.cross_attention_cache.layers[layer]
        feeds[f"past_key_self_{layer}"] = self_layer.keys.numpy()
        feeds[f"past_value_self_{layer}"] = self_layer.values.numpy()
        feeds[f"past_key_cross_{layer}"] = cross_layer.keys.numpy()
        feeds[f"past_value_cross_{layer}"] = cross_layer.values.numpy()
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feeds), strict=True))
    expected = _reference_logits(after.logits.numpy()[:, -1:], spec, past + 1)
    assert_close(got["logits"], expected, f"logits after {past} cached steps")
    for layer in range(spec.decoder_layers):
        self_layer = after.past_key_values.self_attention_cache.layers[layer]
        assert_close(got[f"present_key_self_{layer}"], self_layer.keys.numpy(), f"self key {layer}")
        assert_close(got[f"present_value_self_{layer}"], self_layer.values.numpy(), f"self value {layer}")


def test_min_length_and_forced_eos_in_graph(checkpoint: Path) -> None:
    """Before min_length EOS is -inf; at max_length - 1 only EOS is left."""
    spec = load_checkpoint(checkpoint).spec
    session = open_session(standalone_subgraph(spec, build_encoder_graph(spec)))
    ids, mask = _batch(2, spec.source_vocab_size, spec.pad_token_id, seed=7)
    start = np.full((2, 1), spec.decoder_start_token_id, np.int32)
    feeds = {"encoder_input_ids": ids, "encoder_attention_mask": mask, "decoder_input_ids": start}
    free = session.run(["logits"], {**feeds, **_outer(spec)})[0]
    assert np.isfinite(free[..., spec.eos_token_id]).all()
    short = session.run(["logits"], {**feeds, **_outer(spec, min_length=2)})[0]
    assert np.isneginf(short[..., spec.eos_token_id]).all()
    forced = session.run(["logits"], {**feeds, **_outer(spec, max_length=2)})[0]
    assert np.isfinite(forced[..., spec.eos_token_id]).all()
    assert np.isneginf(np.delete(forced, spec.eos_token_id, axis=-1)).all()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (10, 14), (16, 40)])
def test_relative_buckets_equal_hf(bidirectional: bool, buckets: int, distance: int) -> None:
    """T5's bucket of each distance (exact, log-spaced, saturated), the table the graph gathers from."""
    from transformers.models.t5.modeling_t5 import T5Attention

    table = relative_buckets(RelativeAttention(buckets, distance), bidirectional=bidirectional)
    offsets = torch.arange(-3 * distance, 3 * distance + 1)
    expected = T5Attention._relative_position_bucket(offsets, bidirectional, buckets, distance).numpy()
    assert table[np.clip(offsets.numpy(), -distance, distance) + distance].tolist() == expected.tolist()

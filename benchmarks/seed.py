"""The "seed" approach graphgen replaces: encoder and decoder exported to ONNX without a KV cache,
and the search written in Python around two ``session.run`` calls.

Without a cache every step re-runs the decoder over the whole prefix, so the cost of a step grows
with the output length; that is the point of including it in the chart. The search forces exactly
``new_tokens`` steps (EOS banned before the last step, forced at it) like the other systems.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def export_seed(checkpoint: Path, folder: Path) -> None:
    import torch
    from transformers import MarianMTModel

    folder.mkdir(parents=True, exist_ok=True)
    model = MarianMTModel.from_pretrained(checkpoint).eval()

    model.requires_grad_(False)

    class Part(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model  # registered, so the tracer sees parameters, not constants

    class Encoder(Part):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    class Decoder(Part):
        def forward(
            self, decoder_input_ids: torch.Tensor, encoder_hidden_states: torch.Tensor, attention_mask: torch.Tensor
        ) -> torch.Tensor:
            hidden = self.model.get_decoder()(
                input_ids=decoder_input_ids,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=attention_mask,
                use_cache=False,
            ).last_hidden_state
            return self.model.lm_head(hidden[:, -1]) + self.model.final_logits_bias

    ids = torch.tensor([[5, 6, 7, 0]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.onnx.export(
            Encoder(),
            (ids, mask),
            str(folder / "encoder.onnx"),
            input_names=["input_ids", "attention_mask"],
            output_names=["hidden"],
            dynamic_axes={
                "input_ids": {0: "b", 1: "s"},
                "attention_mask": {0: "b", 1: "s"},
                "hidden": {0: "b", 1: "s"},
            },
            opset_version=17,
            dynamo=False,
        )
        hidden = Encoder()(ids, mask)
        start = torch.tensor([[model.config.decoder_start_token_id, 7]])
        torch.onnx.export(
            Decoder(),
            (start, hidden, mask),
            str(folder / "decoder.onnx"),
            input_names=["decoder_input_ids", "encoder_hidden_states", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={
                "decoder_input_ids": {0: "b", 1: "t"},
                "encoder_hidden_states": {0: "b", 1: "s"},
                "attention_mask": {0: "b", 1: "s"},
                "logits": {0: "b"},
            },
            opset_version=17,
            dynamo=False,
        )
    config = model.generation_config
    special = {"start": config.decoder_start_token_id, "eos": config.eos_token_id, "pad": config.pad_token_id}
    (folder / "special.json").write_text(json.dumps(special), encoding="utf-8")


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class SeedTranslator:
    def __init__(self, checkpoint: Path, folder: Path, threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.log_severity_level = 3
        self.encoder = ort.InferenceSession(str(folder / "encoder.onnx"), options)
        self.decoder = ort.InferenceSession(str(folder / "decoder.onnx"), options)
        self.special = json.loads((folder / "special.json").read_text(encoding="utf-8"))

    def _next_logits(self, prefix: np.ndarray, hidden: np.ndarray, mask: np.ndarray, last: bool) -> np.ndarray:
        feeds = {"decoder_input_ids": prefix, "encoder_hidden_states": hidden, "attention_mask": mask}
        logits = self.decoder.run(None, feeds)[0]
        logits[:, self.special["pad"]] = -np.inf
        if last:  # forced EOS at the last step, banned before it (min_length == max_length)
            logits[:, : self.special["eos"]] = -np.inf
            logits[:, self.special["eos"] + 1 :] = -np.inf
        else:
            logits[:, self.special["eos"]] = -np.inf
        return logits

    def generate(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> list[int]:
        return [self.search(ids, mask, beams, new_tokens).shape[1] - 1] * ids.shape[0]

    def search(self, ids: np.ndarray, mask: np.ndarray, beams: int, new_tokens: int) -> np.ndarray:
        """The best hypothesis per item, decoder start token included."""
        ids64, mask64 = ids.astype(np.int64), mask.astype(np.int64)
        hidden = self.encoder.run(None, {"input_ids": ids64, "attention_mask": mask64})[0]
        batch = ids.shape[0]
        hidden, mask64 = np.repeat(hidden, beams, axis=0), np.repeat(mask64, beams, axis=0)
        prefix = np.full((batch * beams, 1), self.special["start"], dtype=np.int64)
        scores = np.zeros((batch, beams), dtype=np.float32)
        scores[:, 1:] = -np.inf  # all beams start identical: keep one
        for step in range(new_tokens):
            logits = self._next_logits(prefix, hidden, mask64, step == new_tokens - 1)
            candidates = scores[:, :, None] + _log_softmax(logits).reshape(batch, beams, -1)
            flat = candidates.reshape(batch, -1)
            best = np.argpartition(-flat, beams - 1, axis=1)[:, :beams]
            scores = np.take_along_axis(flat, best, axis=1)
            origin = best // logits.shape[-1] + np.arange(batch)[:, None] * beams
            prefix = np.concatenate([prefix[origin.reshape(-1)], (best % logits.shape[-1]).reshape(-1, 1)], axis=1)
        best_beam = scores.argmax(axis=1) + np.arange(batch) * beams
        return prefix[best_beam]

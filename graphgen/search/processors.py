"""HF's logits processors that depend only on the step, stated once for both searches.

``NoBadWordsLogitsProcessor`` (single-token entries), ``MinLengthLogitsProcessor`` and
``ForcedEOSTokenLogitsProcessor`` mask whole vocabulary columns, the same for every row of a step,
so each state they can be in is one precomputed additive row (0 kept, -inf banned) and a step picks
its row by its length instead of editing ``[rows, vocab]`` logits. The loop search adds the row to
the log-probabilities; the BeamSearch op, whose own processors run after the decoder, gets the rows
folded into the output bias (only where HF renormalises, which the op cannot do itself).
"""

from __future__ import annotations

import numpy as np

from graphgen.model.spec import ModelSpec
from graphgen.model.transformer import NEG_INF

# Row indices: PLAIN always; TOO_SHORT when the min-length state is built; the forced-EOS row is last.
PLAIN = 0
TOO_SHORT = 1


def processor_masks(spec: ModelSpec, *, bans: bool = True, min_length: bool = True) -> list[np.ndarray]:
    """The additive ``[vocab]`` row of each state, in HF's order of application: the banned tokens
    (``bans``); with EOS banned too while ``min_length`` is not reached (``min_length``); with every
    token but EOS banned on the last step (``forced_eos_token_id``: it wins when both apply)."""
    base = np.zeros(spec.target_vocab_size, dtype=np.float32)
    if bans:
        base[list(spec.generation.bad_token_ids)] = NEG_INF
    rows = [base]
    if min_length:
        too_short = base.copy()
        too_short[spec.eos_token_id] = NEG_INF
        rows.append(too_short)
    if spec.forced_eos:
        forced = np.full_like(base, NEG_INF)
        forced[spec.eos_token_id] = 0.0
        rows.append(forced)
    return rows

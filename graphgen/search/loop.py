"""Beam search in standard ONNX ops: one ``Loop`` over decoding steps, all ``batch × beams`` rows at once.

ORT's ``com.microsoft.BeamSearch`` op misreads every batch item but the first in its done check
(``search.op.batch_safe_search``), so with it an exact search runs one item at a time. This search
is HF ``generate``'s own algorithm (transformers 5 ``_beam_search``, vectorised over the batch)
written as graph ops, so a whole batch is searched at once and every returned hypothesis is
HF's. Per item and step:

* the log-probabilities of each running beam's continuations plus the beam's score, the best
  ``2 × beams`` of them (``TopK`` over ``beams × vocab``);
* of those, the best ``beams`` that did not end (EOS or ``max_length``) keep running, and the
  KV caches follow them (``Gather`` over rows);
* among those that ended, the ones ranked within the first ``beams`` compete, length-normalised,
  with the finished hypotheses kept so far;
* an item stops improving once no running beam's score could beat its worst finished one (HF's
  heuristic for ``early_stopping=False``); with ``early_stopping=True`` once ``beams`` have ended.

The loop ends when no item can improve, as HF's does. Greedy search (``num_beams`` 1) takes its
own branch of the step: HF's argmax and unfinished flags (an item ends at its first EOS), with the
tokens and scores of the one-beam case of the above with ``early_stopping=True`` in a third of its
nodes. The logits processors run on the model's logits in HF's order, including
``repetition_penalty`` on raw logits for greedy search and on log-probabilities for beam search,
``no_repeat_ngram_size``, and both ``renormalize_logits`` settings. The encoder and the
cross-attention caches run once per item, before the loop, and the caches stay per item: each
step's cross-attention takes an item's beams as the query positions of one attention over its
source (not a copy of the caches per beam); the loop body holds every decoder
step, the first included (so each decoder weight has one reader, and ONNX Runtime prepacks it
once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from onnx import GraphProto, NodeProto, TensorProto, helper, numpy_helper

from graphgen.contract import (
    ATTENTION_MASK,
    DECODER_START_TOKEN_ID,
    FORCED_BOS_TOKEN_ID,
    LENGTH_PENALTY,
    MAX_LENGTH,
    MIN_LENGTH,
    NUM_BEAMS,
    NUM_RETURN_SEQUENCES,
    REPETITION_PENALTY,
    SEQUENCE_SCORES,
)
from graphgen.custom_ops import fail_when
from graphgen.custom_ops.builder import BOOL, FLOAT, FLOAT16, INT32, INT64, GraphBuilder, i64
from graphgen.model.placement import Weight, WeightValues
from graphgen.model.spec import ModelSpec
from graphgen.model.transformer import NEG_INF, Transformer
from graphgen.model.weights import INT4_BLOCK, QuantizedWeights, quantized_weights
from graphgen.passes.fp16 import float16_spec
from graphgen.search.io import (
    CHECKED_INPUT_IDS,
    RAW_SEQUENCES,
    SearchCore,
    id_level_io,
    source_length_check,
    trim_sequences,
)
from graphgen.search.processors import processor_masks

# HF's stand-in for "no score" (running beams 1.. at the start, empty finished slots, ended beams).
NO_SCORE = np.float32(-1e9)
DOUBLE = TensorProto.DOUBLE
# int32 [1] or [batch]: each item's forced first token (HF's forced_bos_token_id, a target
# language), -1 for none.
NO_FORCED_BOS = -1


def processor_rows(spec: ModelSpec) -> np.ndarray:
    """The loop's ``[states, vocab]`` table of :func:`~graphgen.search.processors.processor_masks`
    (every state built: the loop applies the bans itself)."""
    return np.stack(processor_masks(spec))


@dataclass(frozen=True)
class _Beams:
    """The search state between steps (names of tensors); ``T`` is the current length."""

    tokens: str  # [B*K, 1] int64: each running beam's last token, the next decoder input
    running: str  # [B, K, T] int64 (ONNX Runtime's CUDA GatherND has no int32 kernel)
    running_scores: str  # [B, K] float: summed log-probabilities
    finished: str  # [B, K, T] int64, pad after the end
    finished_scores: str  # [B, K] float: length-normalised
    finished_flags: str  # [B, K] bool
    improvable: str  # [B, 1] bool: HF's is_early_stop_heuristic_unsatisfied

    def names(self) -> list[str]:
        return [
            self.tokens,
            self.running,
            self.running_scores,
            self.finished,
            self.finished_scores,
            self.finished_flags,
            self.improvable,
        ]


ROWS = "rows"  # the symbolic dimension of the decoder's rows (batch × beams)
STATE_TYPES: list[tuple[int, list[str | int]]] = [
    (INT64, [ROWS, 1]),
    (INT64, ["batch", "beams", "length"]),
    (FLOAT, ["batch", "beams"]),
    (INT64, ["batch", "beams", "length"]),
    (FLOAT, ["batch", "beams"]),
    (BOOL, ["batch", "beams"]),
    (BOOL, ["batch", 1]),
]


class _Search:
    """Builds the search; the values every step reads are computed once in the outer graph."""

    def __init__(self, spec: ModelSpec, input_ids: str) -> None:
        self.spec = spec
        self.outer = GraphBuilder("search")
        b = self.outer
        self.batch = b.op("Shape", [input_ids], start=0, end=1)  # [1]
        # The settings are read as counts, shapes and conditions, which ONNX Runtime's CUDA kernels
        # take on the host. Its CUDA provider keeps a node on the host only if an input is a value it
        # holds there already (a Shape's output) and the others are too, or are small constants or
        # graph inputs (graphgen.testing.cuda_copies): a zero made from the batch's Shape, added to
        # each setting, keeps them and what follows from them there, so no step waits for a copy back
        # from the GPU to read them. On the CPU it costs a few scalar nodes per call.
        host_zero = b.op("Cast", [b.op("Sub", [self.batch, self.batch])], to=INT32)
        returned = b.op("Add", [NUM_RETURN_SEQUENCES, host_zero])
        requested = b.op("Add", [NUM_BEAMS, host_zero])
        # A raw session can pass anything: settings the search cannot honour stop the run by name
        # (num_beams first: 0 beams would otherwise be reported as a wrong num_return_sequences).
        too_few = b.op("Less", [requested, b.const(np.array([1], dtype=np.int32))])
        checked = fail_when(b, too_few, "graphgen: num_beams must be at least 1", requested, host=True)
        bad = b.op(
            "Or",
            [
                b.op("Less", [returned, b.const(np.array([1], dtype=np.int32))]),
                b.op("Greater", [returned, checked]),
            ],
        )
        message = "graphgen: num_return_sequences must be between 1 and num_beams"
        num_beams = fail_when(b, bad, message, checked, host=True)
        self.beams = b.op("Cast", [num_beams], to=INT64)  # [1]
        self.candidates = b.op("Mul", [self.beams, b.const(i64(2))])
        self.vocab = b.const(np.int64(spec.target_vocab_size), "vocab")
        batch_range = b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [self.batch]), b.const(np.int64(1))])
        # Row r of the expanded batch belongs to item r // K; the first row of item i is i * K.
        grid = b.op("Concat", [self.batch, self.beams], axis=0)
        self.repeat = b.reshape(b.op("Expand", [b.op("Unsqueeze", [batch_range, b.const(i64(1))]), grid]), [-1])
        self.offsets = b.op("Unsqueeze", [b.op("Mul", [batch_range, b.op("Squeeze", [self.beams])]), b.const(i64(1))])
        self.grid = grid
        self.column_shape = b.op("Concat", [grid, b.const(i64(1))], axis=0)  # [B, K, 1]
        # the pad column each step appends to the finished hypotheses
        pad = np.full((1, 1, 1), spec.pad_token_id, dtype=np.int64)
        self.pad_column = b.op("Expand", [b.const(pad), self.column_shape])
        self.rows = b.op("Mul", [self.batch, self.beams])  # [1]: batch × beams
        self.identity_rows = b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [self.rows]), b.const(np.int64(1))])
        # What every step reshapes and compares to, made once here (a loop body recomputes its nodes
        # on every step, however constant their inputs).
        self.flat_scores_shape = b.op("Concat", [self.batch, b.op("Mul", [self.beams, self.vocab])], axis=0)
        # compared with the length on the GPU, as data: not moved to the host
        self.min_length_scalar = b.op("Squeeze", [b.op("Cast", [MIN_LENGTH], to=INT64)])
        self.last_length_scalar = b.op(
            "Squeeze", [b.op("Sub", [b.op("Cast", [MAX_LENGTH], to=INT64), b.const(i64(1))])]
        )
        self.max_length = b.op("Cast", [b.op("Add", [MAX_LENGTH, host_zero])], to=INT64)  # [1], the loop's count
        self.is_greedy = b.op("Squeeze", [b.op("Equal", [num_beams, b.const(np.array([1], dtype=np.int32))])])
        penalty = b.op("Add", [REPETITION_PENALTY, b.op("Cast", [host_zero], to=FLOAT)])
        self.penalised = b.op(
            "Squeeze", [b.op("Not", [b.op("Equal", [penalty, b.const(np.array([1.0], dtype=np.float32))])])]
        )
        self.top_beams = b.op(
            "Less",
            [
                b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [self.candidates]), b.const(np.int64(1))]),
                b.op("Squeeze", [self.beams]),
            ],
        )
        rows = processor_rows(spec)
        self.rows_table = b.derived("search_processor_rows", rows)
        # the forced EOS row replaces whole rows only without renormalisation (see log_probs)
        forced_row_needed = spec.forced_eos and not spec.renormalize_logits
        self.forced_row = b.const(rows[-1:], "forced_row") if forced_row_needed else ""
        # A tensor of max(max_length, 0) elements: its Shape gives a step max_length on the host
        # (see forced_step), where the forced-EOS step's condition is read.
        self.length_marker = (
            b.op("ConstantOfShape", [b.op("Max", [self.max_length, b.const(i64(0))])]) if forced_row_needed else ""
        )
        self.lp_exponent = b.op("Cast", [LENGTH_PENALTY], to=DOUBLE)

    # -- the logits processors ------------------------------------------------------------------

    def forced_step(self, b: GraphBuilder, step: str) -> str:
        """Whether this is the forced-EOS step (the new length reaches ``max_length``) as a bool [1]
        on the host for ONNX Runtime's CUDA provider: from ``step`` (the caches' Shape, [1]) and the
        Shape of ``length_marker``, both values it returns on the host, in the loop body itself."""
        limit = b.op("Shape", [self.length_marker])
        return b.op("Equal", [b.op("Add", [step, b.const(i64(2))]), limit])

    def log_probs(self, b: GraphBuilder, logits: str, length: str, running: str, forced_step: str = "") -> str:
        """HF's processed log-probabilities ``[R, V]`` of the next token, given ``[R, V]`` logits.

        ``length`` (int64 scalar) is the current length, decoder start included; ``running`` the
        beams' tokens so far ``[B, K, T]`` (for the repetition penalty and the n-gram ban, which
        flatten them where they run: most steps of most files run neither); ``forced_step`` the
        condition of :meth:`forced_step`, for files that force EOS without renormalising.
        """
        spec = self.spec
        renormalise = spec.renormalize_logits
        # the processor row: 0 none, 1 EOS banned (min_length), 2 EOS forced (max_length - 1)
        banned = b.op("Less", [length, self.min_length_scalar])
        row = b.op("Where", [banned, b.const(np.int32(1)), b.const(np.int32(0))])
        forced = None
        if spec.forced_eos:  # after min_length, as HF orders them: it wins when both apply
            forced = b.op("Equal", [length, self.last_length_scalar])
            row = b.op("Where", [forced, b.const(np.int32(2)), row])
        mask = b.op("Gather", [self.rows_table, row])
        if spec.generation.no_repeat_ngram_size:
            sequences = b.op("Flatten", [running], axis=2)
            mask = b.add(mask, repeated_ngram_mask(b, sequences, spec.generation.no_repeat_ngram_size, spec))

        def finish(g: GraphBuilder, scores: str) -> None:
            """Bans, then HF's closing log-softmax when it renormalises; the branch's last node."""
            if renormalise:
                g.op("LogSoftmax", [g.op("Add", [scores, mask])], outputs=[g.fresh("log_probs")], axis=-1)
            else:
                g.op("Add", [scores, mask], outputs=[g.fresh("log_probs")])

        def processed(g: GraphBuilder) -> str:
            """The penalty (or none) and the bans, as ``g``'s last node."""
            plain = GraphBuilder(g.fresh("no_penalty"))
            finish(plain, logits if renormalise else plain.op("LogSoftmax", [logits], axis=-1))
            penalty = GraphBuilder(g.fresh("penalty"))
            # Greedy search penalises the logits, beam search the log-probabilities (HF's two paths).
            base = penalty.op("Where", [self.is_greedy, logits, penalty.op("LogSoftmax", [logits], axis=-1)])
            ids = penalty.op("Flatten", [running], axis=2)
            seen = penalty.op("GatherElements", [base, ids], axis=1)
            penalised = penalty.op(
                "Where",
                [
                    penalty.op("Less", [seen, penalty.const(np.float32(0.0))]),
                    penalty.mul(seen, REPETITION_PENALTY),
                    penalty.op("Div", [seen, REPETITION_PENALTY]),
                ],
            )
            scattered = penalty.op("ScatterElements", [base, ids, penalised], axis=1)
            if not renormalise:  # greedy only needs the order; a log-softmax keeps the scores comparable
                scattered = penalty.op(
                    "Where", [self.is_greedy, penalty.op("LogSoftmax", [scattered], axis=-1), scattered]
                )
            finish(penalty, scattered)
            return g.op("If", [self.penalised], then_branch=_branch(penalty, FLOAT), else_branch=_branch(plain, FLOAT))

        if forced is None or renormalise:
            return processed(b)
        # HF's forced EOS sets EOS to exactly 0 and the rest to -inf; added to unnormalised
        # log-probabilities the row would leave EOS at its own score instead. The other steps
        # compute theirs inside the ``If`` (a pass-through branch would copy [R, V] every step).
        then = GraphBuilder(b.fresh("forced"))
        then.op("Expand", [self.forced_row, then.op("Shape", [logits])], outputs=[then.fresh("log_probs")])
        keep = GraphBuilder(b.fresh("not_forced"))
        processed(keep)
        return b.op("If", [forced_step], then_branch=_branch(then, FLOAT), else_branch=_branch(keep, FLOAT))

    def first_tokens(self, forced_bos: str) -> str:
        """Each row's forced first token ``[B*K, 1]`` int32 (``NO_FORCED_BOS`` for none), checked:
        one id, or one per input row, inside the vocabulary. A forced EOS at the first step
        (``max_length`` 2) comes after HF's ``ForcedBOSTokenLogitsProcessor`` and wins: no row is
        forced then."""
        b, spec = self.outer, self.spec
        forced_bos = self.checked_row_ids(
            forced_bos, FORCED_BOS_TOKEN_ID, NO_FORCED_BOS, f" (use {NO_FORCED_BOS} for none)"
        )
        per_item = b.op("Expand", [forced_bos, self.batch])
        if spec.forced_eos:
            eos_now = b.op("Equal", [MAX_LENGTH, b.const(np.array([2], dtype=np.int32))])
            per_item = b.op("Where", [eos_now, b.const(np.int32(NO_FORCED_BOS)), per_item])
        return b.op("Unsqueeze", [b.op("Gather", [per_item, self.repeat]), b.const(i64(1))])

    def checked_row_ids(self, ids: str, name: str, lowest: int, hint: str = "") -> str:
        """``ids`` (int32, the input ``name``) unchanged, or the run stopped with a message naming
        it: one id, or one per input row, each from ``lowest`` to below the vocabulary's size."""
        b = self.outer
        count = b.op("Shape", [ids])
        wrong_count = b.op(
            "And",
            [b.op("Not", [b.op("Equal", [count, b.const(i64(1))])]), b.op("Not", [b.op("Equal", [count, self.batch])])],
        )
        ids = fail_when(b, wrong_count, f"graphgen: {name} must hold one id, or one per input row", ids)
        outside = b.op(
            "Or",
            [
                b.op("Less", [ids, b.const(np.int32(lowest))]),
                b.op("GreaterOrEqual", [ids, b.const(np.int32(self.spec.target_vocab_size))]),
            ],
        )
        outside = b.op("Cast", [b.op("ReduceMax", [b.op("Cast", [outside], to=INT32)], keepdims=1)], to=BOOL)
        return fail_when(b, outside, f"graphgen: {name} outside the vocabulary{hint}", ids)

    def force_first_token(
        self, b: GraphBuilder, log_probs: Callable[[GraphBuilder], str], first_tokens: str, step: str
    ) -> str:
        """HF's ``ForcedBOSTokenLogitsProcessor`` on ``[B*K, V]`` log-probabilities at the first step
        (``step``, ``[1]``, 0): a row's forced token gets exactly 0 and every other token -inf (any
        renormalisation leaves that row as it is). ``log_probs`` builds the step's log-probabilities
        into a builder, as its last node: once in each branch of an ``If``, so that the ``[B*K, V]``
        comparison is made at the first step only, and later steps write theirs straight into the
        ``If``'s output (a pass-through branch would copy them every step)."""
        vocabulary = self.outer.const(np.arange(self.spec.target_vocab_size, dtype=np.int32)[None, :], "vocabulary_ids")
        force = GraphBuilder(b.fresh("forced_first"))
        row = force.op(
            "Where",
            [force.op("Equal", [vocabulary, first_tokens]), force.const(np.float32(0.0)), force.const(NEG_INF)],
        )
        active = force.op("Not", [force.op("Equal", [first_tokens, force.const(np.int32(NO_FORCED_BOS))])])
        force.op("Where", [active, row, log_probs(force)], outputs=[force.fresh("log_probs")])
        later = GraphBuilder(b.fresh("later_step"))
        log_probs(later)
        first = b.op("Equal", [step, b.const(i64(0))])
        return b.op("If", [first], then_branch=_branch(force, FLOAT), else_branch=_branch(later, FLOAT))

    # -- one step of HF's bookkeeping -----------------------------------------------------------

    def step(self, b: GraphBuilder, log_probs: str, beams: _Beams, length: str) -> tuple[_Beams, str, str]:
        """Choose the next tokens from ``[B*K, V]`` log-probabilities; returns the new state, the
        rows to reorder the caches by ``[B*K]``, and whether to go on (bool scalar).

        One ``If`` on ``num_beams == 1``: greedy search needs a third of beam search's bookkeeping
        nodes (an argmax and HF's unfinished flags), and each node is a kernel launch per step on a
        GPU, where at batch 1 their count sets the time."""
        at_max = b.op("GreaterOrEqual", [length, self.last_length_scalar])  # the new length reaches max_length
        # HF's length normalisation, ``generated ** length_penalty`` in double as Python computes it
        divisor = b.op("Cast", [b.op("Pow", [b.op("Cast", [length], to=DOUBLE), self.lp_exponent])], to=FLOAT)
        beam = GraphBuilder(b.fresh("beam_step"))
        beam_outputs = self._beam_step(beam, log_probs, beams, at_max, divisor)
        greedy = GraphBuilder(b.fresh("greedy_step"))
        greedy_outputs = self._greedy_step(greedy, log_probs, beams, at_max, divisor)
        types = [elem for elem, _ in STATE_TYPES] + [INT64, BOOL]
        outputs = b.op_multi(
            "If",
            [self.is_greedy],
            len(types),
            then_branch=_outputs_branch(greedy, greedy_outputs, types),
            else_branch=_outputs_branch(beam, beam_outputs, types),
        )
        *state, reorder, go_on = outputs
        return _Beams(*state), reorder, go_on

    def _greedy_step(self, b: GraphBuilder, log_probs: str, beams: _Beams, at_max: str, divisor: str) -> list[str]:
        """HF's greedy search on one beam per item (``R = B``): the argmax of the processed
        log-probabilities, pad once an item has ended (``improvable`` holds HF's unfinished flags).

        The sequences grow in ``running`` (what the repetition penalty reads; ``loop_search``
        returns ``running`` for greedy search); ``finished`` and ``finished_flags``, which only beam
        search reads, get values the step makes anyway (an outer value would need an ``Identity``,
        a node per step); ``finished_scores`` gets the score the one-beam search gives: the summed
        log-probabilities over the generated length to the ``length_penalty``, when the item ends.
        A tie goes to the lowest id, as HF's ``argmax``; over the step's values, as HF's, where the
        one-beam search compared them plus the running score, whose rounding can make a tie."""
        spec = self.spec
        unfinished = beams.improvable  # [B, 1]
        token = b.op("ArgMax", [log_probs], axis=1, keepdims=1)  # [R, 1] int64
        scores = b.add(beams.running_scores, b.op("GatherElements", [log_probs, token], axis=1))
        eos = b.op("Equal", [token, b.const(np.int64(spec.eos_token_id))])
        ended = b.op("And", [unfinished, b.op("Or", [eos, at_max])])  # ends at this step
        token = b.op("Where", [unfinished, token, b.const(np.int64(spec.pad_token_id))])
        column = b.op("Unsqueeze", [token, b.const(i64(-1))])  # [B, 1, 1]
        running = b.op("Concat", [beams.running, column], axis=2)
        finished_scores = b.op("Where", [ended, b.op("Div", [scores, divisor]), beams.finished_scores])
        still = b.op("Xor", [unfinished, ended])  # unfinished and not ended now
        state = _Beams(token, running, scores, column, finished_scores, ended, still)
        return [*state.names(), self.identity_rows, _any(b, still)]

    def _beam_step(self, b: GraphBuilder, log_probs: str, beams: _Beams, at_max: str, divisor: str) -> list[str]:
        """HF's beam search step (see the module docstring); the outputs of :meth:`step`. ``at_max``:
        the new length reaches max_length; ``divisor``: the length normalisation at that length."""
        spec = self.spec
        scores = b.add(log_probs, b.reshape(beams.running_scores, [-1, 1]))  # [B*K, V]
        # The shape spelled out: a -1 next to a zero-sized batch cannot be inferred.
        flat = b.op("Reshape", [scores, self.flat_scores_shape])
        top_scores, top_index = b.op_multi("TopK", [flat, self.candidates], 2, axis=-1, largest=1, sorted=1)
        source_beam = b.op("Div", [top_index, self.vocab])
        token = b.op("Mod", [top_index, self.vocab])
        candidates = b.op(
            "Concat",
            [
                b.op("GatherND", [beams.running, b.op("Unsqueeze", [source_beam, b.const(i64(-1))])], batch_dims=1),
                b.op("Unsqueeze", [token, b.const(i64(-1))]),
            ],
            axis=2,
        )
        # Stopping criteria of the candidates: EOS, or the new length reaches max_length.
        ended = b.op("Or", [b.op("Equal", [token, b.const(np.int64(spec.eos_token_id))]), at_max])
        ended_penalty = _no_score_where(b, ended)

        # Running beams: the best K candidates that did not end.
        running_candidates = b.add(top_scores, ended_penalty)
        running_scores, keep = b.op_multi("TopK", [running_candidates, self.beams], 2, axis=-1, largest=1, sorted=1)
        running = b.op("GatherND", [candidates, b.op("Unsqueeze", [keep, b.const(i64(-1))])], batch_dims=1)
        kept_beam = b.op("GatherElements", [source_beam, keep], axis=1)
        reorder = b.reshape(b.add(kept_beam, self.offsets), [-1])
        tokens = b.reshape(b.op("GatherElements", [token, keep], axis=1), [-1, 1])

        # Finished hypotheses: ended candidates among the top K, normalised by the generated length.
        normalised = b.op("Div", [top_scores, divisor])
        if spec.generation.early_stopping:  # HF's ``is_sent_finished.all() & early_stopping`` times -1e9
            full = b.op("ReduceMin", [b.op("Cast", [beams.finished_flags], to=FLOAT), b.const(i64(1))], keepdims=1)
            normalised = b.add(normalised, b.mul(full, b.const(NO_SCORE)))
        # (without early stopping that term is -0.0, which leaves every sum's bits as they are)
        normalised = b.add(normalised, _no_score_where(b, beams.improvable, negate=True))
        just_finished = b.op("And", [ended, self.top_beams])
        normalised = b.add(normalised, _no_score_where(b, just_finished, negate=True))
        padded = b.op("Concat", [beams.finished, self.pad_column], axis=2)  # CUDA's Pad has no integer kernel
        merged_scores = b.op("Concat", [beams.finished_scores, normalised], axis=1)
        finished_scores, best = b.op_multi("TopK", [merged_scores, self.beams], 2, axis=-1, largest=1, sorted=1)
        merged = b.op("Concat", [padded, candidates], axis=1)
        finished = b.op("GatherND", [merged, b.op("Unsqueeze", [best, b.const(i64(-1))])], batch_dims=1)
        merged_flags = b.op("Concat", [beams.finished_flags, just_finished], axis=1)
        finished_flags = b.op("GatherElements", [merged_flags, best], axis=1)

        # HF's early-stop heuristic, at the new length (best hypothetical length = generated tokens).
        best_running = b.op(
            "Div", [b.op("Slice", [running_scores, b.const(i64(0)), b.const(i64(1)), b.const(i64(1))]), divisor]
        )
        worst_finished = b.op(
            "Where",
            [
                finished_flags,
                b.op("ReduceMin", [finished_scores, b.const(i64(1))], keepdims=1),
                b.const(NO_SCORE),
            ],
        )
        # any(best > worst_k) over the beams, as the one comparison with the lowest worst_k
        lowest_worst = b.op("ReduceMin", [worst_finished, b.const(i64(1))], keepdims=1)
        improvable = b.op("And", [beams.improvable, b.op("Greater", [best_running, lowest_worst])])

        # HF's loop condition, over the whole batch: an item that cannot improve is frozen above.
        # (not all finished, or no early stopping) and not every candidate ended
        go_on = _any(b, improvable)
        if spec.generation.early_stopping:
            go_on = b.op("And", [go_on, _any(b, b.op("Not", [finished_flags]))])
        go_on = b.op("And", [go_on, _any(b, b.op("Not", [ended]))])
        state = _Beams(tokens, running, running_scores, finished, finished_scores, finished_flags, improvable)
        return [*state.names(), reorder, go_on]


def repeated_ngram_mask(b: GraphBuilder, sequences: str, size: int, spec: ModelSpec) -> str:
    """HF's ``no_repeat_ngram_size``: ``[R, V]``, -inf for each token that would repeat an n-gram of its row.

    The n-grams of a row of length T start at 0 .. T - n; one whose first n - 1 tokens equal the
    row's last n - 1 bans the token it ends with. Non-matching n-grams scatter into a spare
    column past the vocabulary, so every scattered value is the same -inf (no reduction needed).
    """
    vocab = spec.target_vocab_size
    width = b.op("Shape", [sequences], start=1, end=2)  # T
    count = b.op("Max", [b.op("Sub", [width, b.const(i64(size - 1))]), b.const(i64(0))])  # T - n + 1, or 0

    def columns(first: str, length: str) -> str:
        return b.op("Slice", [sequences, first, b.op("Add", [first, length]), b.const(i64(1))])

    matches = b.op("Equal", [columns(b.const(i64(0)), count), columns(b.const(i64(0)), count)])  # all true
    for offset in range(size - 1):
        window = columns(b.const(i64(offset)), count)
        tail = columns(
            b.op("Add", [b.op("Sub", [width, b.const(i64(size - 1))]), b.const(i64(offset))]), b.const(i64(1))
        )
        matches = b.op("And", [matches, b.op("Equal", [window, tail])])
    banned = b.op(
        "Where",
        [matches, columns(b.const(i64(size - 1)), count), b.const(np.int64(vocab))],
    )
    rows = b.op("Shape", [sequences], start=0, end=1)
    zeros = b.op(
        "ConstantOfShape",
        [b.op("Concat", [rows, b.const(i64(vocab + 1))], axis=0)],
        value=helper.make_tensor("zero", FLOAT, [1], [0.0]),
    )
    ninf = b.op("Expand", [b.const(NEG_INF), b.op("Shape", [banned])])
    scattered = b.op("ScatterElements", [zeros, banned, ninf], axis=1)
    return b.op("Slice", [scattered, b.const(i64(0)), b.const(i64(vocab)), b.const(i64(1))])


def _branch(builder: GraphBuilder, elem_type: int) -> GraphProto:
    """An ``If`` branch whose one output is the last node's output."""
    return _outputs_branch(builder, [builder.nodes[-1].output[0]], [elem_type])


def _outputs_branch(builder: GraphBuilder, outputs: list[str], types: list[int]) -> GraphProto:
    """An ``If`` branch with the given outputs; one from the graphs around the ``If`` goes through
    an ``Identity`` (ONNX Runtime refuses an outer value as a subgraph output)."""
    made = {name for node in builder.nodes for name in node.output}
    outputs = [name if name in made else builder.op("Identity", [name]) for name in outputs]
    return helper.make_graph(
        builder.nodes,
        builder.name,
        [],
        [helper.make_tensor_value_info(name, elem, None) for name, elem in zip(outputs, types, strict=True)],
        initializer=builder.constants,
    )


def _no_score_where(b: GraphBuilder, flags: str, *, negate: bool = False) -> str:
    """HF's ``flags * -1e9`` (``~flags * -1e9`` with ``negate``) as one node: ``NO_SCORE`` where
    set, and where not the ``-0.0`` that multiplying a false flag gives, so every sum keeps its bits."""
    minus_zero = b.const(np.float32(-0.0), "minus_zero")
    no_score = b.const(NO_SCORE)
    return b.op("Where", [flags, minus_zero, no_score] if negate else [flags, no_score, minus_zero])


def _any(b: GraphBuilder, flags: str) -> str:
    """Any true in the tensor, as a bool scalar (false when empty)."""
    count = b.op("ReduceSum", [b.op("Cast", [flags], to=INT64)], keepdims=0)
    return b.op("Greater", [count, b.const(np.int64(0))])


def _initial_beams(search: _Search, decoder_start: str) -> _Beams:
    """The state before the first step: every beam is its row's decoder start (int32 ``[1]`` or
    ``[B]``, ``decoder_start``); only beam 0 counts."""
    b = search.outer
    decoder_start = search.checked_row_ids(decoder_start, DECODER_START_TOKEN_ID, 0)
    per_row = b.reshape(b.op("Cast", [decoder_start], to=INT64), [-1, 1, 1])
    start = b.op("Expand", [per_row, search.column_shape])
    first_only = b.op(
        "Where",
        [
            b.op(
                "Equal",
                [
                    b.op("Range", [b.const(np.int64(0)), b.op("Squeeze", [search.beams]), b.const(np.int64(1))]),
                    b.const(np.int64(0)),
                ],
            ),
            b.const(np.float32(0.0)),
            b.const(NO_SCORE),
        ],
    )
    return _Beams(
        tokens=b.reshape(start, [-1, 1]),
        running=start,
        running_scores=b.op("Expand", [first_only, search.grid]),
        finished=start,
        finished_scores=b.op("Expand", [b.const(NO_SCORE), search.grid]),
        finished_flags=b.op("Expand", [b.const(np.bool_(False)), search.grid]),
        improvable=b.op("Expand", [b.const(np.bool_(True)), b.op("Concat", [search.batch, b.const(i64(1))], axis=0)]),
    )


@dataclass
class LoopSearch:
    """The search's nodes and constants for the outer graph, and the builders whose weights it reads."""

    nodes: list[NodeProto]
    constants: list[TensorProto]
    builders: list[GraphBuilder]


def loop_search(
    spec: ModelSpec,
    quantized: QuantizedWeights | None,
    input_ids: str,
    mask: str,
    sequences: str,
    scores: str,
    forced_bos: str = FORCED_BOS_TOKEN_ID,
    decoder_start: str = DECODER_START_TOKEN_ID,
    *,
    float16: bool = False,
) -> LoopSearch:
    """Nodes from ``input_ids``/``mask`` (int32 ``[B, S]``) to ``sequences`` ``[B, R, T]`` (as the
    BeamSearch op returns them: decoder start first, no final EOS, pad after) and ``scores``.

    Reads the graph inputs ``num_beams``, ``num_return_sequences``, ``max_length``,
    ``min_length``, ``length_penalty`` and ``repetition_penalty``, and ``forced_bos`` (see
    ``FORCED_BOS_TOKEN_ID``), and the value ``decoder_start`` (see ``DECODER_START_TOKEN_ID``).
    ``float16`` builds the layers (and so the KV caches) in float16 from a float16 spec
    (``passes.fp16.float16_spec``); the logits reach the search as float32, as in HF.
    """
    search = _Search(spec, input_ids)
    b = search.outer
    t = Transformer(b, spec, quantized, float16=float16)
    cache_type = FLOAT16 if float16 else FLOAT
    heads = spec.decoder_heads

    # The encoder and the source side of every step (cross-attention caches), once per item.
    states = t.encoder(input_ids, mask)
    cross = t.cross_caches(states)
    first_tokens = search.first_tokens(forced_bos)
    # Held once per item, not per beam: each item's beams are the query positions of one attention
    # over its source (``decoder_step``'s ``query_groups``), with the padding bias [B, H, K, S].
    item_bias = t.padding_bias(mask, heads)  # [B, H, 1, S]
    bias_shape = b.op(
        "Concat", [search.batch, b.const(i64(heads)), search.beams, b.op("Shape", [mask], start=1)], axis=0
    )
    cross_bias = b.op("Expand", [item_bias, bias_shape])
    width = heads * spec.head_dim(heads)  # the attention's width (T5's may differ from d_model)
    query_groups = (b.op("Concat", [search.grid, b.const(i64(width))], axis=0), ROWS)
    beams = _initial_beams(search, decoder_start)
    # Every decoder step, the first included, runs in the loop body: each decoder weight is read by
    # one node, so ONNX Runtime prepacks it once (a first step outside the loop doubled the decoder's
    # share of the session's memory). The first step starts from empty self-attention caches.
    empty_shape = b.op("Concat", [b.op("Shape", [beams.tokens], start=0, end=1), b.const(i64(heads, 0))], axis=0)
    empty_shape = b.op("Concat", [empty_shape, b.const(i64(spec.head_dim(heads)))], axis=0)
    empty = b.op("ConstantOfShape", [empty_shape], value=helper.make_tensor("zero", cache_type, [1], [0]))
    caches = [empty] * (2 * spec.decoder_layers)

    # The loop: one decoder step for all rows, then the bookkeeping.
    body = GraphBuilder("search_step")
    u = Transformer(body, spec, quantized, float16=float16)
    iteration = body.input("iteration", INT64, [])
    body.input("condition", BOOL, [])
    state_in = [
        f"search_step/in_{name}"
        for name in (
            "tokens",
            "running",
            "running_scores",
            "finished",
            "finished_scores",
            "finished_flags",
            "improvable",
        )
    ]
    for name, (elem, shape) in zip(state_in, STATE_TYPES, strict=True):
        body.input(name, elem, shape)
    cache_shape: list[str | int] = [ROWS, heads, "past", spec.head_dim(heads)]
    past = []
    for index in range(spec.decoder_layers):
        key = body.input(f"search_step/past_key_{index}", cache_type, cache_shape)
        value = body.input(f"search_step/past_value_{index}", cache_type, cache_shape)
        past.append((key, value))
    beams_in = _Beams(*state_in)
    length = body.op("Add", [iteration, body.const(np.int64(1))])  # scalar, compared on the GPU
    # the step's number [1] as the caches' Shape, which ONNX Runtime's CUDA provider returns on the
    # host, where the first step's condition is read
    past_length = body.op("Shape", [past[0][0]], start=2, end=3)
    step_logits, step_presents = u.decoder_step(
        beams_in.tokens,
        past_length,
        past,
        cross,
        mask,
        cross_bias=cross_bias,
        query_groups=query_groups,
        flat_logits=True,
        ids_type=INT64,
    )
    forced_step = search.forced_step(body, past_length) if search.length_marker else ""
    step_log_probs = search.force_first_token(
        body,
        lambda g: search.log_probs(g, step_logits, length, beams_in.running, forced_step),
        first_tokens,
        past_length,
    )
    beams_out, step_reorder, step_go_on = search.step(body, step_log_probs, beams_in, length)
    # The body's outputs are the producing nodes' own values: an Identity would copy each per step.
    body.outputs.append(helper.make_tensor_value_info(step_go_on, BOOL, []))
    for value, (elem, shape) in zip(beams_out.names(), STATE_TYPES, strict=True):
        body.outputs.append(helper.make_tensor_value_info(value, elem, shape))
    # The caches the next step reads: this step's, reordered to the kept beams; none after the
    # last step (``step_go_on`` is false there: at max_length every candidate has ended). ONNX
    # Runtime's Loop copies its loop-carried values into its outputs when it ends, while the last
    # step's inputs are still held: full caches there would be a third copy.
    kept_rows = body.op("Where", [step_go_on, body.const(i64(np.iinfo(np.int64).max)), body.const(i64(0))])
    next_rows = body.op("Slice", [step_reorder, body.const(i64(0)), kept_rows])
    for key, value in step_presents:
        for cache in (key, value):
            name = b.fresh("out_cache")
            body.op("Gather", [cache, next_rows], outputs=[name])
            body.outputs.append(helper.make_tensor_value_info(name, cache_type, cache_shape))
    # At least the first step, as HF's generate (which always takes one).
    steps = b.op("Max", [b.op("Sub", [search.max_length, b.const(i64(1))]), b.const(i64(1))])
    final = [b.fresh("final") for _ in range(len(STATE_TYPES) + len(caches))]
    b.op(
        "Loop",
        [b.op("Squeeze", [steps]), b.const(np.bool_(True)), *beams.names(), *caches],
        outputs=final,
        body=body.graph(),
    )
    # greedy search's sequences are its running beams (see _Search._greedy_step)
    finished = b.op("Where", [search.is_greedy, final[1], final[3]])
    finished_scores = final[4]
    returned = b.op("Cast", [NUM_RETURN_SEQUENCES], to=INT64)
    best = b.op("Slice", [finished, b.const(i64(0)), returned, b.const(i64(1))])
    # The BeamSearch op's form: no final EOS (the start token stays, whatever its id).
    head = b.op("Slice", [best, b.const(i64(0)), b.const(i64(1)), b.const(i64(2))])
    tail = b.op("Slice", [best, b.const(i64(1)), b.const(i64(np.iinfo(np.int64).max)), b.const(i64(2))])
    tail = b.op(
        "Where",
        [b.op("Equal", [tail, b.const(np.int64(spec.eos_token_id))]), b.const(np.int64(spec.pad_token_id)), tail],
    )
    b.op("Cast", [b.op("Concat", [head, tail], axis=2)], outputs=[sequences], to=INT32)
    b.op("Slice", [finished_scores, b.const(i64(0)), returned, b.const(i64(1))], outputs=[scores])
    return LoopSearch(nodes=b.nodes, constants=b.constants, builders=[b, body])


def forced_bos_default(spec: ModelSpec) -> np.ndarray:
    forced = spec.generation.forced_bos_token_id
    return np.array([NO_FORCED_BOS if forced is None else forced], dtype=np.int32)


def decoder_start_default(spec: ModelSpec) -> np.ndarray:
    return np.array([spec.decoder_start_token_id], dtype=np.int32)


def build_core(
    spec: ModelSpec,
    quantization: str,
    too_long_remedy: str,
    float16: bool = False,
    mapped: bool = False,
    int4_block: int = INT4_BLOCK,
) -> SearchCore:
    """The search in standard ops: every weight in the outer graph, which the loop body reads
    directly (one level down, where ORT still prepacks). ``float16``: the layers in float16
    (``passes.fp16.float16_spec``), the search in float32."""
    weights = quantized_weights(spec, quantization, mapped=mapped, int4_block=int4_block)
    layers = float16_spec(spec) if float16 else spec
    search = loop_search(
        layers, weights, CHECKED_INPUT_IDS, ATTENTION_MASK, RAW_SEQUENCES, SEQUENCE_SCORES, float16=float16
    )
    values = WeightValues(layers, search.builders)
    tensors = [Weight(name, values) for name in values]
    inputs, defaults, outputs = id_level_io(spec)
    inputs.append(helper.make_tensor_value_info(FORCED_BOS_TOKEN_ID, INT32, ["forced_bos_rows"]))
    defaults.append(numpy_helper.from_array(forced_bos_default(spec), FORCED_BOS_TOKEN_ID))
    # an input of id-level files; text files keep it as a constant, or compute it from
    # target_language where that starts the decoder (build_text_model)
    inputs.append(helper.make_tensor_value_info(DECODER_START_TOKEN_ID, INT32, ["decoder_start_rows"]))
    defaults.append(numpy_helper.from_array(decoder_start_default(spec), DECODER_START_TOKEN_ID))
    check = source_length_check(spec, too_long_remedy)
    trim = trim_sequences(spec)
    return SearchCore(
        nodes=[*check.nodes, *search.nodes, *trim.nodes],
        initializers=[*defaults, *check.constants, *search.constants, *trim.constants, *tensors],
        inputs=inputs,
        outputs=outputs,
    )

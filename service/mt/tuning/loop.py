"""The iterative tuning loop: Algorithm 1 of Chen et al. 2017 (§3.2).

Iteration ``i`` decodes the dev set with ``w^i`` into k-best lists, adds them to the training
set ``T`` and optimises ``w^{i+1} = Optimization(T, w^i)``. ``T`` is built either by
**instance aggregating** (Chen et al. 2017, §3.2, the default for the listwise losses: every
iteration's list of every sentence is its own training instance, ``T = {E_f^j | f, j ≤ i}``) or by
**k-best merging** (one list per sentence, the union of its lists of all iterations,
deduplicated by string; the default of MERT and PRO, which need one list per sentence).
As in the paper the merged list is not truncated.

Each decode also scores the weights that produced it: the corpus BLEU (sacrebleu on the
tokenised text) of the first entry of every list, the decoder's 1-best. After the last
optimisation the dev set is decoded once more to score the final weights, so ``iterations``
optimisations cost ``iterations + 1`` decodes. The weights with the best dev BLEU are
returned (Chen et al. 2017, §5.2), with the per-iteration history; with ``patience`` the loop stops
after that many decodes without a new best. Weights are not normalised (see
:mod:`.optimizers`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.mt.tuning.bleu import sacrebleu_corpus_bleu
from service.mt.tuning.lists import Hypothesis, KbestEntry, merge_lists, score_list
from service.mt.tuning.optimizers import Merge, Optimizer

DecodeKbest = Callable[[Mapping[str, float]], Sequence[Sequence[Hypothesis]]]


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """One decode of the dev set: the weights used, their dev BLEU (percent) and costs."""

    iteration: int
    weights: dict[str, float] = field(compare=False)
    bleu: float
    instances: int  # training lists the following optimisation saw (0 after the last decode)
    new_entries: int  # candidates not seen for their sentence before
    decode_seconds: float
    optimize_seconds: float


@dataclass(frozen=True, slots=True)
class TuneResult:
    """The best weights, their dev BLEU (percent), and the history of every decode."""

    weights: dict[str, float]
    bleu: float
    best_iteration: int
    history: tuple[IterationRecord, ...]
    signature: dict[str, object]


def tune(
    decode_kbest: DecodeKbest,
    dev_refs: Sequence[Sequence[str]],
    init_weights: Mapping[str, float],
    optimizer: Optimizer,
    *,
    k: int = 20,
    iterations: int = 40,
    merge: Merge | None = None,
    patience: int | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> TuneResult:
    """Run Algorithm 1 of Chen et al. 2017 and return the weights with the best dev BLEU.

    ``decode_kbest(weights)`` decodes the dev set and returns one k-best list per sentence (in
    decoder order, best first) of objects with ``tokens`` and ``features``
    (:class:`service.records.Translation`); ``dev_refs`` holds the tokenised reference of each
    sentence. Lists longer than ``k`` are cut to ``k``. ``merge`` is ``"aggregate"`` or
    ``"merge"`` (default: the optimiser's ``default_merge``).
    """
    mode = _check_tune_args(dev_refs, optimizer, k, iterations, merge, patience)
    rng = np.random.default_rng(seed)
    refs = [tuple(r) for r in dev_refs]
    pools = _Pools(len(refs))
    weights = dict(init_weights)
    history: list[IterationRecord] = []
    best: IterationRecord | None = None
    since_best = 0
    for i in range(iterations + 1):
        t0 = time.perf_counter()
        lists = _decode(decode_kbest, weights, refs, k)
        decode_seconds = time.perf_counter() - t0
        bleu = sacrebleu_corpus_bleu([lst[0].tokens for lst in lists], refs)
        new_entries = pools.add(lists)
        last = i == iterations
        improved = best is None or bleu > best.bleu
        since_best = 0 if improved else since_best + 1
        stop = last or (patience is not None and since_best >= patience)
        optimize_seconds = 0.0
        training: list[list[KbestEntry]] = []
        new_weights = weights
        if not stop:
            training = pools.training_set(mode)
            t1 = time.perf_counter()
            new_weights = optimizer.optimize(weights, training, rng)
            optimize_seconds = time.perf_counter() - t1
        record = IterationRecord(
            i,
            dict(weights),
            bleu,
            len(training),
            new_entries,
            decode_seconds,
            optimize_seconds,
        )
        history.append(record)
        if best is None or improved:
            best = record
        if log is not None:
            log(_iteration_line(record, best))
        if stop:
            break
        weights = new_weights
    assert best is not None  # the loop body runs at least once
    signature: dict[str, object] = {
        **optimizer.signature(),
        "k": k,
        "iterations": iterations,
        "merge": mode,
        "patience": patience,
        "seed": seed,
    }
    return TuneResult(dict(best.weights), best.bleu, best.iteration, tuple(history), signature)


def _check_tune_args(
    dev_refs: Sequence[Sequence[str]],
    optimizer: Optimizer,
    k: int,
    iterations: int,
    merge: Merge | None,
    patience: int | None,
) -> Merge:
    """Validate :func:`tune`'s arguments; the merge mode (``merge`` or the optimiser's)."""
    if not dev_refs:
        raise InvalidInputError("tuning needs at least one dev sentence; the dev set is empty")
    if k < 1 or iterations < 0:
        raise ConfigurationError(f"tune: need k >= 1 and iterations >= 0 (k={k}, {iterations=})")
    if patience is not None and patience < 1:
        raise ConfigurationError(f"tune: patience must be >= 1, got {patience}")
    mode: Merge = merge or optimizer.default_merge
    if mode not in ("aggregate", "merge"):
        raise ConfigurationError(f"tune: merge must be 'aggregate' or 'merge', got {mode!r}")
    return mode


class _Pools:
    """The k-best lists of every decode so far, per sentence, and the candidates seen."""

    def __init__(self, sentences: int) -> None:
        self.lists: list[list[list[KbestEntry]]] = [[] for _ in range(sentences)]
        self.seen: list[set[tuple[str, ...]]] = [set() for _ in range(sentences)]

    def add(self, lists: Sequence[list[KbestEntry]]) -> int:
        """Add one decode's lists (one per sentence); the number of candidates new to their
        sentence."""
        new_entries = 0
        for s, lst in enumerate(lists):
            self.lists[s].append(lst)
            new_entries += sum(e.tokens not in self.seen[s] for e in lst)
            self.seen[s].update(e.tokens for e in lst)
        return new_entries

    def training_set(self, mode: Merge) -> list[list[KbestEntry]]:
        """The optimiser's training lists: every list (``aggregate``) or one merged list per
        sentence (``merge``)."""
        return _training_set(self.lists, mode)


def _iteration_line(record: IterationRecord, best: IterationRecord) -> str:
    """The log line of one decode (and the optimisation after it)."""
    return (
        f"iteration {record.iteration}: dev BLEU {record.bleu:.2f} "
        f"(best {best.bleu:.2f} at {best.iteration}), "
        f"{record.new_entries} new candidates, decode {record.decode_seconds:.1f}s, "
        f"optimise {record.optimize_seconds:.1f}s"
    )


def _decode(
    decode_kbest: DecodeKbest,
    weights: Mapping[str, float],
    refs: Sequence[tuple[str, ...]],
    k: int,
) -> list[list[KbestEntry]]:
    raw = decode_kbest(dict(weights))
    if len(raw) != len(refs):
        raise InvalidInputError(
            f"the k-best decoder returned {len(raw)} lists for {len(refs)} dev sentences"
        )
    out: list[list[KbestEntry]] = []
    for s, (hyps, ref) in enumerate(zip(raw, refs, strict=True)):
        lst = score_list(list(hyps)[:k], ref)
        if not lst:
            raise InternalError(
                f"the k-best decoder returned an empty list for dev sentence {s}; every "
                "sentence needs at least one translation (check the grammar and pass-through)"
            )
        out.append(lst)
    return out


def _training_set(
    pools: Sequence[Sequence[list[KbestEntry]]], mode: Merge
) -> list[list[KbestEntry]]:
    if mode == "merge":
        return [merge_lists(per_iteration) for per_iteration in pools]
    return [lst for per_iteration in pools for lst in per_iteration]

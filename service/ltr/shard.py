"""One shard of the training queries, and iterative parameter mixing (Hieber & Riezler 2015, §4;
McDonald et al. 2010, "Distributed Training Strategies for the Structured Perceptron").

A :class:`Shard` builds its training examples once (it decodes its own queries: with several
worker processes, decoding — the most expensive step — runs in parallel too), keeps them and
its objective's state (Adadelta's running averages, the perceptron's average) for the whole
run, and trains one epoch at a time from the weights it is given: query by query in its fixed
cyclic order, the candidates' feature vectors computed once per query and epoch under the
current weights. Weights travel as ``{name: value}`` maps, so shards whose feature spaces
differ (each sees its own LEX features) can be mixed: :func:`mix` averages uniformly, a
feature a shard never saw counting with the value it was given.

The same class runs in-process (backend ``inline``), in a worker process (``local``) and in a
Ray actor (``ray``); see :mod:`service.ltr.backends`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.core.jit import Engine
from service.errors import ClirError, InvalidInputError, JobCancelled
from service.index.inverted import InvertedIndex
from service.ltr.examples import (
    Decoding,
    QueryExample,
    Selection,
    build_example,
    cyclic_order,
    shard_queries,
)
from service.ltr.objectives import Objective, make_objective
from service.ltr.space import FeatureSpace
from service.mt.bundle import ModelBundle

Progress = Callable[[int, int], None]  # (done, total)
Cancelled = Callable[[], bool]


@dataclass(frozen=True)
class ShardSpec:
    """Everything a shard needs, picklable: resources by path, queries in the shard's cyclic
    order with their qrels, the starting weights and the learning options."""

    shard: int
    model: str
    index: str
    queries: tuple[tuple[str, str], ...]
    qrels: dict[str, dict[str, int]]
    start: dict[str, float]
    objective: str = "hinge"
    objective_options: dict[str, Any] = field(default_factory=dict)
    candidates: int = 100
    pop_limit: int = 200
    lex: bool = False
    freeze_smt: bool = False
    ir_terms: bool = True
    engine: Engine = "compiled"  # the decoder's search
    state_root: str | None = None  # where the bundle keeps its weights state (load_bundle)


def shard_specs(
    selection: Selection,
    shards: int,
    *,
    model: str,
    index: str,
    start: Mapping[str, float],
    seed: int = 0,
    **options: Any,
) -> list[ShardSpec]:
    """The shards of iterative parameter mixing (McDonald et al. 2010): the training queries
    round robin by sorted id, each shard in its own fixed cyclic order (seed ``seed + i``);
    empty shards are left out. ``options``: the remaining :class:`ShardSpec` fields."""
    out = []
    for i, qids in enumerate(q for q in shard_queries(list(selection.queries), shards) if q):
        order = cyclic_order(qids, seed + i)
        out.append(
            ShardSpec(
                shard=i,
                model=model,
                index=index,
                queries=tuple((q, selection.queries[q]) for q in order),
                qrels={q: selection.qrels[q] for q in order},
                start=dict(start),
                **options,
            )
        )
    return out


@dataclass(frozen=True)
class ShardEpoch:
    """What a shard returns after an epoch: the weights to mix, the weights to evaluate
    (the perceptron's average; otherwise the same) and diagnostics."""

    weights: dict[str, float]
    output: dict[str, float]
    loss: float
    queries: int
    seconds: float
    feature_seconds: float


def _never() -> bool:
    return False


class Shard:
    """A shard's examples and objective state (see the module docstring)."""

    def __init__(
        self,
        spec: ShardSpec,
        bundle: ModelBundle | None = None,
        index: InvertedIndex | None = None,
    ) -> None:
        self.spec = spec
        self._bundle = bundle
        self._index = index
        self.space = FeatureSpace()
        self.examples: list[QueryExample] = []
        self.objective: Objective | None = None
        self.stats: dict[str, Any] = {}

    def _resources(self) -> tuple[ModelBundle, InvertedIndex]:
        if self._bundle is None:
            from service.mt.bundle import load_bundle

            self._bundle = load_bundle(self.spec.model, state_root=self.spec.state_root)
        if self._index is None:
            from service.index.inverted import load_index

            self._index = load_index(self.spec.index)
        return self._bundle, self._index

    def build(
        self, progress: Progress | None = None, cancelled: Cancelled = _never
    ) -> dict[str, Any]:
        """Decode the shard's queries and build its examples and objective; returns stats."""
        t0 = time.perf_counter()
        spec = self.spec
        bundle, index = self._resources()
        dec = Decoding(bundle, index, spec.start, pop_limit=spec.pop_limit, lex=spec.lex,
                       engine=spec.engine)  # fmt: skip
        for name in spec.start:  # every starting weight has a column (and is carried along)
            self.space.column(name)
        failed: dict[str, str] = {}
        skipped = 0
        for i, (qid, text) in enumerate(spec.queries):
            if cancelled():
                raise JobCancelled(f"cancelled while building shard {spec.shard}")
            try:
                ex = build_example(dec, self.space, qid, text, spec.qrels.get(qid, {}),
                                   spec.candidates)  # fmt: skip
            except InvalidInputError as exc:
                failed[qid] = str(exc)
                ex = None
            if ex is None:
                skipped += qid not in failed
            else:
                self.examples.append(ex)
            if progress is not None:
                progress(i + 1, len(spec.queries))
        self.configure(spec.objective, spec.objective_options, freeze_smt=spec.freeze_smt,
                       lex=spec.lex, ir_terms=spec.ir_terms)  # fmt: skip
        self.stats = self.summary(failed, skipped, time.perf_counter() - t0)
        return self.stats

    def summary(self, failed: dict[str, str], skipped: int, seconds: float) -> dict[str, Any]:
        """The stats of the examples held now (what :meth:`build` returns)."""
        n_cand = [len(e.docnos) for e in self.examples]
        return {
            "shard": self.spec.shard,
            "queries": len(self.examples),
            "failed": failed,
            "skipped": skipped,
            "features": len(self.space),
            "candidates_mean": float(np.mean(n_cand)) if n_cand else 0.0,
            "sentences": sum(len(e.sentences) for e in self.examples),
            "megabytes": sum(e.nbytes() for e in self.examples) / 1e6,
            "seconds": seconds,
        }

    def configure(
        self,
        objective: str,
        options: Mapping[str, Any] | None = None,
        *,
        freeze_smt: bool,
        lex: bool,
        ir_terms: bool = True,
    ) -> None:
        """A fresh objective (state reset) over the built examples. Examples built with LEX
        columns serve ``lex=False`` too: the LEX weights then stay frozen (at their start);
        likewise the per-term IR weights with ``ir_terms=False``."""
        trainable = self.space.trainable(smt=not freeze_smt, lex=lex, ir_terms=ir_terms)
        self.objective = make_objective(
            objective, len(self.space), trainable, **dict(options or {})
        )

    def epoch(
        self,
        weights: Mapping[str, float],
        progress: Progress | None = None,
        cancelled: Cancelled = _never,
    ) -> ShardEpoch:
        """One pass over the shard's queries starting from ``weights``."""
        if self.objective is None:
            raise ClirError("Shard.epoch before Shard.build")
        t0 = time.perf_counter()
        size = len(self.space)
        w = self.space.vector(weights)
        loss = 0.0
        t_feat = 0.0
        for i, ex in enumerate(self.examples):
            if cancelled():
                raise JobCancelled(f"cancelled during an epoch of shard {self.spec.shard}")
            t1 = time.perf_counter()
            x = ex.features(w, size)
            t_feat += time.perf_counter() - t1
            w, q_loss = self.objective.update(w, x, ex.relevance)
            loss += q_loss
            if progress is not None:
                progress(i + 1, len(self.examples))
        out = self.objective.output(w)
        return ShardEpoch(
            weights={**weights, **self.space.weights(w)},
            output={**weights, **self.space.weights(out)},
            loss=loss,
            queries=len(self.examples),
            seconds=time.perf_counter() - t0,
            feature_seconds=t_feat,
        )


def mix(results: Sequence[Mapping[str, float]], given: Mapping[str, float]) -> dict[str, float]:
    """Uniform average of the shards' weights; a name missing from a shard's result counts
    with its value in ``given`` (0 if new)."""
    names = dict.fromkeys(given)
    for r in results:
        names.update(dict.fromkeys(r))
    n = len(results)
    return {
        name: sum(float(r.get(name, given.get(name, 0.0))) for r in results) / n for name in names
    }

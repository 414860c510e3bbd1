"""``clir tune``: tune a bundle's weights on dev data and store them as a new version.

The dev pairs come from :mod:`service.mt.tuning.data`; Algorithm 1 of Chen et al. 2017 runs with the
chosen optimiser (:mod:`service.mt.tuning.optimizers`) from the bundle's active weights; the best
weights by dev BLEU are evaluated once on the held-out part and saved (with both BLEU
scores) as the version ``tune-<method>-<time>`` (in the bundle's weights state directory,
:mod:`service.mt.weights`); ``activate`` makes them active when they beat the active version's
held-out BLEU.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from service.forest.inference import fast_viterbi
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig
from service.mt.tuning.bleu import sacrebleu_corpus_bleu
from service.mt.tuning.data import DevPair
from service.mt.tuning.dev import bundle_kbest_decoder
from service.mt.tuning.loop import TuneResult, tune
from service.mt.tuning.optimizers import get_optimizer
from service.mt.weights import WeightsVersion


def translate_1best(
    bundle: ModelBundle,
    weights: Mapping[str, float],
    sources: Sequence[Sequence[str]],
    config: DecoderConfig | None = None,
) -> list[tuple[str, ...]]:
    """The Viterbi translation of every source sentence under ``weights``."""
    dec = bundle.make_decoder(weights, config)
    out = []
    for s in sources:
        forest = dec.forest(s)
        out.append(fast_viterbi(forest.hypergraph, dict(weights)).tokens)
    return out


def bleu_of(
    bundle: ModelBundle,
    weights: Mapping[str, float],
    pairs: Sequence[DevPair],
    config: DecoderConfig | None = None,
) -> float:
    """Corpus BLEU (percent, tokenised, lowercased text) of the 1-best translations."""
    hyps = translate_1best(bundle, weights, [p.source for p in pairs], config)
    return sacrebleu_corpus_bleu(hyps, [p.reference for p in pairs])


@dataclass(frozen=True)
class TuneOutcome:
    version: WeightsVersion
    result: TuneResult
    heldout_bleu: float
    activated: bool
    seconds: float


def tune_bundle(
    bundle: ModelBundle,
    tune_pairs: Sequence[DevPair],
    heldout_pairs: Sequence[DevPair],
    method: str,
    *,
    k: int = 20,
    iterations: int = 40,
    patience: int | None = None,
    merge: str | None = None,
    config: DecoderConfig | None = None,
    activate: bool = False,
    version: str | None = None,
    start_version: str | None = None,
    log: Callable[[str], None] | None = None,
) -> TuneOutcome:
    """Tune ``bundle``'s weights on ``tune_pairs`` from ``start_version`` (default: the active
    weights) and save them as a new version; with ``activate`` it becomes active if its
    held-out BLEU is at least the active version's. The active version is never changed
    otherwise."""
    say = log or (lambda m: print(m, file=sys.stderr))
    start = time.perf_counter()
    active = bundle.active_weights()
    init = active if start_version is None else bundle.weights_store.load(start_version)
    decode = bundle_kbest_decoder(bundle, [p.source for p in tune_pairs], k=k, config=config)
    result = tune(
        decode,
        [p.reference for p in tune_pairs],
        init.weights,
        get_optimizer(method),
        k=k,
        iterations=iterations,
        merge=merge,  # type: ignore[arg-type]
        patience=patience,
        log=say,
    )
    heldout = bleu_of(bundle, result.weights, heldout_pairs, config) if heldout_pairs else 0.0
    name = version or f"tune-{method}-{datetime.now(UTC).strftime('%Y%m%d%H%M%S')}"
    saved = bundle.weights_store.save(
        result.weights,
        version=name,
        source=f"tune:{method}",
        metrics={
            "dev_bleu": result.bleu,
            "heldout_bleu": heldout,
            "dev_sentences": len(tune_pairs),
            "heldout_sentences": len(heldout_pairs),
            "best_iteration": result.best_iteration,
        },
        parent=init.version,
    )
    activated = False
    if activate:
        current = active.metrics.get("heldout_bleu")
        if current is None and heldout_pairs:
            current = bleu_of(bundle, active.weights, heldout_pairs, config)
        if current is None or heldout >= current:
            bundle.weights_store.activate(saved.version)
            activated = True
    return TuneOutcome(saved, result, heldout, activated, time.perf_counter() - start)


def default_pool(dev_dir: Path) -> Path:
    """``tr/pool.en.tsv.gz`` beside ``tr/<pair>/``."""
    return dev_dir.parent / "pool.en.tsv.gz"

"""The tuning loop (Algorithm 1 of Chen et al. 2017): training-set construction, selection, early
stop, and end to end with a synthetic k-best decoder whose candidates' BLEU follows a hidden
weight vector."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from service.errors import ConfigurationError, InternalError, InvalidInputError
from service.mt.tuning.bleu import sacrebleu_corpus_bleu
from service.mt.tuning.lists import KbestEntry, ListArrays
from service.mt.tuning.loop import tune
from service.mt.tuning.optimizers import Optimizer, get_optimizer
from service.records import Translation

FEATURES = ("f0", "f1", "f2", "f3", "f4")
HIDDEN = np.array([1.0, -0.5, 0.8, 0.0, -1.2])


class SyntheticDecoder:
    """A fixed pool of candidates per sentence; ``decode(w)`` returns the top k by ``w·φ``.

    A candidate's string is its sentence's reference with more words replaced the lower its
    rank under the hidden weights, so BLEU follows ``HIDDEN·φ``.
    """

    def __init__(self, sentences: int = 20, pool: int = 30, k: int = 10, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        vocab = [f"w{i}" for i in range(40)]
        self.k = k
        self.refs: list[tuple[str, ...]] = []
        self.pools: list[list[tuple[tuple[str, ...], np.ndarray]]] = []
        self.calls: list[dict[str, float]] = []
        for s in range(sentences):
            ref = tuple(rng.choice(vocab, size=9).tolist())
            feats = rng.normal(size=(pool, len(FEATURES)))
            rank = np.argsort(np.argsort(-(feats @ HIDDEN)))
            cands = []
            for i in range(pool):
                toks = list(ref)
                # distinct strings: only the best is the reference itself
                wrong = 0 if rank[i] == 0 else 1 + round(6 * (rank[i] - 1) / (pool - 2))
                for p in rng.choice(len(toks), size=wrong, replace=False):
                    toks[p] = f"x{s}_{i}_{p}"
                cands.append((tuple(toks), feats[i]))
            self.refs.append(ref)
            self.pools.append(cands)

    def __call__(self, weights: Mapping[str, float]) -> list[list[Translation]]:
        self.calls.append(dict(weights))
        w = np.array([weights.get(f, 0.0) for f in FEATURES])
        out = []
        for cands in self.pools:
            scored = sorted(cands, key=lambda c: -float(c[1] @ w))[: self.k]
            out.append(
                [
                    Translation(t, float(f @ w), dict(zip(FEATURES, f.tolist(), strict=True)))
                    for t, f in scored
                ]
            )
        return out

    def bleu(self, w: np.ndarray) -> float:
        best = [max(c, key=lambda x: float(x[1] @ w))[0] for c in self.pools]
        return sacrebleu_corpus_bleu(best, self.refs)


BAD = dict(zip(FEATURES, (-HIDDEN + np.array([0.1, 0.2, -0.1, 0.3, 0.0])).tolist(), strict=True))

PARAMS: dict[str, dict[str, Any]] = {
    "mert": {"restarts": 2, "random_directions": 2},
    "pro": {},
    "listnet": {"epochs": 30},
    "listmle": {"epochs": 30},
    "listmle-top5": {"epochs": 30},
    "listmle-te": {"epochs": 30},
}


@pytest.mark.parametrize("name", list(PARAMS))
def test_every_optimizer_improves_dev_bleu(name: str) -> None:
    dec = SyntheticDecoder()
    result = tune(dec, dec.refs, BAD, get_optimizer(name, **PARAMS[name]), k=10, iterations=5)
    start = result.history[0].bleu
    assert start == pytest.approx(dec.bleu(np.array([BAD[f] for f in FEATURES])))
    assert start < 30.0
    assert result.bleu > start + 30.0, [r.bleu for r in result.history]
    assert result.bleu == max(r.bleu for r in result.history)
    assert result.weights == result.history[result.best_iteration].weights
    # the reported BLEU is what the returned weights decode to
    assert dec.bleu(np.array([result.weights[f] for f in FEATURES])) == pytest.approx(result.bleu)


class Scripted(Optimizer):
    """Returns the next weights of a script and records the training lists it was given."""

    name = "scripted"

    def __init__(self, script: Sequence[Mapping[str, float]]) -> None:
        self.script = list(script)
        self.seen: list[list[list[KbestEntry]]] = []

    def optimize(
        self,
        weights: Mapping[str, float],
        lists: Sequence[Sequence[KbestEntry]],
        rng: np.random.Generator | None = None,
    ) -> dict[str, float]:
        self.seen.append([list(lst) for lst in lists])
        return dict(self.script[len(self.seen) - 1])

    def optimize_arrays(
        self, w0: np.ndarray, lists: Sequence[ListArrays], rng: np.random.Generator
    ) -> np.ndarray:
        raise AssertionError("not used")

    def params(self) -> dict[str, Any]:
        return {}


GOOD = dict(zip(FEATURES, HIDDEN.tolist(), strict=True))


def test_instance_aggregating_keeps_every_list() -> None:
    dec = SyntheticDecoder(sentences=4, k=5)
    opt = Scripted([GOOD, BAD, GOOD])
    result = tune(dec, dec.refs, BAD, opt, k=5, iterations=3, merge="aggregate")
    assert [len(t) for t in opt.seen] == [4, 8, 12]  # T grows by one list per sentence
    assert all(len(lst) == 5 for t in opt.seen for lst in t)
    # T lists sentence by sentence, iteration by iteration; iteration 2 decodes with BAD
    # again: its lists repeat iteration 0's and are kept as instances of their own
    assert [e.tokens for e in opt.seen[2][2]] == [e.tokens for e in opt.seen[2][0]]
    assert [e.tokens for e in opt.seen[2][1]] != [e.tokens for e in opt.seen[2][0]]
    assert [r.instances for r in result.history] == [4, 8, 12, 0]
    assert result.signature["merge"] == "aggregate"


def test_kbest_merging_unions_by_string() -> None:
    dec = SyntheticDecoder(sentences=4, k=5)
    opt = Scripted([GOOD, BAD, GOOD])
    tune(dec, dec.refs, BAD, opt, k=5, iterations=3, merge="merge")
    assert [len(t) for t in opt.seen] == [4, 4, 4]  # one list per sentence
    for s in range(4):
        first = [e.tokens for e in opt.seen[0][s]]
        merged = [e.tokens for e in opt.seen[1][s]]
        assert merged[:5] == first  # earlier iterations first, no duplicates
        assert len(set(merged)) == len(merged) > 5
        assert [e.tokens for e in opt.seen[2][s]] == merged  # BAD again adds nothing new
    entry = opt.seen[1][0][0]
    assert entry.bleu > 0 and entry.stats.ref_len == 9


def test_default_merge_comes_from_the_optimizer() -> None:
    dec = SyntheticDecoder(sentences=3, k=4)
    assert get_optimizer("pro").default_merge == "merge"
    assert get_optimizer("listmle-te").default_merge == "aggregate"
    result = tune(dec, dec.refs, BAD, get_optimizer("pro"), k=4, iterations=2)
    assert result.signature["merge"] == "merge"
    assert [r.instances for r in result.history] == [3, 3, 0]


def test_best_weights_are_returned_and_patience_stops() -> None:
    dec = SyntheticDecoder(sentences=6)
    worse = {f: -v for f, v in GOOD.items()}
    opt = Scripted([GOOD, worse, worse, worse, worse])
    result = tune(dec, dec.refs, BAD, opt, k=5, iterations=5, patience=2)
    # decodes: BAD, GOOD (best), worse, worse -> two decodes without a new best: stop
    assert len(dec.calls) == 4
    assert len(opt.seen) == 3  # no optimisation after the stopping decode
    assert result.best_iteration == 1
    assert result.weights == GOOD
    assert result.bleu == pytest.approx(100.0)
    assert result.history[-1].optimize_seconds == 0.0


def test_final_weights_are_decoded() -> None:
    dec = SyntheticDecoder(sentences=3)
    opt = Scripted([BAD, GOOD])
    result = tune(dec, dec.refs, BAD, opt, k=5, iterations=2)
    assert len(dec.calls) == 3 and dec.calls[-1] == GOOD
    assert result.best_iteration == 2 and result.weights == GOOD


def test_bad_input() -> None:
    dec = SyntheticDecoder(sentences=3)
    opt = Scripted([GOOD])
    with pytest.raises(InvalidInputError, match="3 lists for 4 dev sentences"):
        tune(dec, [*dec.refs, ("a",)], BAD, opt, iterations=1)
    with pytest.raises(InvalidInputError, match="dev set is empty"):
        tune(dec, [], BAD, opt)
    with pytest.raises(ConfigurationError, match="merge"):
        tune(dec, dec.refs, BAD, opt, merge="union")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="patience"):
        tune(dec, dec.refs, BAD, opt, patience=0)
    with pytest.raises(InvalidInputError, match="all lists empty"):
        get_optimizer("listmle").optimize(BAD, [[], []])


def test_an_empty_kbest_list_is_an_internal_error() -> None:
    # pass-through gives every dev sentence a translation: an empty list is the decoder's bug
    dec = SyntheticDecoder(sentences=3)
    with pytest.raises(InternalError, match="empty list for dev sentence 0"):
        tune(lambda w: [[], [], []], dec.refs, BAD, Scripted([GOOD]))

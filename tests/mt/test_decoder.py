"""The decoder: a golden decode by hand, and cube pruning against exact LM intersection."""

from __future__ import annotations

import gc
import math
import random
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import InputTooLargeError, InvalidInputError
from service.forest.inference import enumerate_derivations, viterbi
from service.forest.kbest import kbest
from service.mt.decoder import DecoderConfig, Forest
from service.mt.decoder.reference import _GC_PAUSE, ReferenceDecoder, _GcPause
from service.mt.grammar import load_grammar, write_grammar
from service.mt.lm import ArpaLM, KenLM, LanguageModel
from service.mt.rules import (
    GLUE,
    LANGUAGE_MODEL,
    LOG_P_E_GIVEN_F,
    PASS_THROUGH,
    RULE_PENALTY,
    WORD_PENALTY,
    Rule,
    X,
)

TOY_ARPA = Path(__file__).resolve().parent.parent / "data" / "toy_bigram.arpa"
LN10 = math.log(10)

WEIGHTS = {
    LANGUAGE_MODEL: 1.0,
    LOG_P_E_GIVEN_F: 1.0,
    WORD_PENALTY: 0.5,
    RULE_PENALTY: -0.1,
    GLUE: 0.0,
    PASS_THROUGH: -2.0,
}


def rule(src: str, tgt: str, logp: float) -> Rule:
    return Rule(X, tuple(src.split()), tuple(tgt.split()), {LOG_P_E_GIVEN_F: logp})


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> ReferenceDecoder:
    rules = [
        rule("das", "the", -0.5),
        rule("das", "that", -1.0),
        rule("haus", "house", -0.2),
        rule("das [X,1]", "the [X,1]", -0.1),
    ]
    path = tmp_path_factory.mktemp("g") / "grammar"
    write_grammar(rules, path, feature_names=[LOG_P_E_GIVEN_F])
    return ReferenceDecoder(load_grammar(path), KenLM(TOY_ARPA), WEIGHTS)


def test_golden_decode_by_hand(toy: ReferenceDecoder) -> None:
    # Three derivations of "das haus" (see the toy ARPA: log10 p(<s> the house </s>) =
    # -0.2 - 0.3 - 0.4 = -0.9; p(<s> that house </s>) = -0.9 - 0.6 - 0.4 = -1.9):
    #  a) glue: [das -> the] [haus -> house]: -0.5 - 0.2 + 0.5*2 - 0.1*2 - 0.9 ln10 = -2.0723
    #  b) [das X -> the X] with [haus -> house]: -0.1 - 0.2 + 1.0 - 0.2 - 0.9 ln10 = -1.5723
    #  c) glue: [das -> that] [haus -> house]: -1.0 - 0.2 + 1.0 - 0.2 - 1.9 ln10 = -4.7749
    forest = toy.forest(["das", "haus"])
    best = viterbi(forest.hypergraph, WEIGHTS)
    expected = -0.1 - 0.2 + 0.5 * 2 - 0.1 * 2 - 0.9 * LN10
    assert best.tokens == ("the", "house")
    assert best.score == pytest.approx(expected, abs=1e-6)
    assert forest.best_score == pytest.approx(expected, abs=1e-6)
    assert best.features == pytest.approx(
        {LOG_P_E_GIVEN_F: -0.3, WORD_PENALTY: 2.0, RULE_PENALTY: 2.0, LANGUAGE_MODEL: -0.9 * LN10},
        abs=1e-6,
    )
    # the tree: TOP -> S -> X[0,2] (rule "das [X,1]") -> X[1,2] (rule "haus")
    assert [forest.hypergraph.edges[e].span for e in best.edges] == [(0, 2), (0, 2), (0, 2), (1, 2)]
    rules_used = [r for r in best.rule_ids if r >= 0]
    assert [toy.grammar.rule(r).source for r in rules_used] == [("das", "[X,1]"), ("haus",)]
    scores = [d.score for d in kbest(forest.hypergraph, WEIGHTS, 10)]
    assert scores == pytest.approx(
        [expected, -0.7 + 0.8 - 0.9 * LN10, -1.2 + 0.8 - 1.9 * LN10], abs=1e-6
    )


def test_unknown_word_passes_through(toy: ReferenceDecoder) -> None:
    forest = toy.forest(["das", "auto"])
    best = viterbi(forest.hypergraph, WEIGHTS)
    assert best.tokens[-1] == "auto"
    assert best.features[PASS_THROUGH] == 1.0
    assert best.features["LanguageModel_OOV"] == 1.0


def test_no_lm_mode_has_no_lm_features(toy: ReferenceDecoder) -> None:
    nolm = ReferenceDecoder(toy.grammar, toy.lm, WEIGHTS, DecoderConfig(use_lm=False))
    forest = nolm.forest(["das", "haus"])
    best = viterbi(forest.hypergraph, WEIGHTS)
    assert LANGUAGE_MODEL not in best.features
    # without the LM the best is the rule with the best translation score: "the house"
    assert best.score == pytest.approx(-0.1 - 0.2 + 1.0 - 0.2)


def test_bad_sentences(toy: ReferenceDecoder) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        toy.forest([])
    with pytest.raises(InputTooLargeError):
        toy.forest(["das"] * 500)


# --- cube pruning versus exact intersection --------------------------------------------------

VOCAB_F = ["a", "b", "c", "d"]
VOCAB_E = ["the", "that", "house", "x", "y"]


def random_rules(rng: random.Random) -> list[Rule]:
    rules: list[Rule] = []
    for f in VOCAB_F:
        for e in rng.sample(VOCAB_E, rng.randint(1, 3)):
            rules.append(Rule(X, (f,), (e,), {LOG_P_E_GIVEN_F: -rng.random()}))
    for _ in range(rng.randint(2, 8)):
        f1, f2 = rng.choice(VOCAB_F), rng.choice(VOCAB_F)
        shape = rng.randint(0, 3)
        e1, e2 = rng.choice(VOCAB_E), rng.choice(VOCAB_E)
        if shape == 0:
            src, tgt = (f1, f2), (e1, e2)
        elif shape == 1:
            src, tgt = (f1, "[X,1]"), ("[X,1]", e1)
        elif shape == 2:
            src, tgt = ("[X,1]", f1, "[X,2]"), ("[X,2]", e1, "[X,1]")
        else:
            src, tgt = (f1, "[X,1]", f2), (e1, e2, "[X,1]")
        rules.append(Rule(X, src, tgt, {LOG_P_E_GIVEN_F: -rng.random()}))
    return rules


def exact_best(dec: ReferenceDecoder, lm: LanguageModel, tokens: list[str]) -> float:
    """Max over every derivation of the −LM forest of its score with the full-sentence LM."""
    hg = dec.minus_lm_forest(tokens)
    best = -math.inf
    for tree in enumerate_derivations(hg):
        d = hg.derivation(tree, 0.0)
        score = sum(WEIGHTS.get(k, 0.0) * v for k, v in d.features.items())
        score += WEIGHTS[LANGUAGE_MODEL] * lm.sentence_score(d.tokens)
        best = max(best, score)
    return best


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 4))
def test_unbounded_cube_pruning_equals_exact_intersection(
    tmp_path_factory: pytest.TempPathFactory, seed: int, n: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("g") / "grammar"
    write_grammar(random_rules(rng), path, feature_names=[LOG_P_E_GIVEN_F])
    lm = ArpaLM(TOY_ARPA)
    dec = ReferenceDecoder(load_grammar(path), lm, WEIGHTS, DecoderConfig(pop_limit=10**9))
    tokens = [rng.choice(VOCAB_F) for _ in range(n)]
    forest = dec.forest(tokens)
    exact = exact_best(dec, lm, tokens)
    assert forest.best_score == pytest.approx(exact, abs=1e-9)
    assert viterbi(forest.hypergraph, WEIGHTS).score == pytest.approx(exact, abs=1e-9)
    # a pruned search is never better than the exact one, and its forest is consistent
    pruned = ReferenceDecoder(dec.grammar, lm, WEIGHTS, DecoderConfig(pop_limit=2)).forest(tokens)
    assert pruned.best_score <= exact + 1e-9
    best = viterbi(pruned.hypergraph, WEIGHTS)
    assert best.score == pytest.approx(pruned.best_score, abs=1e-9)
    # the LM feature on the edges adds up to the LM score of the string
    assert best.features[LANGUAGE_MODEL] == pytest.approx(lm.sentence_score(best.tokens))


# --- the garbage-collector pause --------------------------------------------------------------


def _edges(forest: Forest) -> list[tuple[object, ...]]:
    hg = forest.hypergraph
    return [
        (e.head, e.tails, e.target, e.span, e.rule_id, sorted(e.features.items())) for e in hg.edges
    ] + [(v.label, v.span, v.state) for v in hg.nodes]


def test_gc_pause_changes_nothing_and_restores_the_collector(toy: ReferenceDecoder) -> None:
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            seen: list[bool] = []
            with _GC_PAUSE.paused():
                seen.append(gc.isenabled())
                with _GC_PAUSE.paused():  # nested (as by a concurrent decode)
                    seen.append(gc.isenabled())
                seen.append(gc.isenabled())
            assert seen == [False, False, False] and gc.isenabled() == enabled
            with pytest.raises(RuntimeError), _GC_PAUSE.paused():
                raise RuntimeError("boom")
            assert gc.isenabled() == enabled and _GC_PAUSE.depth == 0
        gc.enable()
        # overlapping pauses that keep the collector off too long make a collection themselves
        runs: list[str] = []
        gc.callbacks.append(lambda phase, _info: runs.append(phase))
        pause = _GcPause(max_off=0.0)
        try:
            with pause.paused():
                with pause.paused():
                    time.sleep(0.001)
                assert "start" in runs and not gc.isenabled()
        finally:
            gc.callbacks.pop()
        assert gc.isenabled()
        plain = ReferenceDecoder(toy.grammar, toy.lm, WEIGHTS, DecoderConfig(pause_gc=False))
        sentence = ["das", "haus", "das", "auto", "haus"]
        assert _edges(plain.forest(sentence)) == _edges(toy.forest(sentence))
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()

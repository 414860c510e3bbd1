"""The bundle's k-best decoder for tuning, on the toy grammar and toy ARPA LM of the decoder
tests, and one tuning run through it."""

from __future__ import annotations

import pytest

from service.errors import InvalidInputError
from service.mt.bundle import ModelBundle
from service.mt.grammar import load_grammar, write_grammar
from service.mt.lm import KenLM
from service.mt.rules import (
    LANGUAGE_MODEL,
    LOG_P_E_GIVEN_F,
    RULE_PENALTY,
    WORD_PENALTY,
)
from service.mt.tuning.dev import bundle_kbest_decoder
from service.mt.tuning.loop import tune
from service.mt.tuning.optimizers import get_optimizer
from service.mt.weights import WeightsStore
from tests.mt.test_decoder import LN10, TOY_ARPA, WEIGHTS, rule


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> ModelBundle:
    root = tmp_path_factory.mktemp("bundle")
    rules = [
        rule("das", "the", -0.5),
        rule("das", "that", -1.0),
        rule("haus", "house", -0.2),
        rule("das [X,1]", "the [X,1]", -0.1),
    ]
    write_grammar(rules, root / "grammar", feature_names=[LOG_P_E_GIVEN_F])
    return ModelBundle(
        root,
        {"src": "de", "tgt": "en"},
        load_grammar(root / "grammar"),
        KenLM(TOY_ARPA),
        WeightsStore(root / "weights"),
    )


def test_kbest_lists_follow_the_weights(bundle: ModelBundle) -> None:
    decode = bundle_kbest_decoder(bundle, [["das", "haus"], ["das"]], k=5)
    lists = decode(WEIGHTS)
    assert len(lists) == 2
    # "the house" has two derivations; the unique list keeps the better one (see the golden
    # decode in tests/mt/test_decoder.py): log p = -0.3, LM log10 -0.9
    assert [t.tokens for t in lists[0]] == [("the", "house"), ("that", "house")]
    assert lists[0][0].features == pytest.approx(
        {LOG_P_E_GIVEN_F: -0.3, WORD_PENALTY: 2.0, RULE_PENALTY: 2.0, LANGUAGE_MODEL: -0.9 * LN10},
        abs=1e-6,
    )
    assert [t.tokens for t in lists[1]] == [("the",), ("that",)]
    # new weights, new decoder: a negative translation-model weight prefers "that house"
    # (log p -1.2 against -0.3 and -0.7), with the LM switched off
    flipped = decode({LOG_P_E_GIVEN_F: -10.0})
    assert flipped[0][0].tokens == ("that", "house")
    assert decode(WEIGHTS)[0][0].tokens == ("the", "house")


def test_tune_through_the_decoder(bundle: ModelBundle) -> None:
    # long enough for corpus BLEU to have 4-grams
    sources = [["das", "haus", "das", "haus"], ["das", "haus"]]
    refs = [["the", "house", "the", "house"], ["the", "house"]]
    decode = bundle_kbest_decoder(bundle, sources, k=5)
    start = {LOG_P_E_GIVEN_F: -10.0}  # prefers "that house"
    result = tune(decode, refs, start, get_optimizer("mert", restarts=1), k=5, iterations=2, seed=1)
    assert decode(start)[0][0].tokens == ("that", "house", "that", "house")
    assert result.history[0].bleu < 20.0  # sacrebleu's smoothing keeps it above 0
    assert result.bleu == pytest.approx(100.0)
    assert decode(result.weights)[0][0].tokens == ("the", "house", "the", "house")


def test_empty_dev_sentence(bundle: ModelBundle) -> None:
    with pytest.raises(InvalidInputError, match="dev sentence 1 is empty"):
        bundle_kbest_decoder(bundle, [["das"], []])
    with pytest.raises(InvalidInputError, match="no dev sentences"):
        bundle_kbest_decoder(bundle, [])

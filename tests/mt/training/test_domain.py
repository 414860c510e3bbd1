"""In-domain translation probabilities (service.mt.training.domain): the columnar path against
the definitions, by hand and on random corpora."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from service.errors import ConfigurationError
from service.mt.rules import (
    DOMAIN_FEATURES,
    LOG_P_E_GIVEN_F,
    LOG_P_E_GIVEN_F_DOMAIN,
    LOG_P_F_GIVEN_E,
    LOG_P_F_GIVEN_E_DOMAIN,
    RULE_FEATURES,
    Rule,
)
from service.mt.training.domain import domain_flags, in_domain_counts
from service.mt.training.extract import AlignedPair, ExtractionConfig, encode_corpus, extract_rules
from service.mt.training.lexical_counts import lexical_table_from_corpus
from service.mt.training.rule_features import estimate_features, reference_rule_table
from tests.mt.training.test_rule_features import random_pair

Key = tuple[tuple[str, ...], tuple[str, ...]]

# "massstab" is "scale" in two general pairs and "zoom" in the one in-domain pair.
ZOOM = [
    AlignedPair(["massstab"], ["scale"], [(0, 0)]),
    AlignedPair(["massstab"], ["scale"], [(0, 0)]),
    AlignedPair(["massstab"], ["zoom"], [(0, 0)]),
    AlignedPair(["haus"], ["house"], [(0, 0)]),
]
ZOOM_FLAGS = [False, False, True, False]


def _fast(
    pairs: list[AlignedPair],
    flags: list[bool],
    config: ExtractionConfig | None = None,
    limit: int | None = None,
    prior: float = 1.0,
) -> dict[Key, Rule]:
    corpus = encode_corpus(pairs)
    counts = extract_rules(corpus, config)
    domain = in_domain_counts(corpus, np.array(flags), config)
    table = estimate_features(
        counts, lexical_table_from_corpus(corpus), limit, domain=domain, prior=prior
    )
    assert table.feature_names == RULE_FEATURES + DOMAIN_FEATURES
    return {(r.source, r.target): r for r in table.rules()}


def test_in_domain_probabilities_by_hand() -> None:
    rules = _fast(ZOOM, ZOOM_FLAGS)
    scale, zoom = rules[("massstab",), ("scale",)], rules[("massstab",), ("zoom",)]
    # whole corpus: p(scale|massstab) = 2/3, p(zoom|massstab) = 1/3; in the domain, c_in(f) = 1
    assert math.exp(scale.features[LOG_P_E_GIVEN_F]) == pytest.approx(2 / 3)
    assert math.exp(scale.features[LOG_P_E_GIVEN_F_DOMAIN]) == pytest.approx((0 + 2 / 3) / 2)
    assert math.exp(zoom.features[LOG_P_E_GIVEN_F_DOMAIN]) == pytest.approx((1 + 1 / 3) / 2)
    # p(f|e) is 1 for both; in the domain, "scale" was never seen (c_in(e) = 0): its prior
    assert zoom.features[LOG_P_F_GIVEN_E_DOMAIN] == pytest.approx(0.0, abs=1e-6)
    assert scale.features[LOG_P_F_GIVEN_E_DOMAIN] == pytest.approx(0.0, abs=1e-6)
    # a source side the domain never saw keeps the whole corpus's probabilities
    house = rules[("haus",), ("house",)]
    assert house.features[LOG_P_E_GIVEN_F_DOMAIN] == pytest.approx(house.features[LOG_P_E_GIVEN_F])
    assert house.features[LOG_P_F_GIVEN_E_DOMAIN] == pytest.approx(house.features[LOG_P_F_GIVEN_E])
    # the domain now prefers "zoom"; the whole corpus prefers "scale"
    assert zoom.features[LOG_P_E_GIVEN_F_DOMAIN] > scale.features[LOG_P_E_GIVEN_F_DOMAIN]


def test_a_larger_prior_moves_toward_the_whole_corpus() -> None:
    weak, strong = _fast(ZOOM, ZOOM_FLAGS, prior=0.1), _fast(ZOOM, ZOOM_FLAGS, prior=100.0)
    key = ("massstab",), ("zoom",)
    whole = weak[key].features[LOG_P_E_GIVEN_F]
    weak_p = math.exp(weak[key].features[LOG_P_E_GIVEN_F_DOMAIN])
    assert weak_p == pytest.approx((1 + 0.1 / 3) / 1.1)
    assert abs(strong[key].features[LOG_P_E_GIVEN_F_DOMAIN] - whole) < abs(
        weak[key].features[LOG_P_E_GIVEN_F_DOMAIN] - whole
    )


@pytest.mark.parametrize(
    ("seed", "limit", "config", "prior"),
    [
        (0, None, ExtractionConfig(), 1.0),
        (1, 3, ExtractionConfig(), 0.5),
        (2, 1, ExtractionConfig(min_hierarchical_count=3), 4.0),
        (3, None, ExtractionConfig(tight_hierarchical=False, min_hierarchical_count=1), 1.0),
    ],
)
def test_fast_domain_features_equal_the_reference_on_random_corpora(
    seed: int, limit: int | None, config: ExtractionConfig, prior: float
) -> None:
    rng = random.Random(seed)
    pairs = [random_pair(rng) for _ in range(40)]
    pairs += rng.sample(pairs, 10)
    flags = [rng.random() < 0.3 for _ in pairs]
    fast = _fast(pairs, flags, config, limit, prior)
    ref = {
        (r.source, r.target): r
        for r in reference_rule_table(pairs, config, limit, in_domain=flags, prior=prior)
    }
    assert set(fast) == set(ref)
    differs = 0
    for key, rule in ref.items():
        assert set(rule.features) == set(RULE_FEATURES + DOMAIN_FEATURES)
        assert fast[key].features == pytest.approx(rule.features, rel=1e-5, abs=1e-5)
        differs += rule.features[LOG_P_E_GIVEN_F_DOMAIN] != pytest.approx(
            rule.features[LOG_P_E_GIVEN_F], abs=1e-6
        )
    assert differs > 0  # the domain moved some probabilities


def test_subset_equals_encoding_the_subset() -> None:
    rng = random.Random(7)
    pairs = [random_pair(rng) for _ in range(30)]
    flags = np.array([rng.random() < 0.5 for _ in pairs])
    corpus = encode_corpus(pairs)
    sub = corpus.subset(flags)
    inside = [p for p, f in zip(pairs, flags, strict=True) if f]
    again = encode_corpus(inside, corpus.source_vocab, corpus.target_vocab)
    assert len(sub) == int(flags.sum())
    for name in ("source", "source_offsets", "target", "target_offsets", "link_i", "link_j",
                 "link_offsets"):  # fmt: skip
        assert np.array_equal(getattr(sub, name), getattr(again, name)), name


def test_domain_flags_and_bad_settings() -> None:
    flags = domain_flags(["lohelp:a#1", "gettext:x", "lohelp:b#2"], ["lohelp:"])
    assert flags.tolist() == [True, False, True]
    with pytest.raises(ConfigurationError, match="prefixes"):
        domain_flags(["x"], [""])
    corpus = encode_corpus(ZOOM)
    with pytest.raises(ConfigurationError, match="no sentence pair"):
        in_domain_counts(corpus, np.zeros(len(ZOOM), dtype=bool))
    with pytest.raises(ConfigurationError, match="domain flags"):
        in_domain_counts(corpus, np.ones(2, dtype=bool))
    counts = extract_rules(corpus)
    with pytest.raises(ConfigurationError, match="prior"):
        estimate_features(
            counts, lexical_table_from_corpus(corpus), None,
            domain=in_domain_counts(corpus, np.array(ZOOM_FLAGS)), prior=0.0,
        )  # fmt: skip

"""Lexical table, rule features, pruning and glue rules: hand computations and fast == reference."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from service.core.settings import Settings
from service.errors import ConfigurationError, DataFormatError, MissingResourceError
from service.mt.lexical import LexicalTable
from service.mt.rules import GLUE, RULE_FEATURES, Rule
from service.mt.training.extract import AlignedPair, ExtractionConfig, encode_corpus, extract_rules
from service.mt.training.lexical_counts import (
    lexical_counts_reference,
    lexical_table_from_corpus,
    lexical_table_from_counts,
)
from service.mt.training.rule_features import (
    MIN_LEX_PROB,
    RULE_TABLE_LIMIT,
    RuleTable,
    estimate_features,
    glue_rules,
    lexical_weight,
    reference_rule_table,
)

# S1 das haus / the house, S2 das buch / the book, S3 das buch / a book; all monotone 1-1.
THREE = [
    AlignedPair(["das", "haus"], ["the", "house"], [(0, 0), (1, 1)]),
    AlignedPair(["das", "buch"], ["the", "book"], [(0, 0), (1, 1)]),
    AlignedPair(["das", "buch"], ["a", "book"], [(0, 0), (1, 1)]),
]


def _table(
    pairs: list[AlignedPair], limit: int | None = None, config: ExtractionConfig | None = None
) -> RuleTable:
    corpus = encode_corpus(pairs)
    return estimate_features(
        extract_rules(corpus, config), lexical_table_from_corpus(corpus), limit
    )


def _by_key(rules: list[Rule]) -> dict[tuple[tuple[str, ...], tuple[str, ...]], Rule]:
    return {(r.source, r.target): r for r in rules}


def _key(src: str, tgt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(src.split()), tuple(tgt.split())


def test_feature_values_on_three_sentences_by_hand() -> None:
    # Each sentence "f1 f2 / e1 e2" gives f1→e1 and f2→e2 (count 1) and, from the whole pair,
    # "f1 f2 → e1 e2", "[X,1] f2 → [X,1] e2", "f1 [X,1] → e1 [X,1]" (1/3 each). Totals:
    #   das→the 2, das→a 1, haus→house 1, buch→book 2,
    #   das [X,1]→the [X,1] 2/3, das [X,1]→a [X,1] 1/3, [X,1] buch→[X,1] book 2/3,
    #   das buch→the book 1/3, das buch→a book 1/3, das haus→the house 1/3, [X,1] haus 1/3.
    # Source marginals: c(das)=3, c(das [X,1])=1, c(das buch)=2/3. Target marginals:
    # c(the)=2, c(a)=1, c(the [X,1])=2/3, c(a book)=1/3, c([X,1] book)=2/3.
    # Lexical table: das–the 2, das–a 1, haus–house 1, buch–book 2, no NULL links, so
    # w(the|das)=2/3, w(a|das)=1/3, w(book|buch)=w(house|haus)=1, and every w(f|e)=1.
    # Columns: LogPEgivenF, LogPFgivenE, LogLexEgivenF, LogLexFgivenE, LogCount, Singleton, Arity
    assert RULE_FEATURES[:5] == (
        "LogPEgivenF",
        "LogPFgivenE",
        "LogLexEgivenF",
        "LogLexFgivenE",
        "LogCount",
    )
    expected = {
        _key("das", "the"): [
            math.log(2 / 3),
            math.log(2 / 2),
            math.log(2 / 3),
            math.log(1),
            math.log(1 + 2),
            0,
            0,
        ],
        _key("das", "a"): [
            math.log(1 / 3),
            math.log(1 / 1),
            math.log(1 / 3),
            math.log(1),
            math.log(1 + 1),
            1,
            0,
        ],
        _key("das [X,1]", "the [X,1]"): [
            math.log((2 / 3) / 1),
            math.log((2 / 3) / (2 / 3)),
            math.log(2 / 3),
            0.0,
            math.log(1 + 2 / 3),
            1,
            1,
        ],
        _key("[X,1] buch", "[X,1] book"): [
            math.log(1),
            math.log(1),
            math.log(1),
            math.log(1),
            math.log(1 + 2 / 3),
            1,
            1,
        ],
        _key("das buch", "a book"): [
            math.log((1 / 3) / (2 / 3)),
            math.log((1 / 3) / (1 / 3)),
            math.log(1 / 3 * 1),
            math.log(1 * 1),
            math.log(1 + 1 / 3),
            1,
            0,
        ],
        _key("buch", "book"): [0.0, 0.0, 0.0, 0.0, math.log(3), 0, 0],
    }
    # With the default minimum count, the rules with gaps seen in one sentence pair only,
    # "das [X,1] → a [X,1]" and "[X,1] haus → [X,1] house", are dropped, but the marginals
    # are summed before the filter: p(the [X,1] | das [X,1]) stays (2/3) / 1, not 1.
    dropped = {_key("das [X,1]", "a [X,1]"), _key("[X,1] haus", "[X,1] house")}
    for config, n_rules in [(ExtractionConfig(min_hierarchical_count=1), 11), (None, 9)]:
        fast = _by_key(list(_table(THREE, None, config).rules()))
        ref = _by_key(reference_rule_table(THREE, config))
        assert len(fast) == len(ref) == n_rules
        assert (n_rules == 11) == (dropped <= set(fast))
        for rules in (fast, ref):
            for key, values in expected.items():
                if key in dropped and n_rules == 9:
                    continue
                got = [rules[key].features[name] for name in RULE_FEATURES]
                assert got == pytest.approx(values, abs=1e-6), key
        assert fast[_key("das buch", "a book")].alignment == ((0, 0), (1, 1))


def test_lexical_weight_averages_links_and_uses_null() -> None:
    w = {("x", "a"): 0.5, ("x", "b"): 0.25, ("y", None): 0.1, ("z", "c"): 0.0}

    def prob(e: str, f: str | None) -> float:
        return w.get((e, f), 0.0)

    # x is linked to a and b: (0.5 + 0.25) / 2; y is unaligned: w(y|NULL); the gap is skipped
    src, tgt = ("a", "b", "[X,1]"), ("x", "[X,1]", "y")
    assert lexical_weight(src, tgt, [(0, 0), (1, 0)], prob) == pytest.approx(0.375 * 0.1)
    # a zero factor is floored
    assert lexical_weight(("c",), ("z",), [(0, 0)], prob) == MIN_LEX_PROB


LEX_CORPUS = [
    # das haus / the house .   ("." unaligned → NULL–.)
    AlignedPair(["das", "haus"], ["the", "house", "."], [(0, 0), (1, 1)]),
    # das ja / the   ("ja" unaligned → ja–NULL)
    AlignedPair(["das", "ja"], ["the"], [(0, 0)]),
    # das haus / a house
    AlignedPair(["das", "haus"], ["a", "house"], [(0, 0), (1, 1)]),
]


def test_lexical_table_by_hand() -> None:
    # links: das–the 2, das–a 1, haus–house 2, NULL–. 1, ja–NULL 1
    for table in (
        lexical_table_from_corpus(encode_corpus(LEX_CORPUS)),
        lexical_table_from_counts(lexical_counts_reference(LEX_CORPUS)),
    ):
        assert table.prob_e_given_f("the", "das") == pytest.approx(2 / 3)
        assert table.prob_e_given_f("a", "das") == pytest.approx(1 / 3)
        assert table.prob_e_given_f("house", "haus") == 1.0
        assert table.prob_e_given_f(".", None) == 1.0
        assert table.prob_e_given_f(None, "ja") == 1.0
        assert table.prob_f_given_e("das", "the") == 1.0
        assert table.prob_f_given_e(None, ".") == 1.0
        assert table.prob_e_given_f("house", "das") == 0.0
        assert table.prob_e_given_f("the", "unbekannt") == 0.0
        assert table.count("das", "the") == 2
        assert table.translations_of("das") == [
            ("the", pytest.approx(2 / 3)),
            ("a", pytest.approx(1 / 3)),
        ]
        assert table.translations_of("das", 1) == [("the", pytest.approx(2 / 3))]
        assert table.translations_of("ja") == [(None, 1.0)]
        assert table.sources_of("house") == [("haus", 1.0)]
        assert table.translations_of("unbekannt") == []
        assert table.top_translations(1)["das"] == [("the", pytest.approx(2 / 3))]
        assert len(table) == 5


def test_lexical_table_from_corpus_equals_the_reference_counts() -> None:
    rng = random.Random(3)
    pairs = [random_pair(rng) for _ in range(50)]
    fast = lexical_table_from_corpus(encode_corpus(pairs))
    counts = lexical_counts_reference(pairs)
    assert len(fast) == len(counts)
    for (f, e), c in counts.items():
        assert fast.count(f, e) == c
    for f in {f for f, _ in counts}:
        assert sum(p for _, p in fast.translations_of(f)) == pytest.approx(1.0)


def test_lexical_table_save_and_load(tmp_path: Path) -> None:
    table = lexical_table_from_corpus(encode_corpus(LEX_CORPUS))
    path = tmp_path / "bundle" / "lexical.npz"
    table.save(path)
    loaded = LexicalTable.load(path)
    for f in ["das", "haus", "ja", None]:
        assert loaded.translations_of(f) == table.translations_of(f)
    assert loaded.prob_f_given_e(None, ".") == 1.0
    with pytest.raises(MissingResourceError, match="no lexical table"):
        LexicalTable.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a table")
    with pytest.raises(DataFormatError, match=r"junk\.npz"):
        LexicalTable.load(tmp_path / "junk.npz")


def random_pair(rng: random.Random) -> AlignedPair:
    m, n = rng.randint(1, 6), rng.randint(1, 6)
    src = [rng.choice(["a", "b", "c", "d"]) for _ in range(m)]
    tgt = [rng.choice(["w", "x", "y", "z"]) for _ in range(n)]
    links = {(rng.randrange(m), rng.randrange(n)) for _ in range(rng.randint(0, m + n))}
    return AlignedPair(src, tgt, sorted(links))


@pytest.mark.parametrize(
    ("seed", "limit", "config"),
    [
        (0, None, ExtractionConfig()),
        (1, 3, ExtractionConfig()),
        (2, 1, ExtractionConfig()),
        (3, None, ExtractionConfig(tight_hierarchical=False, min_hierarchical_count=1)),
        (4, 3, ExtractionConfig(min_hierarchical_count=3)),
        (5, None, ExtractionConfig(tight_target=True)),
    ],
)
def test_fast_features_equal_reference_on_random_corpora(
    seed: int, limit: int | None, config: ExtractionConfig
) -> None:
    rng = random.Random(seed)
    pairs = [random_pair(rng) for _ in range(40)]
    pairs += rng.sample(pairs, 10)  # repeated pairs: rules with gaps pass the minimum count
    fast = _by_key(list(_table(pairs, limit, config).rules()))
    ref = _by_key(reference_rule_table(pairs, config, limit))
    assert set(fast) == set(ref)
    for key, rule in ref.items():
        assert fast[key].alignment == rule.alignment
        assert fast[key].features == pytest.approx(rule.features, rel=1e-5, abs=1e-5)


def _one_word_corpus(counts: dict[str, int]) -> list[AlignedPair]:
    return [AlignedPair(["das"], [e], [(0, 0)]) for e, c in counts.items() for _ in range(c)]


def test_pruning_keeps_the_30_best_target_sides() -> None:
    # das→t01 seen once, …, das→t40 seen 40 times: the 30 best are t11..t40
    pairs = _one_word_corpus({f"t{k:02d}": k for k in range(1, 41)})
    table = _table(pairs, 30)
    assert table.unpruned == 40
    kept = [r.target[0] for r in table.rules()]
    assert kept == [f"t{k:02d}" for k in range(40, 10, -1)]  # best p(e|f) first
    # p(e|f) is computed before pruning: c(das) = 1 + … + 40 = 820
    assert next(table.rules()).features["LogPEgivenF"] == pytest.approx(math.log(40 / 820))
    assert [r.target for r in reference_rule_table(pairs, limit=30)] == [
        (f"t{k:02d}",) for k in range(40, 10, -1)
    ]


def test_pruning_ties_go_to_the_first_target_side_in_string_order() -> None:
    pairs = _one_word_corpus({"c": 3, "b": 1, "a": 1})
    assert [r.target for r in _table(pairs, 2).rules()] == [("c",), ("a",)]
    assert [r.target for r in reference_rule_table(pairs, limit=2)] == [("c",), ("a",)]


def test_the_limit_keeps_the_most_probable_target_sides() -> None:
    assert Settings().rule_table_limit == RULE_TABLE_LIMIT  # the default of both
    pairs = _one_word_corpus({"c": 3, "b": 2, "a": 1})
    assert [r.target for r in _table(pairs, 2).rules()] == [("c",), ("b",)]
    corpus = encode_corpus(pairs)
    with pytest.raises(ConfigurationError, match="at least 1"):
        estimate_features(extract_rules(corpus), lexical_table_from_corpus(corpus), 0)


def test_glue_rules() -> None:
    glue, top = glue_rules()
    assert (glue.lhs, glue.source, glue.target) == ("S", ("[S,1]", "[X,2]"), ("[S,1]", "[X,2]"))
    assert glue.features == {GLUE: 1.0} and glue.arity == 2
    assert (top.lhs, top.source, top.target, top.features) == ("S", ("[X,1]",), ("[X,1]",), {})


def test_rule_table_converts_to_the_grammar_storage(tmp_path: Path) -> None:
    from service.mt.grammar import load_grammar, write_encoded

    table = _table(THREE)
    write_encoded(table.to_encoded(), tmp_path / "grammar")
    stored = {(r.source, r.target): r for r in load_grammar(tmp_path / "grammar").rules()}
    ours = _by_key(list(table.rules()))
    assert set(stored) == set(ours)
    for key, rule in ours.items():
        assert stored[key].alignment == rule.alignment
        assert stored[key].features == pytest.approx(rule.features, abs=1e-6)
    assert Counter(r.lhs for r in stored.values()) == Counter({"X": 9})

"""Hiero rule extraction: golden sets by hand, constraints, fractional counts, fast == reference."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from fractions import Fraction

import pytest

from service.errors import ConfigurationError, InvalidInputError
from service.mt.rules import is_nt
from service.mt.training.extract import (
    AlignedPair,
    ExtractionConfig,
    PhrasePair,
    alignment_code,
    alignment_from_code,
    best_alignment,
    encode_corpus,
    extract_rules,
    extract_rules_reference,
    initial_phrase_pairs,
    is_tight,
    min_count_filter_reference,
    sentence_counts_reference,
)

# er hat das haus gesehen / he has seen the house
#
#            he  has  seen  the  house
#   er       ■
#   hat           ■
#   das                      ■
#   haus                           ■
#   gesehen            ■
HAUS = AlignedPair(
    ["er", "hat", "das", "haus", "gesehen"],
    ["he", "has", "seen", "the", "house"],
    [(0, 0), (1, 1), (2, 3), (3, 4), (4, 2)],
)

# er hat es gesehen / he has seen it
#
#            he  has  seen  it
#   er       ■
#   hat           ■
#   es                       ■
#   gesehen            ■
ES = AlignedPair(
    ["er", "hat", "es", "gesehen"], ["he", "has", "seen", "it"], [(0, 0), (1, 1), (2, 3), (3, 2)]
)

X1, X2 = "[X,1]", "[X,2]"

# Chiang's Definition 2 read literally: loose phrases everywhere, no minimum count (the
# behaviour before tight_hierarchical / min_hierarchical_count existed)
LOOSE = ExtractionConfig(tight_hierarchical=False, min_hierarchical_count=1)


def _phrases(pair: AlignedPair, config: ExtractionConfig | None = None) -> set[PhrasePair]:
    return set(
        initial_phrase_pairs(
            len(pair.source), len(pair.target), set(pair.alignment), config or ExtractionConfig()
        )
    )


def _fast(pairs: list[AlignedPair], config: ExtractionConfig | None = None, **kw: int):
    return extract_rules(encode_corpus(pairs), config, **kw).as_dict()


def _rule(src: str, tgt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(src.split()), tuple(tgt.split())


def test_initial_phrase_pairs_of_the_haus_sentence_by_hand() -> None:
    expected = {
        PhrasePair(0, 1, 0, 1),  # er / he
        PhrasePair(1, 2, 1, 2),  # hat / has
        PhrasePair(2, 3, 3, 4),  # das / the
        PhrasePair(3, 4, 4, 5),  # haus / house
        PhrasePair(4, 5, 2, 3),  # gesehen / seen
        PhrasePair(0, 2, 0, 2),  # er hat / he has
        PhrasePair(2, 4, 3, 5),  # das haus / the house
        PhrasePair(2, 5, 2, 5),  # das haus gesehen / seen the house
        PhrasePair(1, 5, 1, 5),  # hat das haus gesehen / has seen the house
        PhrasePair(0, 5, 0, 5),  # the whole pair
    }
    assert _phrases(HAUS) == expected
    # hat das (targets has..the would include seen, aligned outside) is not consistent
    assert PhrasePair(1, 3, 1, 4) not in _phrases(HAUS)
    # with source spans of at most 2 words only the short ones remain
    short = ExtractionConfig(max_initial_source=2)
    assert _phrases(HAUS, short) == {p for p in expected if p.fe - p.fs <= 2}


def test_golden_rule_set_with_counts_and_alignments_of_a_four_word_pair() -> None:
    # Initial phrase pairs: P1 er/he, P2 hat/has, P3 es/it, P4 gesehen/seen, P5 er hat/he has,
    # P6 es gesehen/seen it, P7 hat es gesehen/has seen it, P8 the whole pair.
    # Rules per phrase (N instances, 1/N each): P1–P4 one each; P5: itself, X1 hat, er X1
    # (P1+P2 would be adjacent gaps) → 1/3; P6: itself, X1 gesehen, es X1 → 1/3; P7: itself,
    # gaps P2, P3, P4, P6, and P2+P4 → 1/6; P8: itself, gaps P1..P7, and P1+P3, P1+P4, P1+P6,
    # P2+P4, P5+P4 → 1/13.
    t, s, tw = Fraction(1, 3), Fraction(1, 6), Fraction(1, 13)
    expected = {
        _rule("er", "he"): (1, ((0, 0),)),
        _rule("hat", "has"): (1, ((0, 0),)),
        _rule("es", "it"): (1, ((0, 0),)),
        _rule("gesehen", "seen"): (1, ((0, 0),)),
        _rule("er hat", "he has"): (t, ((0, 0), (1, 1))),
        _rule("[X,1] hat", "[X,1] has"): (t, ((1, 1),)),
        _rule("er [X,1]", "he [X,1]"): (t + tw, ((0, 0),)),
        _rule("es gesehen", "seen it"): (t, ((0, 1), (1, 0))),
        _rule("[X,1] gesehen", "seen [X,1]"): (t, ((1, 0),)),
        _rule("es [X,1]", "[X,1] it"): (t, ((0, 1),)),
        _rule("hat es gesehen", "has seen it"): (s, ((0, 0), (1, 2), (2, 1))),
        _rule("[X,1] es gesehen", "[X,1] seen it"): (s + tw, ((1, 2), (2, 1))),
        _rule("hat [X,1] gesehen", "has seen [X,1]"): (s, ((0, 0), (2, 1))),
        _rule("hat es [X,1]", "has [X,1] it"): (s, ((0, 0), (1, 2))),
        _rule("hat [X,1]", "has [X,1]"): (s, ((0, 0),)),
        _rule("[X,1] es [X,2]", "[X,1] [X,2] it"): (s + tw, ((1, 2),)),
        _rule("er hat es gesehen", "he has seen it"): (tw, ((0, 0), (1, 1), (2, 3), (3, 2))),
        _rule("[X,1] hat es gesehen", "[X,1] has seen it"): (tw, ((1, 1), (2, 3), (3, 2))),
        _rule("er [X,1] es gesehen", "he [X,1] seen it"): (tw, ((0, 0), (2, 3), (3, 2))),
        _rule("er hat [X,1] gesehen", "he has seen [X,1]"): (tw, ((0, 0), (1, 1), (3, 2))),
        _rule("er hat es [X,1]", "he has [X,1] it"): (tw, ((0, 0), (1, 1), (2, 3))),
        _rule("er hat [X,1]", "he has [X,1]"): (tw, ((0, 0), (1, 1))),
        _rule("[X,1] hat [X,2] gesehen", "[X,1] has seen [X,2]"): (tw, ((1, 1), (3, 2))),
        _rule("[X,1] hat es [X,2]", "[X,1] has [X,2] it"): (tw, ((1, 1), (2, 3))),
        _rule("[X,1] hat [X,2]", "[X,1] has [X,2]"): (tw, ((1, 1),)),
        _rule("er [X,1] es [X,2]", "he [X,1] [X,2] it"): (tw, ((0, 0), (2, 3))),
    }
    for result in (_fast([ES], LOOSE), _reference_as_fast([ES], LOOSE)):
        assert set(result) == set(expected)
        for key, (count, alignment) in expected.items():
            assert result[key][0] == pytest.approx(float(count), abs=1e-12), key
            assert result[key][1] == alignment, key


def _reference_as_fast(
    pairs: list[AlignedPair], config: ExtractionConfig | None = None
) -> dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[float, tuple[tuple[int, int], ...]]]:
    config = config or ExtractionConfig()
    ref = min_count_filter_reference(
        extract_rules_reference(pairs, config), sentence_counts_reference(pairs, config), config
    )
    return {
        key: (sum(by_a.values()), best_alignment(by_a, config.max_initial_target))
        for key, by_a in ref.items()
    }


def test_the_haus_sentence_has_the_reordering_rules_and_no_adjacent_gaps() -> None:
    rules = _fast([HAUS], LOOSE)
    assert _rule("hat [X,1] gesehen", "has seen [X,1]") in rules
    assert _rule("[X,1] hat [X,2] gesehen", "[X,1] has seen [X,2]") in rules
    assert _rule("das haus", "the house") in rules
    assert not any(is_nt(a) and is_nt(b) for src, _ in rules for a, b in itertools.pairwise(src))
    assert len(rules) == len(_reference_as_fast([HAUS], LOOSE))
    # every word is aligned, so tight phrases change nothing; one sentence pair is below the
    # default minimum count of rules with gaps, so only the phrase rules remain
    assert _fast([HAUS], ExtractionConfig(min_hierarchical_count=1)) == rules
    assert _fast([HAUS]) == {k: v for k, v in rules.items() if not any(map(is_nt, k[0]))}


def test_unaligned_words_extend_phrases_on_both_sides() -> None:
    # das alte haus / the house .   ("alte" and "." unaligned)
    #          the  house  .
    #   das    ■
    #   alte
    #   haus        ■
    pair = AlignedPair(["das", "alte", "haus"], ["the", "house", "."], [(0, 0), (2, 1)])
    assert {p for p in _phrases(pair) if is_tight(p, set(pair.alignment))} == {
        PhrasePair(0, 1, 0, 1),
        PhrasePair(2, 3, 1, 2),
        PhrasePair(0, 3, 0, 2),
    }
    assert _phrases(pair) == {
        PhrasePair(0, 1, 0, 1),  # das / the
        PhrasePair(0, 2, 0, 1),  # das alte / the
        PhrasePair(2, 3, 1, 2),  # haus / house
        PhrasePair(2, 3, 1, 3),  # haus / house .
        PhrasePair(1, 3, 1, 2),  # alte haus / house
        PhrasePair(1, 3, 1, 3),  # alte haus / house .
        PhrasePair(0, 3, 0, 2),  # das alte haus / the house
        PhrasePair(0, 3, 0, 3),  # das alte haus / the house .
    }
    rules = _fast([pair], LOOSE)
    # "haus / house ." has one sub-phrase, "haus / house", whose removal leaves no aligned
    # terminal: the phrase yields one rule, with weight 1
    assert rules[_rule("haus", "house .")] == (1.0, ((0, 0),))
    assert rules[_rule("das alte", "the")] == (1.0, ((0, 0),))
    # "alte haus / house" yields itself and "alte [X,1]" would have no aligned terminal
    assert rules[_rule("alte haus", "house")] == (1.0, ((1, 0),))
    # "das alte haus / the house" has 5 instances: itself, [X,1] alte haus (gap das),
    # [X,1] haus (gap das alte), das alte [X,1] (gap haus), das [X,1] (gap alte haus);
    # "[X,1] alte [X,2]" has no aligned terminal and the other gap pairs are adjacent.
    # "das alte haus / the house ." has 7: itself, the same four gaps (target now ending in
    # "."), das alte [X,1] (gap haus / house .) and das [X,1] (gap alte haus / house .);
    # the gap "das alte haus / the house" would leave no aligned terminal.
    for (src, tgt), count, alignment in [
        (("das [X,1]", "the [X,1]"), 1 / 5 + 1 / 7, ((0, 0),)),
        (("das alte [X,1]", "the [X,1]"), 1 / 5 + 1 / 7, ((0, 0),)),
        (("[X,1] haus", "[X,1] house"), 1 / 5, ((1, 1),)),
        (("das [X,1]", "the [X,1] ."), 1 / 7, ((0, 0),)),
    ]:
        assert rules[_rule(src, tgt)][0] == pytest.approx(count, abs=1e-12)
        assert rules[_rule(src, tgt)][1] == alignment
    assert _rule("[X,1] alte [X,2]", "[X,1] [X,2]") not in rules
    assert not any(src == ("alte",) for src, _ in rules)  # never a phrase on its own
    assert rules == _reference_as_fast([pair], LOOSE)


def test_an_unaligned_only_rule_is_never_extracted() -> None:
    rules = _fast([AlignedPair(["das", "alte", "haus"], ["the", "house", "."], [(0, 0), (2, 1)])])
    assert all(alignment for _, alignment in rules.values())


def test_fractional_counts_on_two_sentences_by_hand() -> None:
    # "er hat / he has" and "er kommt / he comes", both monotone. Each sentence: the two
    # one-word phrases give one rule each (weight 1); the whole pair gives itself,
    # "[X,1] w2" and "er [X,1]" (weight 1/3 each; [X,1] [X,2] would have adjacent gaps).
    pairs = [
        AlignedPair(["er", "hat"], ["he", "has"], [(0, 0), (1, 1)]),
        AlignedPair(["er", "kommt"], ["he", "comes"], [(0, 0), (1, 1)]),
    ]
    expected = {
        _rule("er", "he"): 1 + 1,
        _rule("hat", "has"): 1,
        _rule("kommt", "comes"): 1,
        _rule("er hat", "he has"): 1 / 3,
        _rule("er kommt", "he comes"): 1 / 3,
        _rule("[X,1] hat", "[X,1] has"): 1 / 3,
        _rule("[X,1] kommt", "[X,1] comes"): 1 / 3,
        _rule("er [X,1]", "he [X,1]"): 1 / 3 + 1 / 3,
    }
    for rules in (_fast(pairs, LOOSE), _reference_as_fast(pairs, LOOSE)):
        assert {k: v[0] for k, v in rules.items()} == pytest.approx(expected, abs=1e-12)
    # by default a rule with gaps needs two sentence pairs: "[X,1] hat" and "[X,1] kommt"
    # were seen in one each; the counts of the kept rules do not change
    del expected[_rule("[X,1] hat", "[X,1] has")], expected[_rule("[X,1] kommt", "[X,1] comes")]
    for rules in (_fast(pairs), _reference_as_fast(pairs)):
        assert {k: v[0] for k, v in rules.items()} == pytest.approx(expected, abs=1e-12)


def test_long_phrases_only_yield_rules_with_gaps() -> None:
    words = ["a", "b", "c", "d", "e", "f", "g"]
    pair = AlignedPair(words, [w.upper() for w in words], [(k, k) for k in range(7)])
    rules = _fast([pair], LOOSE)
    assert max(len(src) for src, _ in rules if not any(map(is_nt, src))) == 5
    assert _rule("a [X,1] g", "A [X,1] G") in rules  # from the 7-word initial phrase pair
    assert _rule("a b c d e f", "A B C D E F") not in rules


def test_span_limits_apply_to_both_sides() -> None:
    # "ja" aligned to a 3-word target; with max_initial_target=2 it has no phrase
    pair = AlignedPair(["ja"], ["yes", "of", "course"], [(0, 0), (0, 2)])
    assert _fast([pair], ExtractionConfig(max_initial_target=2)) == {}
    assert _rule("ja", "yes of course") in _fast([pair])


def _random_pair(rng: random.Random, max_len: int = 7) -> AlignedPair:
    m, n = rng.randint(1, max_len), rng.randint(1, max_len)
    src = [rng.choice(["a", "b", "c", "d"]) for _ in range(m)]
    tgt = [rng.choice(["w", "x", "y", "z"]) for _ in range(n)]
    links = {(rng.randrange(m), rng.randrange(n)) for _ in range(rng.randint(0, m + n))}
    return AlignedPair(src, tgt, sorted(links))


CONFIGS = [
    ExtractionConfig(),
    LOOSE,
    ExtractionConfig(tight_hierarchical=False),
    ExtractionConfig(min_hierarchical_count=1),
    ExtractionConfig(max_initial_source=4, max_initial_target=4, max_rule_symbols=3),
    ExtractionConfig(
        max_initial_source=6,
        max_initial_target=5,
        max_rule_symbols=4,
        max_nonterminals=1,
        tight_hierarchical=False,
        min_hierarchical_count=3,
    ),
    ExtractionConfig(max_initial_source=3, max_initial_target=3, max_nonterminals=0),
    ExtractionConfig(tight_target=True),
    ExtractionConfig(tight_target=True, tight_hierarchical=False, min_hierarchical_count=1),
]


def test_target_tight_phrases_leave_unaligned_english_edges_out() -> None:
    """The loose phrase "tabelle ein . → sheet as a link ." (as a link unaligned) is a rule by
    default and not with ``tight_target``; the tight one is a rule either way."""
    pair = AlignedPair(["tabelle", "ein", "."], ["sheet", "as", "a", "link", "."], [(0, 0), (2, 4)])
    loose = extract_rules_reference([pair], ExtractionConfig())
    tight = extract_rules_reference([pair], ExtractionConfig(tight_target=True))
    key = ("tabelle", "ein", "."), ("sheet", "as", "a", "link", ".")
    assert key in loose and key in tight  # the whole pair: both edges aligned
    edge = ("tabelle", "ein"), ("sheet", "as", "a", "link")
    assert edge in loose and edge not in tight
    assert (("tabelle", "ein"), ("sheet",)) in tight
    every = ExtractionConfig(tight_target=True, min_hierarchical_count=1)
    assert set(extract_rules(encode_corpus([pair]), every).as_dict()) == set(tight)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("seed", "shards"), [(0, 1), (1, 3)])
def test_fast_equals_reference_on_random_pairs(
    config: ExtractionConfig, seed: int, shards: int
) -> None:
    rng = random.Random(seed)
    # few distinct words and repeated pairs, so that rules with gaps recur across pairs
    pairs = [_random_pair(rng) for _ in range(40)]
    pairs += rng.sample(pairs, 15)
    # tiny buffers and tables force many kernel restarts, table growth and merges
    counts = extract_rules(
        encode_corpus(pairs), config, shards=shards, buffer_rows=400, table_capacity=4
    )
    fast = counts.as_dict()
    ref = _reference_as_fast(pairs, config)
    assert set(fast) == set(ref)
    for key, (count, alignment) in ref.items():
        assert fast[key][0] == pytest.approx(count, abs=1e-9)
        assert fast[key][1] == alignment
    unfiltered = extract_rules_reference(pairs, config)
    sentences = sentence_counts_reference(pairs, config)
    assert counts.unfiltered == len(unfiltered) and counts.shards == shards
    if config.min_hierarchical_count > 1 and config.max_nonterminals:
        assert len(ref) < len(unfiltered)  # the filter did drop rules here
    # marginals over all rules, dropped ones included
    c_f: dict[tuple[str, ...], float] = defaultdict(float)
    c_e: dict[tuple[str, ...], float] = defaultdict(float)
    for (src, tgt), by_alignment in unfiltered.items():
        c_f[src] += sum(by_alignment.values())
        c_e[tgt] += sum(by_alignment.values())
    for r in range(len(counts)):
        src, tgt = counts.key(r)
        assert counts.sentences[r] == sentences[src, tgt]
        assert counts.source_marginal[counts.source_id[r]] == pytest.approx(c_f[src], abs=1e-9)
        assert counts.target_marginal[counts.target_id[r]] == pytest.approx(c_e[tgt], abs=1e-9)


def test_tight_phrases_and_the_minimum_count_by_hand() -> None:
    # A: das alte haus / the house .   ("alte" and "." unaligned), B = C: das haus / the house
    #          the  house  .               the  house
    #   das    ■                    das    ■
    #   alte                        haus        ■
    #   haus        ■
    a = AlignedPair(["das", "alte", "haus"], ["the", "house", "."], [(0, 0), (2, 1)])
    b = AlignedPair(["das", "haus"], ["the", "house"], [(0, 0), (1, 1)])
    # A's phrase pairs: tight T1 das/the, T2 haus/house, T3 das alte haus/the house; loose
    # das alte/the, haus/house ., alte haus/house, alte haus/house ., das alte haus/the house .
    # Each loose phrase pair gives only its phrase rule (weight 1). T3's gaps are tight: T1
    # gives "[X,1] alte haus", T2 "das alte [X,1]", T1+T2 leaves no aligned terminal: N = 3.
    # B: das/the, haus/house (1 each), das haus/the house, [X,1] haus, das [X,1] (1/3 each).
    third = Fraction(1, 3)
    before_filter = {
        # rule: (count, sentence pairs, alignment)
        _rule("das", "the"): (3, 3, ((0, 0),)),
        _rule("haus", "house"): (3, 3, ((0, 0),)),
        _rule("das alte", "the"): (1, 1, ((0, 0),)),
        _rule("haus", "house ."): (1, 1, ((0, 0),)),
        _rule("alte haus", "house"): (1, 1, ((1, 0),)),
        _rule("alte haus", "house ."): (1, 1, ((1, 0),)),
        _rule("das alte haus", "the house ."): (1, 1, ((0, 0), (2, 1))),
        _rule("das alte haus", "the house"): (third, 1, ((0, 0), (2, 1))),
        _rule("das haus", "the house"): (2 * third, 2, ((0, 0), (1, 1))),
        _rule("[X,1] haus", "[X,1] house"): (2 * third, 2, ((1, 1),)),
        _rule("das [X,1]", "the [X,1]"): (2 * third, 2, ((0, 0),)),
        _rule("[X,1] alte haus", "[X,1] house"): (third, 1, ((2, 1),)),  # dropped: 1 pair
        _rule("das alte [X,1]", "the [X,1]"): (third, 1, ((0, 0),)),  # dropped: 1 pair
    }
    dropped = {_rule("[X,1] alte haus", "[X,1] house"), _rule("das alte [X,1]", "the [X,1]")}
    pairs = [a, b, b]
    config = ExtractionConfig()
    assert config.tight_hierarchical and config.min_hierarchical_count == 2
    ref = extract_rules_reference(pairs, config)
    assert set(ref) == set(before_filter)
    assert sentence_counts_reference(pairs, config) == {k: v[1] for k, v in before_filter.items()}
    counts = extract_rules(encode_corpus(pairs), config, shards=2)
    assert counts.unfiltered == 13
    for result in (_reference_as_fast(pairs, config), counts.as_dict()):
        assert set(result) == set(before_filter) - dropped
        for key, (count, _, alignment) in before_filter.items():
            if key not in dropped:
                assert result[key] == (pytest.approx(float(count), abs=1e-12), alignment), key
    # loose gaps would add, among others, "das [X,1] / the [X,1] ." (gap "haus / house .")
    # and "das [X,1] / the [X,1]" from A (gap "alte haus / house")
    loose = _fast(pairs, LOOSE)
    assert _rule("das [X,1]", "the [X,1] .") in loose and len(loose) > len(before_filter)
    assert loose[_rule("das [X,1]", "the [X,1]")][0] > 2 / 3


def test_sentence_counts_count_pairs_not_instances() -> None:
    # "a [X,1] / x [X,1]" comes from both "a b" phrases of one pair: 2 instances, 1 pair
    pair = AlignedPair(["a", "b", "a", "b"], ["x", "y", "x", "y"], [(k, k) for k in range(4)])
    key = _rule("a [X,1]", "x [X,1]")
    assert sentence_counts_reference([pair])[key] == 1
    assert key not in _fast([pair])
    counts = extract_rules(encode_corpus([pair, pair]))
    r = next(r for r in range(len(counts)) if counts.key(r) == key)
    assert counts.sentences[r] == 2
    assert counts.as_dict()[key] == _reference_as_fast([pair, pair])[key]


def test_constraints_hold_on_random_pairs() -> None:
    rng = random.Random(7)
    pairs = [_random_pair(rng, 9) for _ in range(60)]
    rules = _fast(pairs)
    assert rules
    for (src, tgt), (count, alignment) in rules.items():
        gaps = [s for s in src if is_nt(s)]
        assert len(src) <= 5 and len(gaps) <= 2
        assert gaps in ([], ["[X,1]"], ["[X,1]", "[X,2]"])  # numbered in source order
        assert sorted(t for t in tgt if is_nt(t)) == gaps  # co-indexed
        assert not any(is_nt(a) and is_nt(b) for a, b in itertools.pairwise(src))
        assert alignment  # at least one aligned terminal pair
        assert all(not is_nt(src[i]) and not is_nt(tgt[j]) for i, j in alignment)
        assert count > 0


def test_most_frequent_alignment_is_kept() -> None:
    # "a a / x" seen twice with a-x on the first word, once on the second
    first = AlignedPair(["a", "a"], ["x"], [(0, 0)])
    second = AlignedPair(["a", "a"], ["x"], [(1, 0)])
    rules = _fast([first, first, second])
    assert rules[_rule("a a", "x")][1] == ((0, 0),)
    # a tie goes to the smaller code: (0, 0) has code 1, (1, 0) code 2**10
    assert _fast([first, second])[_rule("a a", "x")][1] == ((0, 0),)
    assert alignment_code([(1, 0)], 10) == 1024
    assert alignment_from_code(alignment_code([(0, 3), (4, 9)], 10), 10) == ((0, 3), (4, 9))


def test_bad_input_is_reported() -> None:
    with pytest.raises(InvalidInputError, match="link 2-0 is outside"):
        encode_corpus([AlignedPair(["a", "b"], ["x"], [(2, 0)])])
    with pytest.raises(InvalidInputError, match="empty or blank source token"):
        encode_corpus([AlignedPair(["a", ""], ["x"], [(0, 0)])])
    with pytest.raises(InvalidInputError, match="outside"):
        extract_rules_reference([AlignedPair(["a"], ["x"], [(0, 1)])])
    with pytest.raises(ConfigurationError, match="64-bit"):
        ExtractionConfig(max_rule_symbols=7)
    with pytest.raises(ConfigurationError, match="buffer_rows"):
        extract_rules(encode_corpus([ES]), buffer_rows=5)
    with pytest.raises(ConfigurationError, match="min_hierarchical_count=0"):
        ExtractionConfig(min_hierarchical_count=0)
    with pytest.raises(ConfigurationError, match="shards=0"):
        extract_rules(encode_corpus([ES]), shards=0)


def test_empty_corpus_and_unaligned_pairs_give_no_rules() -> None:
    assert len(extract_rules(encode_corpus([]))) == 0
    assert _fast([AlignedPair(["a"], ["x"], [])]) == {}
    assert extract_rules_reference([AlignedPair([], ["x"], [])]) == {}

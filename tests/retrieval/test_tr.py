"""TR: Algorithm 1 worked out by hand on a three-sentence pool, the cosine against a direct
computation, the top-M approximation, the edit similarity over characters against the TR
paper's over words (and rapidfuzz against the textbook dynamic programme), and N-best
translations of the toy bundle."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from service.errors import InvalidInputError
from service.index import build_pool_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.explain import TrExplanation
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer
from service.retrieval.tr import (
    LevenshteinUnit,
    TranslationRetrieval,
    levenshtein_distance_reference,
    levenshtein_similarity,
    levenshtein_similarity_reference,
)

LG2 = math.log10(2)
A = math.log10(3 / 2) + 1  # query weight of a term in 2 of the 3 pool sentences
B = math.log10(3) + 1  # ... in 1 of the 3


def pool_index(root: Path, sentences: list[str]) -> InvertedIndex:
    src = root / "pool.tsv"
    src.write_text("".join(f"p{i + 1}\t{s}\n" for i, s in enumerate(sentences)))
    build_pool_index(src, root / "ix", tokenizer="regex")
    return InvertedIndex.load(root / "ix")


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> InvertedIndex:
    return pool_index(
        tmp_path_factory.mktemp("pool"), ["the big house", "a big home", "the red car"]
    )


T1 = ("the", "big", "house")
T2 = ("a", "big", "home")


def test_cosines_by_hand(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=False)
    got = {three.doc_id(c.docno): c.cosine for c in tr.candidates(T1)}
    # every tf is 1, so every document weight is lg 2 and every document norm sqrt(3)·lg 2
    q1 = math.sqrt(2 * A * A + B * B)
    assert got == pytest.approx(
        {
            "p1": (2 * A + B) * LG2 / (q1 * math.sqrt(3) * LG2),  # the, big, house
            "p2": A * LG2 / (q1 * math.sqrt(3) * LG2),  # big
            "p3": A * LG2 / (q1 * math.sqrt(3) * LG2),  # the
        }
    )
    got2 = {three.doc_id(c.docno): c.cosine for c in tr.candidates(T2)}
    q2 = math.sqrt(A * A + 2 * B * B)
    assert set(got2) == {"p1", "p2"}  # p3 shares no term with "a big home"
    assert got2["p2"] == pytest.approx((A + 2 * B) / (q2 * math.sqrt(3)))


def test_algorithm_1_by_hand_without_levenshtein(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=False)
    result = tr.score_translations([(T1, 0.75), (T2, 0.25)])
    # per translation, Pr(d|t) = cos normalised over its candidates (the query norm cancels):
    # t1: p1 (2A+B)/(4A+B), p2 A/(4A+B), p3 A/(4A+B); t2: p1 A/(2A+2B), p2 (A+2B)/(2A+2B)
    expected = {
        "p1": 0.75 * (2 * A + B) / (4 * A + B) + 0.25 * A / (2 * A + 2 * B),
        "p2": 0.75 * A / (4 * A + B) + 0.25 * (A + 2 * B) / (2 * A + 2 * B),
        "p3": 0.75 * A / (4 * A + B),
    }
    got = {three.doc_id(d): s for d, s in result.scores.items()}
    assert got == pytest.approx(expected)
    assert sum(got.values()) == pytest.approx(1.0)
    p2 = three.docno("p2")
    assert [f.translation for f in result.found_by[p2]] == ["the big house", "a big home"]


def test_algorithm_1_by_hand_with_levenshtein(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=True, levenshtein_unit="word")
    result = tr.score_translations([(T1, 0.75), (T2, 0.25)])
    # the TR paper's E over words:
    # E(t1,p1) = 1, E(t1,p2) = E(t1,p3) = 1 - 2/3 (two substitutions);
    # E(t2,p1) = 1/3, E(t2,p2) = 1
    z1 = (2 * A + B) + A / 3 + A / 3
    z2 = A / 3 + (A + 2 * B)
    expected = {
        "p1": 0.75 * (2 * A + B) / z1 + 0.25 * (A / 3) / z2,
        "p2": 0.75 * (A / 3) / z1 + 0.25 * (A + 2 * B) / z2,
        "p3": 0.75 * (A / 3) / z1,
    }
    got = {three.doc_id(d): s for d, s in result.scores.items()}
    assert got == pytest.approx(expected)


def test_algorithm_1_by_hand_with_levenshtein_over_characters(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=True)  # E over characters, the default
    result = tr.score_translations([(T1, 0.75), (T2, 0.25)])
    # "the big house" (13 characters) against "a big home" (10): "the" -> "a" 3 edits,
    # "house" -> "home" 2; against "the red car" (11): "big" -> "red" 3, "house" -> "car"
    # 5 (3 substitutions, 2 deletions); "a big home" against "the big house" as above
    e_t1_p2, e_t1_p3, e_t2_p1 = 1 - 5 / 13, 1 - 8 / 13, 1 - 5 / 13
    z1 = (2 * A + B) + A * e_t1_p2 + A * e_t1_p3
    z2 = A * e_t2_p1 + (A + 2 * B)
    expected = {
        "p1": 0.75 * (2 * A + B) / z1 + 0.25 * A * e_t2_p1 / z2,
        "p2": 0.75 * A * e_t1_p2 / z1 + 0.25 * (A + 2 * B) / z2,
        "p3": 0.75 * A * e_t1_p3 / z1,
    }
    got = {three.doc_id(d): s for d, s in result.scores.items()}
    assert got == pytest.approx(expected)
    p3 = three.docno("p3")
    assert result.found_by[p3][0].levenshtein == pytest.approx(5 / 13, abs=1e-6)


def test_characters_rank_the_inflected_reference_first(tmp_path: Path) -> None:
    """The translation has the wrong form of the verb: over words the reference and the
    sentence with another verb are one substitution away and tie (the earlier wins); over
    characters "delete" -> "deleting" is 3 edits, "delete" -> "renaming" 7."""
    index = pool_index(tmp_path, ["renaming a module or dialog", "deleting a module or dialog"])
    t = ("delete", "a", "module", "or", "dialog")  # 25 characters, the pool sentences 27
    # both share a, module, or, dialog (df 2, weight lg(2/2) + 1 = 1; "delete" is in no pool
    # sentence); 5 terms of tf 1 in each: cos = 4 lg 2 / (2 · sqrt(5) lg 2)
    cos = 2 / math.sqrt(5)
    paper = TranslationRetrieval(index, levenshtein_unit="word").score_translations([(t, 1.0)])
    assert {index.doc_id(d): s for d, s in paper.scores.items()} == pytest.approx(
        {"p1": cos * 4 / 5, "p2": cos * 4 / 5}
    )
    tr = TranslationRetrieval(index)
    result = tr.score_translations([(t, 1.0)])
    assert {index.doc_id(d): s for d, s in result.scores.items()} == pytest.approx(
        {"p1": cos * 20 / 27, "p2": cos * 24 / 27}
    )
    ranked = sorted(result.scores.items(), key=lambda ds: (-ds[1], ds[0]))
    assert [index.doc_id(d) for d, _ in ranked] == ["p2", "p1"]
    assert tr.signature_parts()["E"] == "char"
    assert TranslationRetrieval(index, levenshtein_unit="word").signature_parts()["E"] == "word"
    with pytest.raises(InvalidInputError):
        TranslationRetrieval(index, levenshtein_unit="syllable")  # type: ignore[arg-type]


def test_algorithm_2_is_the_unnormalised_one_best(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=True, levenshtein_unit="word")
    result = tr.score_translations([(T2, 1.0)])
    q2 = math.sqrt(A * A + 2 * B * B)
    got = {three.doc_id(d): s for d, s in result.scores.items()}
    assert got == pytest.approx(
        {"p1": A / (q2 * math.sqrt(3)) / 3, "p2": (A + 2 * B) / (q2 * math.sqrt(3))}
    )


def test_top_m_keeps_the_best_by_cosine(three: InvertedIndex) -> None:
    tr = TranslationRetrieval(three, levenshtein=False, max_candidates=1)
    result = tr.score_translations([(T1, 0.75), (T2, 0.25)])
    # each translation keeps only its best candidate, which then gets all of its mass
    assert {three.doc_id(d): s for d, s in result.scores.items()} == pytest.approx(
        {"p1": 0.75, "p2": 0.25}
    )


def test_levenshtein_similarity() -> None:
    assert levenshtein_similarity(["a", "b", "c"], ["a", "c"]) == pytest.approx(2 / 3)
    assert levenshtein_similarity([], []) == 1.0
    assert levenshtein_similarity(["x"], []) == 0.0
    assert levenshtein_similarity(["ab", "c"], ["a", "bc"]) == 0.0  # words, not characters
    # characters of the tokens joined by spaces: "ab c" -> "a bc" is 2 edits of 4
    assert levenshtein_similarity(["ab", "c"], ["a", "bc"], "char") == pytest.approx(1 / 2)
    assert levenshtein_similarity(["use"], ["using"], "char") == pytest.approx(2 / 5)
    assert levenshtein_similarity(["use"], ["using"], "word") == 0.0
    assert levenshtein_similarity([], [], "char") == 1.0
    assert levenshtein_similarity(["x"], [], "char") == 0.0


def test_levenshtein_distance_reference_by_hand() -> None:
    assert levenshtein_distance_reference("kitten", "sitting") == 3
    assert levenshtein_distance_reference("", "abc") == 3
    assert levenshtein_distance_reference("abc", "") == 3
    assert levenshtein_distance_reference("flaw", "lawn") == 2
    assert levenshtein_distance_reference(["a", "b"], ["b", "a"]) == 2


@pytest.mark.parametrize("unit", ["char", "word"])
def test_rapidfuzz_equals_the_reference(unit: LevenshteinUnit) -> None:
    rng = random.Random(11)
    words = ["a", "ab", "b", "ba", "use", "using", "中文", "@-@", ",", "."]
    for _ in range(500):
        a = [rng.choice(words) for _ in range(rng.randint(0, 8))]
        b = [rng.choice(words) for _ in range(rng.randint(0, 8))]
        assert levenshtein_similarity(a, b, unit) == levenshtein_similarity_reference(a, b, unit)


def direct_cosine(t: list[str], d: list[str], pool: list[list[str]]) -> float:
    n = len(pool)
    df = Counter(w for s in pool for w in set(s))
    q = {w: math.log10(n / df[w]) + 1 for w in set(t) if df[w]}
    dv = {w: math.log10(c + 1) for w, c in Counter(d).items()}
    num = sum(q[w] * dv[w] for w in q if w in dv)
    den = math.sqrt(sum(v * v for v in q.values()) * sum(v * v for v in dv.values()))
    return num / den if den else 0.0


@pytest.mark.parametrize("unit", ["char", "word"])
def test_cosine_and_scores_equal_a_direct_computation(
    tmp_path: Path, unit: LevenshteinUnit
) -> None:
    rng = random.Random(7)
    words = ["a", "b", "c", "d", "e", "f", "g", "h", "ab", "abc"]
    pool = [[rng.choice(words) for _ in range(rng.randint(1, 7))] for _ in range(30)]
    index = pool_index(tmp_path, [" ".join(s) for s in pool])
    tr = TranslationRetrieval(
        index, levenshtein=True, lambda1=1.0, lambda2=2.0, levenshtein_unit=unit
    )
    for _ in range(10):
        translations = []
        for _k in range(3):
            t = [rng.choice([*words, "zz"]) for _ in range(rng.randint(1, 5))]
            translations.append((tuple(t), 1 / 3))
        expected: Counter[str] = Counter()
        for t, p in translations:
            probs = {}
            for i, d in enumerate(pool):
                c = direct_cosine(list(t), d, pool)
                if c > 0:
                    e = levenshtein_similarity_reference(t, d, unit)
                    probs[f"p{i + 1}"] = c * e**2
            z = sum(probs.values())
            for d_id, v in probs.items():
                if z > 0 and v > 0:
                    expected[d_id] += p * v / z
        got = {index.doc_id(d): s for d, s in tr.score_translations(translations).scores.items()}
        assert got == pytest.approx(dict(expected))


def test_nbest_translations_of_the_toy_bundle(toy_bundle: ModelBundle, tmp_path: Path) -> None:
    index = pool_index(
        tmp_path,
        ["the house is big .", "the home is large .", "the dog is old .", "a big tree ."],
    )
    scorer = make_scorer("tr", index, toy_bundle, nbest=5)
    assert isinstance(scorer, TranslationRetrieval)
    q = decode_query(toy_bundle.decoder(), "Das Haus ist groß.", "de")
    translations = scorer.translations(q)
    # the forest holds house/home × big/large: four distinct strings, fewer than N = 5
    assert {" ".join(t[1:4]) for t, _ in translations} == {
        "house is big",
        "home is large",
        "house is large",
        "home is big",
    }
    assert len(translations) == 4
    assert sum(p for _, p in translations) == pytest.approx(1.0)
    assert [p for _, p in translations] == sorted((p for _, p in translations), reverse=True)
    assert translations[0][0] == ("the", "house", "is", "big", ".")
    ranking = scorer.rank(q, 3, explain=True)
    assert ranking.hits[0].doc_id == "p1"
    expl = ranking.hits[0].explanation
    assert isinstance(expl, TrExplanation)
    assert expl.found_by[0].translation == "the house is big ."
    assert expl.matched_terms() == []
    assert "N:5|lambda1:1.0|lambda2:1.0|M:1000|E:char" in ranking.signature
    # two sentences: the beam combines the per-sentence lists into whole translations
    q2 = decode_query(toy_bundle.decoder(), "Das Haus ist groß. Ein Baum.", "de")
    both = scorer.translations(q2)
    assert both[0][0] == ("the", "house", "is", "big", ".", "a", "tree", ".")
    assert sum(p for _, p in both) == pytest.approx(1.0)

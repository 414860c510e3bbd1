"""PSQ: word links of derivations, n-best probabilities by hand, interpolation and pruning,
expected-count BM25 against a brute-force computation, and the end-to-end scorer."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from service.forest.hypergraph import DerivationNode, HypergraphBuilder
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.mt.grammar import Grammar, GrammarBuilder, load_grammar
from service.mt.rules import PASS_THROUGH, WORD_PENALTY, Rule
from service.retrieval.links import AlignedDerivation, RuleLinks, derivation_links
from service.retrieval.psq import (
    ProbabilisticStructuredQuery,
    StructuredTerm,
    interpolate,
    nbest_table,
    prune,
    psq_scores,
    structured_query,
)
from service.retrieval.query import decode_query
from service.retrieval.runner import make_scorer
from tests.conftest import TOY_DOCS

E = math.e

# --- word links of a whole derivation -----------------------------------------------------


@pytest.fixture(scope="module")
def tiny_grammar(tmp_path_factory: pytest.TempPathFactory) -> Grammar:
    b = GrammarBuilder()
    b.add(Rule("X", ("haus",), ("house",), alignment=((0, 0),)))
    b.add(Rule("X", ("maria",), ("mary",), alignment=((0, 0),)))
    b.add(Rule("X", ("das", "[X,1]"), ("the", "[X,1]"), alignment=((0, 0),)))
    # reordering: "[X,1] von [X,2]" -> "[X,2] 's [X,1]"
    b.add(Rule("X", ("[X,1]", "von", "[X,2]"), ("[X,2]", "'s", "[X,1]"), alignment=((1, 1),)))
    path = tmp_path_factory.mktemp("grammar") / "g"
    b.write(path)
    return load_grammar(path)


def test_links_follow_gaps_and_reordering(tiny_grammar: Grammar) -> None:
    g = tiny_grammar

    def rid(*source: str) -> int:
        (r,) = g.rules_for_source(source)
        return r

    # "das haus von maria xyz": xyz is unknown and passed through
    hb = HypergraphBuilder()
    x12 = hb.add_node("X", (1, 2))
    e_haus = hb.add_edge(x12, (), ("house",), {}, rule_id=rid("haus"))
    x02 = hb.add_node("X", (0, 2))
    e_das = hb.add_edge(x02, (x12,), ("the", 0), {}, rule_id=rid("das", "[X,1]"))
    x34 = hb.add_node("X", (3, 4))
    e_maria = hb.add_edge(x34, (), ("mary",), {}, rule_id=rid("maria"))
    x04 = hb.add_node("X", (0, 4))
    e_von = hb.add_edge(x04, (x02, x34), (1, "'s", 0), {}, rule_id=rid("[X,1]", "von", "[X,2]"))
    x45 = hb.add_node("X", (4, 5))
    e_xyz = hb.add_edge(x45, (), ("xyz",), {PASS_THROUGH: 1.0, WORD_PENALTY: 1.0})
    top = hb.add_node("TOP", (0, 5))
    e_top = hb.add_edge(top, (x04, x45), (0, 1), {})
    hg = hb.build(top)
    tree = DerivationNode(
        e_top,
        (
            DerivationNode(
                e_von,
                (DerivationNode(e_das, (DerivationNode(e_haus),)), DerivationNode(e_maria)),
            ),
            DerivationNode(e_xyz),
        ),
    )
    target, links = derivation_links(hg, tree, RuleLinks(g))
    assert target == ("mary", "'s", "the", "house", "xyz")
    # das→the, haus→house, von→'s, maria→mary, xyz→xyz
    assert links == ((0, 2), (1, 3), (2, 1), (3, 0), (4, 4))


def test_links_of_the_toy_bundle_are_the_diagonal(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    q = decode_query(toy_bundle.decoder(), "Das Hund ist klein.", "de")
    scorer = make_scorer("psq", toy_index, toy_bundle, nbest=1)
    assert isinstance(scorer, ProbabilisticStructuredQuery)
    (best,) = scorer.nbest_derivations(q)[0]
    assert best.target == ("the", "dog", "is", "small", ".")
    assert best.links == ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4))


# --- n-best probabilities by hand ------------------------------------------------------------


def test_hand_worked_nbest_list() -> None:
    source = ("das", "haus")
    derivations = [
        AlignedDerivation(0.0, ("the", "house"), ((0, 0), (1, 1))),
        AlignedDerivation(-1.0, ("the", "home"), ((0, 0), (1, 1))),
        # "das" unaligned; "haus" aligned to two words, each gets half
        AlignedDerivation(-2.0, ("house", "home"), ((1, 0), (1, 1))),
    ]
    table, qtf = nbest_table([(source, derivations)])
    z = 1 + E**-1 + E**-2  # posteriors e^0/z, e^-1/z, e^-2/z
    assert qtf == {"das": 1, "haus": 1}
    assert table["das"] == pytest.approx({"the": (1 + E**-1) / z})
    assert table["haus"] == pytest.approx(
        {"house": (1 + E**-2 / 2) / z, "home": (E**-1 + E**-2 / 2) / z}
    )
    assert sum(table["das"].values()) < 1
    assert sum(table["haus"].values()) == pytest.approx(1.0)


def test_repeated_source_word_is_averaged_over_its_occurrences() -> None:
    source = ("das", "das")
    derivations = [
        AlignedDerivation(0.0, ("the", "that"), ((0, 0), (1, 1))),
        AlignedDerivation(0.0, ("the",), ((1, 0),)),
    ]
    table, qtf = nbest_table([(source, derivations)])
    # position 0: the 1/2 (second derivation leaves it unaligned); position 1: that 1/2, the 1/2
    assert qtf == {"das": 2}
    assert table["das"] == pytest.approx({"the": (0.5 + 0.5) / 2, "that": 0.5 / 2})


def test_interpolation_and_pruning_by_hand() -> None:
    nbest = {"house": 0.8, "home": 0.2}
    lexical = {"house": 0.5, "home": 0.3, "building": 0.1}
    mixed = interpolate(nbest, lexical, 0.4)
    assert mixed == pytest.approx(
        {"house": 0.4 * 0.8 + 0.6 * 0.5, "home": 0.4 * 0.2 + 0.6 * 0.3, "building": 0.6 * 0.1}
    )  # 0.62, 0.26, 0.06
    assert prune(mixed, 0.0, 1.0) == mixed
    assert prune(mixed, 0.1, 1.0) == pytest.approx({"house": 0.62, "home": 0.26})
    assert prune(mixed, 0.0, 0.6) == pytest.approx({"house": 0.62})  # 0.62 reaches 0.6
    assert prune(mixed, 0.0, 0.7) == pytest.approx({"house": 0.62, "home": 0.26})
    assert interpolate({}, lexical, 0.4) == lexical  # only one side knows the word
    assert interpolate(nbest, {}, 0.4) == nbest


def test_probabilities_sum_to_at_most_one_per_source_term(
    toy_bundle: ModelBundle, toy_index: InvertedIndex
) -> None:
    scorer = make_scorer("psq", toy_index, toy_bundle, nbest=200)
    assert isinstance(scorer, ProbabilisticStructuredQuery)
    for text in ("Das Haus ist groß.", "Ein Auto ist rot. Das Haus.", "Das Haus xyzzy ist alt."):
        q = decode_query(toy_bundle.decoder(), text, "de")
        terms = scorer.structured(q)
        assert terms
        for t in terms:
            assert 0 < sum(t.translations.values()) <= 1 + 1e-9, t
    # random alignments: still at most one per source word
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 4)
        derivs = []
        for _k in range(rng.randint(1, 6)):
            m = rng.randint(1, 5)
            links = {(rng.randrange(n), rng.randrange(m)) for _ in range(rng.randint(0, 6))}
            words = tuple(rng.choice("abcde") for _ in range(m))
            derivs.append(AlignedDerivation(rng.uniform(-5, 0), words, tuple(sorted(links))))
        source = tuple(rng.choice("xyz") for _ in range(n))
        table, _ = nbest_table([(source, derivs)])
        for dist in table.values():
            assert sum(dist.values()) <= 1 + 1e-9
        lex = {"a": 0.5, "q": 0.25}
        for f in table:
            mixed = prune(interpolate(table[f], lex, rng.random()), 0.0, 1.0)
            assert sum(mixed.values()) <= 1 + 1e-9


# --- expected tf / df BM25 -------------------------------------------------------------------


def brute_force_psq(
    terms: list[StructuredTerm], docs: list[list[str]], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    n = len(docs)
    avdl = sum(map(len, docs)) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for term in terms:
            etf = sum(p * tf[e] for e, p in term.translations.items())
            edf = sum(p * df[e] for e, p in term.translations.items())
            if etf == 0:
                continue
            rsj = max(0.0, math.log((n - edf + 0.5) / (edf + 0.5)))
            s += term.qtf * rsj * etf / (k1 * ((1 - b) + b * len(d) / avdl) + etf)
        out.append(s)
    return out


def test_expected_counts_equal_brute_force(toy_index: InvertedIndex) -> None:
    terms = [
        StructuredTerm("haus", 1, {"house": 0.6, "home": 0.3, "building": 0.05}),
        StructuredTerm("groß", 2, {"big": 0.5, "large": 0.4}),
        StructuredTerm("das", 1, {"the": 1.0}),  # in most documents: rsj floored to 0
        StructuredTerm("xyz", 1, {"notaword": 1.0}),
    ]
    w = toy_index.title_weight  # the title counts w times (BM25F)
    docs = [toy_index.analyze(d.title) * w + toy_index.analyze(d.text) for d in TOY_DOCS]
    expected = brute_force_psq(terms, docs)
    scores, reached = psq_scores(toy_index, terms)
    for i, d in enumerate(TOY_DOCS):
        assert scores[toy_index.docno(d.id)] == pytest.approx(expected[i], abs=1e-5), d.id
    assert {TOY_DOCS[i].id for i in range(len(docs)) if expected[i] > 0} <= {
        toy_index.doc_id(int(d)) for d in reached
    }


def test_a_one_to_one_table_is_plain_bm25(toy_index: InvertedIndex) -> None:
    terms = [StructuredTerm(w, 1, {w: 1.0}) for w in ("big", "house", "old")]
    scores, _ = psq_scores(toy_index, terms)
    plain = toy_index.bm25_scores(["big", "house", "old"])
    assert scores == pytest.approx(plain, abs=1e-6)


def test_scorer_end_to_end(toy_bundle: ModelBundle, toy_index: InvertedIndex) -> None:
    scorer = make_scorer("psq", toy_index, toy_bundle, nbest=100)
    assert isinstance(scorer, ProbabilisticStructuredQuery)
    q = decode_query(toy_bundle.decoder(), "Das Haus ist groß.", "de")
    ranking = scorer.rank(q, 8, explain=True)
    ids = [h.doc_id for h in ranking.hits]
    # d1 has house and big; d2 has the alternative translation home; DT would not find d2
    assert ids[:2] == ["d1", "d2"]
    expl = ranking.hits[1].explanation
    assert expl is not None
    assert "home" in expl.to_json()["terms"]["haus"]
    assert "home" in expl.matched_terms()
    assert "n:100|lambda:0.4|L:0.0|C:1.0" in ranking.signature
    # the same numbers as the structured query scored by the brute force
    terms = scorer.structured(q)
    w = toy_index.title_weight  # the title counts w times (BM25F)
    docs = [toy_index.analyze(d.title) * w + toy_index.analyze(d.text) for d in TOY_DOCS]
    expected = dict(zip([d.id for d in TOY_DOCS], brute_force_psq(terms, docs), strict=True))
    for h in ranking.hits:
        assert h.score == pytest.approx(expected[h.doc_id], abs=1e-5)


def test_unknown_words_pass_through(toy_bundle: ModelBundle) -> None:
    table, qtf = nbest_table([(("xyzzy",), [AlignedDerivation(0.0, ("xyzzy",), ((0, 0),))])])
    terms = structured_query(table, qtf, toy_bundle.lexical, 0.4, 0.0, 1.0)
    assert terms == [StructuredTerm("xyzzy", 1, {"xyzzy": 1.0})]
    # known to neither: dropped
    assert structured_query({}, {"qqq": 1}, toy_bundle.lexical, 0.4, 0.0, 1.0) == []

"""The alternatives a forest offers for each source word and the searcher's pins and blocks,
checked against every derivation of a hand-made forest enumerated by brute force, and through
a decoded query of the toy bundle to the methods that rank with it."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from service.core.jit import Engine
from service.errors import InvalidInputError
from service.forest.hypergraph import HypergraphBuilder
from service.forest.inference import covered_positions
from service.mt.bundle import ModelBundle
from service.mt.decoder.base import DecodeStats, Forest
from service.mt.rules import GLUE, nt, target_yield
from service.retrieval.base import DecodedQuery, one_best
from service.retrieval.choices import Choices, alternatives, apply_choices, word_options
from service.retrieval.query import decode_query
from tests.forest.forests import TOY_WEIGHTS, P, brute_force, toy_forest

TOKENS = ("das", "haus", "brennt")
ENGINES = pytest.mark.parametrize("engine", ["reference", "compiled"])


def toy_query() -> DecodedQuery:
    hg = toy_forest()
    forest = Forest(TOKENS, hg, 0.0, DecodeStats(), use_lm=False)
    return DecodedQuery("q", "das Haus brennt", "de", (TOKENS,), (forest,), TOY_WEIGHTS, "toy")


def reference_options(query: DecodedQuery) -> list[tuple[float, dict[str, float]]]:
    """Each position's posterior of being translated alone, and of each content English it is
    then said as, summed over every derivation (the slow, obviously correct version)."""
    hg = query.forests[0].hypergraph
    covered = covered_positions(hg)
    found = brute_force(hg, dict(query.weights))
    z = sum(math.exp(s) for s, _, _ in found)
    alone = [0.0] * len(TOKENS)
    options: list[dict[str, float]] = [defaultdict(float) for _ in TOKENS]
    for score, _, tree in found:
        p = math.exp(score) / z
        for e in tree.preorder():
            if len(covered[e]) == 1:
                alone[covered[e][0]] += p
                words = [w for w in hg.edges[e].target_terminals if w not in {"the", "that", "is"}]
                if words:
                    options[covered[e][0]][" ".join(words)] += p
    return [(alone[i], dict(options[i])) for i in range(len(TOKENS))]


def test_word_options_are_the_derivations_posteriors() -> None:
    q = toy_query()
    got = word_options(q.forests[0].hypergraph, q.weights, len(TOKENS))
    want = reference_options(q)
    for (a, opts), (b, ref) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-12)
        assert opts.keys() == ref.keys()
        for k in opts:
            assert opts[k] == pytest.approx(ref[k], abs=1e-12)


def test_alternatives_of_the_toy_query() -> None:
    (haus, brennt) = alternatives(toy_query())
    assert (haus.source, haus.span, brennt.source, brennt.span) == (
        "haus",
        (1, 2),
        "brennt",
        (2, 3),
    )
    assert [o.english for o in haus.options] == ["house", "home"]  # house scores higher
    assert [o.english for o in brennt.options] == ["burns", "burning"]  # "is" dropped
    ref = reference_options(toy_query())
    for alt in (haus, brennt):
        i = alt.span[0]
        assert alt.alone == pytest.approx(ref[i][0])
        assert sum(o.p for o in alt.options) == pytest.approx(1.0)  # no other option
        assert [o.p for o in alt.options] == pytest.approx(
            [ref[i][1][o.english] / ref[i][0] for o in alt.options]
        )
    assert alt.to_json()["options"][1]["english"] == "burning"
    # "das" is said only as function words: nothing to choose
    assert alternatives(toy_query(), min_p=0.0)[0].source == "haus"


def sentences_of(query: DecodedQuery) -> list[tuple[str, ...]]:
    return sorted(y for _, y, _ in brute_force(query.forests[0].hypergraph, dict(query.weights)))


@ENGINES
def test_a_pin_keeps_exactly_the_derivations_that_say_it(engine: Engine) -> None:
    q = toy_query()
    pinned = apply_choices(q, Choices.of({"Haus": "home"}, None), engine=engine)
    want = [y for y in sentences_of(q) if "home" in y]
    assert sentences_of(pinned) == want and want
    assert one_best(pinned) == [("the", "home", "burns")]
    # the phrase "the house" translates "haus" too (with "das"): it says "house", so it goes
    assert all("house" not in y for y in sentences_of(pinned))


@ENGINES
def test_a_block_removes_every_derivation_using_the_word(engine: Engine) -> None:
    q = toy_query()
    blocked = apply_choices(q, Choices.of(None, ["HOUSE", "the"]), engine=engine)
    want = [y for y in sentences_of(q) if "house" not in y and "the" not in y]
    assert sentences_of(blocked) == want and want
    assert apply_choices(q, Choices(), engine=engine) is q


@ENGINES
def test_choices_that_cannot_be_met_are_refused_naming_them(engine: Engine) -> None:
    q = toy_query()
    with pytest.raises(InvalidInputError, match="pin 'baum': no word of the query is 'baum'"):
        apply_choices(q, Choices.of({"Baum": "tree"}, None), engine=engine)
    with pytest.raises(InvalidInputError, match="pin haus=tree: no translation of 'haus'"):
        apply_choices(q, Choices.of({"Haus": "tree"}, None), engine=engine)
    with pytest.raises(InvalidInputError, match="block:home,block:house leave no translation"):
        apply_choices(q, Choices.of(None, ["house", "home"]), engine=engine)


@pytest.mark.parametrize(
    ("pins", "blocks", "match"),
    [
        ({"das Haus": "the house"}, None, "a pin is one source word"),
        ({"Haus": " "}, None, "a pin is one source word"),
        (None, ["two words"], "a block is one English word"),
        ({f"w{i}": "x" for i in range(21)}, None, "21 pins and blocks; at most 20"),
    ],
)
def test_bad_choices_are_refused(pins: dict[str, str] | None, blocks: list[str] | None,
                                 match: str) -> None:  # fmt: skip
    with pytest.raises(InvalidInputError, match=match):
        Choices.of(pins, blocks)


def test_choices_are_normalised_for_signatures_and_keys() -> None:
    a = Choices.of({"Tabelle": "Table", "Zeile": "row"}, ["sheet", "Sheet"])
    b = Choices.of({"zeile": "row", "tabelle": "table"}, ["sheet"])
    assert a == b and hash(a) == hash(b)
    assert a.signature() == "pin:tabelle=table,pin:zeile=row,block:sheet"
    assert a.to_json() == {"pins": {"tabelle": "table", "zeile": "row"}, "blocks": ["sheet"]}
    assert not Choices() and Choices().signature() == ""


def test_a_decoded_query_of_the_toy_bundle_honours_a_pin(toy_bundle: ModelBundle) -> None:
    q = decode_query(toy_bundle.decoder(), "das haus ist groß", "de")
    alts = {a.source: a for a in alternatives(q, min_p=0.0)}
    assert alts, "the toy grammar translates some word in two ways"
    word, alt = next(iter(alts.items()))
    last = alt.options[-1].english
    pinned = apply_choices(q, Choices.of({word: last}, None))
    assert last in " ".join(one_best(pinned)[0])
    assert pinned.forests[0].hypergraph.num_edges < q.forests[0].hypergraph.num_edges


@pytest.mark.parametrize(
    "text", ["das haus ist groß", "das auto ist alt", "ein großes haus", "haus haus"]
)
def test_compiled_word_options_equal_the_reference(toy_bundle: ModelBundle, text: str) -> None:
    """The compiled inside–outside and one-word positions over the arrays against the
    object-by-object reference, on the compiled decoder's array-backed forests."""
    q = decode_query(toy_bundle.decoder(), text, "de")
    for tokens, forest in zip(q.sentences, q.forests, strict=True):
        hg = forest.hypergraph
        fast = word_options(hg, q.weights, len(tokens), engine="compiled")
        ref = word_options(hg, q.weights, len(tokens), engine="reference")
        assert [a for a, _ in fast] == pytest.approx([a for a, _ in ref], abs=1e-9)
        for (_, f), (_, r) in zip(fast, ref, strict=True):
            assert f.keys() == r.keys()
            assert [f[k] for k in f] == pytest.approx([r[k] for k in f], abs=1e-9)
        assert any(opts for _, opts in ref)  # not a comparison of empty tables


@ENGINES
def test_a_pin_holds_where_its_word_can_say_it(engine: Engine) -> None:
    """ "haus" twice: the first can be "home", the second only "house" — the pin keeps the
    second's own reading rather than refusing the option it offered (seen by bench click)."""
    b = HypergraphBuilder()
    x = b.add_node("X", (0, 1))
    b.add_edge(x, [], ["house"], {P: -0.5}, rule_id=0)
    goal = b.add_node("S", (0, 1))
    b.add_edge(goal, [x], target_yield([nt(1)]), {GLUE: 1})
    only_house = Forest(("haus",), b.build(goal), 0.0, DecodeStats(), use_lm=False)
    q = toy_query()
    two = replace(q, sentences=(*q.sentences, ("haus",)), forests=(*q.forests, only_house))
    pinned = apply_choices(two, Choices.of({"haus": "home"}, None), engine=engine)
    assert one_best(pinned) == [("the", "home", "burns"), ("house",)]


def same_forest(a: object, b: object) -> bool:
    """Two forests with the same arrays, spans, nodes and hyperedges."""
    from service.forest.hypergraph import Hypergraph

    assert isinstance(a, Hypergraph) and isinstance(b, Hypergraph)
    x, y = a.arrays(), b.arrays()
    for name in x.__dataclass_fields__:
        u, v = getattr(x, name), getattr(y, name)
        if not (np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v):
            return False
    spans = all(np.array_equal(s, t) for s, t in zip(a.spans(), b.spans(), strict=True))
    return spans and list(a.nodes) == list(b.nodes) and list(a.edges) == list(b.edges)


@pytest.mark.parametrize(
    ("text", "choose"),
    [
        ("das haus ist groß", lambda alts: ({alts[0].source: alts[0].options[-1].english}, None)),
        ("haus haus", lambda alts: ({alts[0].source: alts[0].options[0].english}, None)),
        ("ein großes haus", lambda alts: (None, [alts[0].options[0].english.split()[0]])),
        (
            "das auto ist alt",
            lambda alts: (
                {a.source: a.options[-1].english for a in alts[:2]},
                [alts[-1].options[0].english],
            ),
        ),
    ],
)
def test_compiled_choices_cut_the_forest_as_the_reference(
    toy_bundle: ModelBundle, text: str, choose: Any
) -> None:
    """The choices applied over the arrays against edge by edge over the objects, on the
    compiled decoder's array-backed forests: the same forests, node for node and edge for
    edge, or the same refusal."""
    q = decode_query(toy_bundle.decoder(), text, "de")
    alts = alternatives(q, min_p=0.0)
    assert alts, "the toy grammar translates some word in two ways"
    choices = Choices.of(*choose(alts))
    try:
        ref = apply_choices(q, choices, engine="reference")
    except InvalidInputError as exc:
        with pytest.raises(InvalidInputError, match=re.escape(str(exc))):
            apply_choices(q, choices, engine="compiled")
        return
    fast = apply_choices(q, choices, engine="compiled")
    assert fast.forests[0].hypergraph.num_edges < q.forests[0].hypergraph.num_edges
    for f, r in zip(fast.forests, ref.forests, strict=True):
        assert same_forest(f.hypergraph, r.hypergraph)
        assert f.best_score == pytest.approx(r.best_score, abs=1e-12)
    assert one_best(fast) == one_best(ref)


@ENGINES
def test_a_pin_no_derivation_says_at_every_occurrence_holds_where_the_others_allow(
    engine: Engine,
) -> None:
    """ "haus haus": each occurrence can be "home", but the (pruned) forest holds no derivation
    saying it at both (seen by bench click on a Chinese query): the pin holds at the first,
    the second keeps the reading left to it, rather than refusing the option offered."""
    b = HypergraphBuilder()
    leaves = {}
    for span in ((0, 1), (1, 2)):
        for english in ("home", "house"):
            leaves[span, english] = b.add_node("X", span)
            b.add_edge(leaves[span, english], [], [english], {P: -0.5}, rule_id=0)
    goal = b.add_node("S", (0, 2))
    for first, second in (("home", "house"), ("house", "home")):
        tails = [leaves[(0, 1), first], leaves[(1, 2), second]]
        b.add_edge(goal, tails, target_yield([nt(1), nt(2)]), {GLUE: 1})
    forest = Forest(("haus", "haus"), b.build(goal), 0.0, DecodeStats(), use_lm=False)
    q = DecodedQuery("q", "haus haus", "de", (forest.tokens,), (forest,), TOY_WEIGHTS, "toy")
    pinned = apply_choices(q, Choices.of({"haus": "home"}, None), engine=engine)
    assert sentences_of(pinned) == [("home", "house")]
    with pytest.raises(InvalidInputError, match="block:house leave no translation"):
        apply_choices(q, Choices.of({"haus": "home"}, ["house"]), engine=engine)

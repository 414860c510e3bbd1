"""Compound splitting (Koehn & Knight 2003, §4): the dynamic programme against enumerating every
split, hand-worked choices, the splitter's rules, and the bundle's splitter on the query path."""

from __future__ import annotations

import math
import random

import pytest

from service.mt.bundle import ModelBundle
from service.mt.translate import translate_text
from service.retrieval.query import decode_query, query_sentences
from service.text.compounds import (
    COMPOUND_RULES,
    CompoundRule,
    CompoundSplitter,
    best_split,
    best_split_reference,
    parts_of,
)

DE = COMPOUND_RULES["de"]


def counter(counts: dict[str, int]):  # type: ignore[no-untyped-def]
    return lambda w: counts.get(w, 0)


def splitter(counts: dict[str, int], rule: CompoundRule = DE, keep=frozenset()) -> CompoundSplitter:  # type: ignore[no-untyped-def]
    return CompoundSplitter(lambda w: w in counts, counter(counts), lambda w: w in keep, rule)


@pytest.mark.parametrize("seed", range(300))
def test_dynamic_programme_equals_enumeration(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "abse"  # small: many splits, fillers (s, es) and equal products
    rule = CompoundRule(
        fillers=rng.choice([("",), ("", "s"), ("", "s", "es")]),
        min_part=rng.randint(1, 3),
        min_count=1,
        max_parts=rng.randint(1, 5),
    )
    vocab = {
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))): rng.choice([1, 2, 4, 8, 9])
        for _ in range(rng.randint(3, 25))
    }
    count = counter(vocab)
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(20)]
    words += ["".join(rng.sample(sorted(vocab), 1)[0] for _ in range(3)) for _ in range(10)]
    for word in words:
        assert best_split(word, count, rule) == best_split_reference(word, count, rule), word


def geometric_mean(counts: dict[str, int], parts: tuple[str, ...]) -> float:
    return float(math.prod(counts[p] for p in parts) ** (1 / len(parts)))


def test_the_highest_geometric_mean_wins() -> None:
    counts = {"daten": 1000, "bank": 100, "datenbank": 50, "über": 10_000, "sicht": 4,
              "übersicht": 500}  # fmt: skip
    # by hand: datenbank|übersicht (50·500)^½ = 158; daten|bank|übersicht (1000·100·500)^⅓ = 368;
    # datenbank|über|sicht (50·10⁴·4)^⅓ = 126; daten|bank|über|sicht (10³·100·10⁴·4)^¼ = 251
    best = best_split("datenbankübersicht", counter(counts), DE)
    assert best is not None
    parts = parts_of("datenbankübersicht", best[2])
    assert parts == ("daten", "bank", "übersicht")
    assert round(geometric_mean(counts, parts)) == 368
    # with "sicht" ten times as frequent, four parts win: (10³·100·10⁴·40)^¼ = 447
    counts["sicht"] = 40
    best = best_split("datenbankübersicht", counter(counts), DE)
    assert best is not None
    assert parts_of("datenbankübersicht", best[2]) == ("daten", "bank", "über", "sicht")
    # a frequent whole word competes with its count and is not split
    counts["datenbankübersicht"] = 500  # > 447
    best = best_split("datenbankübersicht", counter(counts), DE)
    assert best is not None and parts_of("datenbankübersicht", best[2]) == ("datenbankübersicht",)


def test_fillers_between_parts_only() -> None:
    counts = {"fehler": 50, "behandlung": 40, "funktionen": 60, "funktion": 80}
    s = splitter(counts)
    assert s.split_word("fehlerbehandlungsfunktionen") == ("fehler", "behandlung", "funktionen")
    # no filler after the last part: "…funktions" has no split into known parts
    assert s.split_word("fehlerfunktions") == ("fehlerfunktions",)
    # ties: equal products go to fewer parts, then to the longer first part
    assert best_split("aaaabbbb", counter({"aaaa": 4, "bbbb": 4, "aaaabbbb": 4}), DE) == (
        4,
        1,
        ((8, 0),),
    )


def test_splitter_rules() -> None:
    counts = {"text": 100, "skalierung": 20, "seite": 9, "daten": 30, "bank": 30}
    s = splitter(counts, keep={"textbank"})
    assert s.split_word("textskalierung") == ("text", "skalierung")
    assert s.split_word("text") == ("text",)  # known to the grammar
    assert s.split_word("textbank") == ("textbank",)  # kept (the English side knows it)
    assert s.split_word("textseite") == ("textseite",)  # seite: 9 < min_count 10
    assert s.split_word("datentext2") == ("datentext2",)  # not letters only
    assert s.split_word("bankx") == ("bankx",)  # shorter than two parts
    assert s.split_word("daten" * 13) == ("daten" * 13,)  # longer than max_length
    assert s.split_word("textxyzskalierung") == ("textxyzskalierung",)  # no split into parts
    rule = CompoundRule(fillers=("",), min_part=5)
    assert splitter(counts, rule).split_word("textskalierung") == ("textskalierung",)  # text < 5
    tokens = ["die", "textskalierung", "der", "datenbank"]
    assert s.split(tokens) == ("die", "text", "skalierung", "der", "daten", "bank")


def test_each_word_is_split_once() -> None:
    counts = {"text": 100, "skalierung": 20}
    calls: list[str] = []

    def count(w: str) -> int:
        calls.append(w)
        return counts.get(w, 0)

    s = CompoundSplitter(lambda w: w in counts, count, lambda _w: False, DE)
    assert s.split(["textskalierung"]) == ("text", "skalierung")
    assert calls
    calls.clear()
    assert s.split(["textskalierung", "textskalierung"]) == ("text", "skalierung") * 2
    assert calls == []  # cached: the corpus counts are not asked again


def test_the_bundle_splits_unknown_compounds_on_the_query_path(toy_bundle: ModelBundle) -> None:
    sp = toy_bundle.compound_splitter
    assert sp is not None
    assert toy_bundle.grammar.knows_source("haus") and toy_bundle.grammar.knows_source("auto")
    assert not toy_bundle.grammar.knows_source("hausauto")
    assert toy_bundle.lexical.source_count("haus") >= DE.min_count
    decoder = toy_bundle.decoder()
    assert decoder.splitter is sp
    assert query_sentences("das Hausauto ist rot", "de", 200, sp) == [
        ("das", "haus", "auto", "ist", "rot")
    ]
    dq = decode_query(decoder, "das Hausauto", "de")
    assert dq.sentences == (("das", "haus", "auto"),)
    assert dq.forests[0].tokens == ("das", "haus", "auto")
    # translation reads the query the same way
    (sentence,) = translate_text(toy_bundle, "das Hausauto")
    assert sentence.source == ("das", "haus", "auto")
    # a tuning decoder (any weights, not the bundle's query decoder) splits nothing
    assert toy_bundle.make_decoder(decoder.weights).splitter is None

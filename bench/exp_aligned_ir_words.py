"""Experiment, not product: BOW-FD where a rule's unaligned target words earn no BM25 weight.

Hieber & Riezler 2015, §3, let every target word of a derivation earn its BM25 weight in the
document. A rule extracted from a pair whose English says more than its German carries English
words aligned to nothing ("tabelle ein . -> sheet as a link ."), and BOW-FD can pick it for a
document that contains them. This script ranks each dev set twice in one process, against the
same index: as the product does (``docs``) and with every occurrence of a target terminal
that its rule aligns to no source word (:attr:`service.mt.rules.Rule.terminals_aligned`;
pass-through and glue edges keep theirs) renamed, in the forest's arrays, to a word that is no
index term (``aligned``). The renamed forest goes through the product's
:func:`~service.retrieval.bowfd.prepare.prepare_sentence` and fast search unchanged, so
candidates, bounds and rankings follow exactly. Explanations are not changed.

Run: ``.venv/bin/python -m bench.exp_aligned_ir_words de question,short,paragraph OUT.json``.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

import bench.bench_querysets as bq
import service.retrieval.bowfd.scorer as sc_mod
from service.forest.hypergraph import Hypergraph
from service.index.inverted import InvertedIndex

NOT_A_TERM = ""  # the analysis chain never makes an index term of the empty string
ORIG_PREP = sc_mod.prepare_sentence
ORIG_SCORER = bq.make_scorer
ORIG_LOAD_INDEX = bq.load_index
STATE: dict[str, Any] = {"masked": 0, "occ": 0, "loaded": [], "aligned_index": None}


def aligned_only(hg: Hypergraph, grammar: Any) -> Hypergraph:
    """``hg`` with the target words its rules do not align renamed to :data:`NOT_A_TERM`."""
    a = hg.arrays()
    keep = np.ones(len(a.term_ids), dtype=bool)
    masks: dict[int, tuple[bool, ...]] = {}
    for e in np.flatnonzero(np.diff(a.term_ptr)).tolist():
        rid = hg.edges[e].rule_id
        if rid >= 0:
            if rid not in masks:
                masks[rid] = grammar.rule(rid).terminals_aligned
            keep[a.term_ptr[e] : a.term_ptr[e + 1]] = masks[rid]
    STATE["masked"] += int((~keep).sum())
    STATE["occ"] += len(keep)
    vocabulary = (*a.vocabulary, NOT_A_TERM)
    term_ids = np.where(keep, a.term_ids, len(a.vocabulary))
    arrays = replace(a, term_ids=term_ids, vocabulary=vocabulary)
    return Hypergraph.from_arrays(arrays, lambda v: hg.nodes[v], lambda e: hg.edges[e])


def load_index(path: Any) -> InvertedIndex:
    """bq.rank_sets loads ``docs`` and then ``aligned`` (the same files, two objects)."""
    index = ORIG_LOAD_INDEX(path)
    STATE["loaded"].append(index)
    if len(STATE["loaded"]) == 2:
        STATE["aligned_index"] = index
    return index


def make_scorer(method: str, index: InvertedIndex, bundle: Any, **params: Any) -> Any:
    STATE["grammar"] = bundle.grammar
    return ORIG_SCORER(method, index, bundle, **params)


def prepare_sentence(
    hg: Hypergraph, smt: Any, index: InvertedIndex, beam: int | None = None
) -> Any:
    if index is STATE["aligned_index"]:
        hg = aligned_only(hg, STATE["grammar"])
    return ORIG_PREP(hg, smt, index, beam)


if __name__ == "__main__":
    lang, sets, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
    bq.load_index = load_index
    bq.make_scorer = make_scorer
    sc_mod.prepare_sentence = prepare_sentence
    docs = bq.ROOT / "indexes" / "docs"
    params = bq.Params(lang=cast(Literal["de", "zh"], lang), methods="bowfd", out=out)
    bq.rank_sets(params, {"docs": docs, "aligned": docs}, sets, ["bowfd"], out)
    print("masked occurrences", STATE["masked"], "of", STATE["occ"], file=sys.stderr)

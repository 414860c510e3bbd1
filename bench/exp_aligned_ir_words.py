"""Experiment, not product: BOW-FD where a rule's unaligned target words earn no BM25 weight.

Hieber & Riezler 2015, §3, let every target word of a derivation earn its BM25 weight in the
document. A rule extracted from a pair whose English says more than its German carries English
words aligned to nothing ("tabelle ein . -> sheet as a link ."), and BOW-FD can pick it for a
document that contains them. This script ranks each dev set twice in one process, against the
same index: as the product does (``docs``) and with the occurrences of unaligned target
terminals of grammar rules taken out of the live forest (``aligned``; pass-through and glue
edges keep theirs), by wrapping :func:`service.retrieval.bowfd.prepare.live_forest`. The
bounds, candidates and rankings all follow from the live forest, so the fast search ranks the
changed bag exactly. Explanations are not changed.

Run: ``.venv/bin/python -m bench.exp_aligned_ir_words de question,short,paragraph OUT.json``.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import bench.bench_querysets as bq
import service.retrieval.bowfd.prepare as prep_mod
import service.retrieval.bowfd.scorer as sc_mod
from service.mt.rules import is_nt

ORIG_LIVE = prep_mod.live_forest
ORIG_PREP = prep_mod.prepare_sentence
ORIG_BUNDLE = bq.load_bundle
ORIG_INDEX = bq.load_index
STATE: dict[str, Any] = {"cache": {}, "masked": 0, "occ": 0, "loaded": [], "on": False}


def rule_mask(rid: int) -> np.ndarray:
    """Per target terminal of rule ``rid``, in order: is it aligned to a source word?"""
    m = STATE["cache"].get(rid)
    if m is None:
        rule = STATE["grammar"].rule(rid)
        aligned = {j for _, j in rule.alignment}
        m = np.array([j in aligned for j, t in enumerate(rule.target) if not is_nt(t)], dtype=bool)
        STATE["cache"][rid] = m
    return m


def live_forest(hg: Any, smt: Any, word_local: Any) -> Any:
    lf = ORIG_LIVE(hg, smt, word_local)
    if not STATE["on"]:
        return lf
    sentinel = STATE["sentinel"]
    occ = lf.occ_term.copy()
    for i, e in enumerate(lf.edges.tolist()):
        lo, hi = lf.occ_ptr[i], lf.occ_ptr[i + 1]
        rid = hg.edges[e].rule_id
        if hi == lo or rid < 0:
            continue
        unaligned = ~rule_mask(rid)
        if len(unaligned) != hi - lo:
            raise AssertionError(f"edge {e}: {len(unaligned)} terminals, {hi - lo} occurrences")
        if unaligned.any():
            seg = occ[lo:hi]
            STATE["masked"] += int((seg[unaligned] != sentinel).sum())
            seg[unaligned] = sentinel
        STATE["occ"] += int(hi - lo)
    return replace(lf, occ_term=occ)


def prepare_sentence(hg: Any, smt: Any, index: Any, beam: int | None = None) -> Any:
    # the live forest's "no term" value: the number of the forest's weighted index terms
    n = 0
    for w in hg.arrays().vocabulary:
        tid = index.term_id(w)
        if tid is not None and index.rsj[tid] != 0:
            n += 1
    STATE["sentinel"] = n
    STATE["on"] = index is STATE.get("aligned_index")
    return ORIG_PREP(hg, smt, index, beam)


def load_bundle(*a: Any, **k: Any) -> Any:
    b = ORIG_BUNDLE(*a, **k)
    STATE["grammar"] = b.grammar
    return b


def load_index(path: Any) -> Any:
    ix = ORIG_INDEX(path)
    STATE["loaded"].append(ix)
    if len(STATE["loaded"]) == 2:
        STATE["aligned_index"] = ix
    return ix


if __name__ == "__main__":
    prep_mod.live_forest = live_forest
    sc_mod.prepare_sentence = prepare_sentence
    bq.load_bundle = load_bundle
    bq.load_index = load_index
    lang, sets, out = sys.argv[1], sys.argv[2].split(","), Path(sys.argv[3])
    docs = bq.ROOT / "indexes" / "docs"
    bq.main(lang, {"docs": docs, "aligned": docs}, sets, ["bowfd"], None, out, False, False)
    print("masked occurrences", STATE["masked"], "of", STATE["occ"], file=sys.stderr)

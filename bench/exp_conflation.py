"""Experiment: a soft, query-side conflation of English -s/-ing/-ed forms (issue 43, part 4).

``exp_unsayable.py`` found conflation the one lever with room: a word the forest cannot say
is often another form of one it can ("inserting" for "insert", "tables" for "table"). The
stemmers measured before conflate the index and lose on German short queries (help titles
tell "Table" from "Tables" pages), so this measures the soft form before it is built into
BOW-FD: the query keeps its own terms and each term's other inflected forms in the index are
added at a fraction ``α`` of its weight,

    score(d) = Σ_t c_t · bm25(t, d) + α · Σ_t c_t · Σ_{v ∈ forms(t)} bm25(v, d),

where ``forms(t)`` are the index terms with the same Snowball (Porter 2) stem whose ending after
that stem is an inflection (``s``, ``es``, ``ed``, ``ing``, ``e``, ``y``, ``ies``, ``ied`` or
none). The query is the 1-best translation of the full models' forest (DT's query; BOW-FD
reads the same words through its forest), ranked by BM25 on ``indexes/docs``; dev short queries
and questions; α = 0 is the baseline, paired randomization test against it.

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_conflation.py [de|zh ...]``; writes
``bench/results/conflation_<lang>.json``.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from typing import Any

import Stemmer

from bench.bench_feedback import Runs
from bench.bench_querysets import load_set
from bench.common import ROOT, write_per_language
from service.evaluation import evaluate, randomization_test
from service.index.inverted import InvertedIndex, load_index
from service.mt.bundle import load_bundle
from service.retrieval.base import one_best
from service.retrieval.query import decode_query

DEPTH = 1000
SETS = ("short", "question")
ALPHAS = (0.0, 0.1, 0.25, 0.5)
ENDINGS = frozenset({"", "s", "es", "ed", "ing", "e", "y", "ies", "ied"})
METRICS = ("map", "ndcg@10", "mrr")


def forms_of(index: InvertedIndex) -> dict[int, list[int]]:
    """Each index term's other inflected forms in the index (term ids)."""
    stem = Stemmer.Stemmer("english").stemWord
    by_stem: dict[str, list[int]] = defaultdict(list)
    for i in range(index.n_terms):
        term = index.term(i)
        s = stem(term)
        if term.isalpha() and term.startswith(s) and term[len(s) :] in ENDINGS:
            by_stem[s].append(i)
    return {t: [v for v in ids if v != t] for ids in by_stem.values() if len(ids) > 1 for t in ids}


def measure(lang: str) -> dict[str, Any]:
    bundle = load_bundle(ROOT / "models" / f"{lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder()
    forms = forms_of(index)
    print(f"{lang}: {len(forms)} terms with other forms", file=sys.stderr)
    result: dict[str, Any] = {"lang": lang, "index": index.signature(), "sets": {}}
    for set_name in SETS:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in queries.items() if q in qrels}
        runs = Runs(index)
        added = Counter[str]()
        for qid, text in queries.items():
            q = decode_query(decoder, text, bundle.src, qid=qid)
            words = [w for sentence in one_best(q) for w in sentence]
            counts = Counter(index.term_ids(words))
            for alpha in ALPHAS:
                weights: dict[int, float] = defaultdict(float)
                for t, c in counts.items():
                    weights[t] += c
                    for v in forms.get(t, ()) if alpha else ():
                        weights[v] += alpha * c
                        added[index.term(v)] += 1 if alpha == ALPHAS[1] else 0
                ids = sorted(weights)
                hits = index.rank(ids, [weights[i] for i in ids], DEPTH)
                runs.record(f"alpha {alpha:g}", qid, hits, 0.0)
        ev = {k: evaluate(v, qrels, METRICS) for k, v in runs.runs.items()}
        base = ev["alpha 0"]
        entry: dict[str, Any] = {
            "queries": len(queries),
            "configs": {k: e.as_json() for k, e in ev.items()},
            "p vs alpha 0": {
                k: {
                    m: randomization_test(base.per_query[m], e.per_query[m], 10_000, 0)
                    for m in METRICS
                }
                for k, e in ev.items()
                if k != "alpha 0"
            },
            "forms added most": added.most_common(30),
        }
        result["sets"][set_name] = entry
        print(lang, set_name, {k: e.means for k, e in ev.items()}, entry["p vs alpha 0"],
              file=sys.stderr)  # fmt: skip
    return result


if __name__ == "__main__":
    write_per_language("conflation", measure, sys.argv[1:])

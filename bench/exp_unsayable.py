"""Experiment: the words the forest cannot say, by the lever that could say them (issue 43, part 4).

The reachable ceiling (``exp_reachable.py``) ranks, per query, the monolingual ceiling's English
tokens restricted to those the query's +LM forest yields: the ceiling a method reaches that
picks exactly the English page's own words from the forest. The words it drops are what no
method over the forest can match. Three levers were proposed to say them; this measures, for
each, how much of that loss it could win back at most, before any of them is built:

* **conflation** — an English ceiling term whose Snowball stem (Porter 2) is the stem of a term
  the forest yields ("tables" for "table", "inserting" for "insert"): what a conflation of the
  -s/-ing forms at matching time could say (an upper bound: the stemmer conflates more than
  those endings);
* **unknown source word** — a term missed in a query with a source token the grammar does not
  know (passed through untranslated): what a segmentation dictionary (zh) or a compound split
  (de, which the service already does for unknown words) could change;
* **terminology** — a term of the English side of a short gettext pair of the training data
  (at most 3 tokens each side, the UI catalogues' term pairs) whose foreign tokens all occur in
  the query: what terminology rules from those pairs could say.

A term can fall under several levers. For each lever the ceiling query is ranked again with the
reachable tokens plus the tokens that lever could say ("reachable + lever"), by BM25 on the
same index, and compared with the reachable ceiling and the full ceiling (MAP, paired
randomization test). Dev short queries and questions; the full models' forests as the service
decodes them (``models/{de,zh}-en``, ``indexes/docs``).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_unsayable.py [de|zh ...]``; writes
``bench/results/unsayable_<lang>.json``.
"""

from __future__ import annotations

import gzip
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import Stemmer

from bench.bench_feedback import Runs, english_queries
from bench.bench_querysets import load_set
from bench.common import DATA, ROOT, write_per_language
from bench.exp_reachable import forest_terms
from service.evaluation import evaluate, randomization_test
from service.index.inverted import InvertedIndex, load_index
from service.mt.bundle import load_bundle
from service.mt.decoder import DecoderConfig
from service.retrieval.query import decode_query
from service.text.tokenize import preprocess

DEPTH = 1000
SETS = ("short", "question")
LEVERS = ("conflation", "unknown source word", "terminology")
MAX_TERM_TOKENS = 3  # a gettext pair with at most this many tokens a side is a term pair


def term_pairs(lang: str, index: InvertedIndex) -> dict[str, list[tuple[frozenset[str], set[str]]]]:
    """The short gettext pairs of the training data: per foreign token, the pairs (foreign
    tokens, English index terms) it is part of."""
    pairs: dict[str, list[tuple[frozenset[str], set[str]]]] = defaultdict(list)
    seen: set[tuple[frozenset[str], frozenset[str]]] = set()
    with gzip.open(DATA / "parallel" / f"{lang}-en.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            origin, foreign, english = line.rstrip("\n").split("\t")
            if not origin.startswith("gettext:") or len(english.split()) > MAX_TERM_TOKENS:
                continue
            if lang != "zh" and len(foreign.split()) > MAX_TERM_TOKENS:
                continue
            src = preprocess(foreign, lang)
            if not src or len(src) > MAX_TERM_TOKENS:
                continue
            terms = {t for t in map(index.analyzer.term, index.tokenize(english)) if t}
            key = (frozenset(src), frozenset(terms))
            if terms and key not in seen:
                seen.add(key)
                for token in set(src):
                    pairs[token].append((frozenset(src), terms))
    return pairs


def measure(lang: str) -> dict[str, Any]:
    bundle = load_bundle(ROOT / "models" / f"{lang}-en")
    index = load_index(ROOT / "indexes" / "docs")
    decoder = bundle.decoder(DecoderConfig(use_lm=True))
    stem: Callable[[str], str] = Stemmer.Stemmer("english").stemWord
    pairs = term_pairs(lang, index)
    print(f"{lang}: {sum(map(len, pairs.values()))} term pair entries", file=sys.stderr)
    result: dict[str, Any] = {"lang": lang, "index": index.signature(), "sets": {}}
    for set_name in SETS:
        queries, qrels = load_set(set_name, lang)
        queries = {q: t for q, t in queries.items() if q in qrels}
        english = english_queries(set_name, lang, queries, qrels)
        runs = Runs(index)
        missed: Counter[str] = Counter()
        by_lever: dict[str, Counter[str]] = {lever: Counter() for lever in LEVERS}
        queries_helped = Counter[str]()
        unknown_tokens: Counter[str] = Counter()
        for qid, text in queries.items():
            q = decode_query(decoder, text, bundle.src, qid=qid)
            yields = forest_terms(index, q)
            source = [t for sentence in q.sentences for t in sentence]
            unknown = [t for t in source if not bundle.grammar.knows_source(t) and t.isalpha()]
            unknown_tokens.update(unknown)
            stems = {stem(t) for t in yields}
            said = {
                pair_term
                for token in set(source)
                for src, terms in pairs.get(token, ())
                if src <= set(source)
                for pair_term in terms
            }
            tokens = index.tokenize(english[qid])
            terms = [index.analyzer.term(t) for t in tokens]
            can = {
                "conflation": {t for t in terms if t and t not in yields and stem(t) in stems},
                "unknown source word": {t for t in terms if t and t not in yields} if unknown
                else set(),
                "terminology": {t for t in terms if t and t not in yields and t in said},
            }  # fmt: skip
            missed.update({t for t in terms if t and t not in yields})
            runs.record("ceiling", qid, index.bm25_topk(tokens, DEPTH), 0.0)
            kept = [t for t, term in zip(tokens, terms, strict=True) if term in yields]
            runs.record("reachable ceiling", qid, index.bm25_topk(kept, DEPTH), 0.0)
            for lever, extra in can.items():
                by_lever[lever].update(extra)
                queries_helped[lever] += bool(extra)
                more = [t for t, term in zip(tokens, terms, strict=True)
                        if term in yields or term in extra]  # fmt: skip
                runs.record(f"reachable + {lever}", qid, index.bm25_topk(more, DEPTH), 0.0)
        ev = {k: evaluate(v, qrels, ("map", "ndcg@10", "mrr")) for k, v in runs.runs.items()}
        ap = {k: e.per_query["map"] for k, e in ev.items()}
        ceiling = ev["ceiling"].means["map"]
        entry: dict[str, Any] = {
            "queries": len(queries),
            "map": {k: e.means["map"] for k, e in ev.items()},
            "of the ceiling": {k: e.means["map"] / ceiling for k, e in ev.items()},
            "p vs reachable": {
                lever: randomization_test(
                    ap["reachable ceiling"], ap[f"reachable + {lever}"], 10_000, 0
                )
                for lever in LEVERS
            },
            "missed terms": sum(missed.values()),
            "missed terms by lever": {k: sum(v.values()) for k, v in by_lever.items()},
            "queries a lever adds a term to": dict(queries_helped),
            "unknown source tokens": dict(unknown_tokens.most_common()),
            "most missed": missed.most_common(30),
            "most missed by lever": {k: v.most_common(15) for k, v in by_lever.items()},
        }
        result["sets"][set_name] = entry
        print(lang, set_name, {k: entry[k] for k in ("map", "p vs reachable",
              "missed terms", "missed terms by lever")}, file=sys.stderr)  # fmt: skip
    return result


if __name__ == "__main__":
    write_per_language("unsayable", measure, sys.argv[1:])

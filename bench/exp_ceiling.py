"""Experiment: the monolingual ceiling built as the query sets are (the title once).

The foreign query of a LibreOffice page is its title and first paragraphs, and never repeats
the title (1 of 260 de and 1 of 184 zh dev queries open with a repeated phrase), while 235 of
260 (de) and 175 of 184 (zh) English mates open with a heading equal to the title. The ceiling
was the English page's title followed by its whole text, so it held the title twice; it is now
:func:`service.data.querysets.english_text` (a paragraph repeating the title left out). This
ranks both versions — the first 8 tokens (short sets) and the first 50 (paragraph sets), BM25
on the same index, with and without RM3 (:mod:`service.retrieval.feedback`'s defaults) — and
counts how often each opens with a repeated phrase.

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_ceiling.py``; writes
``bench/results/ceiling_title_once.json``.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.bench_feedback import PARAGRAPH_CEILING_TOKENS
from bench.bench_querysets import english_pages, load_set
from bench.common import RESULTS_DIR, write_result
from service.data.querysets import english_text, mate, short_text
from service.evaluation import evaluate, randomization_test
from service.index.inverted import load_index
from service.retrieval.feedback import FeedbackParams, expand, rank_expanded

DEPTH = 1000
METRICS = ("map", "ndcg@10", "mrr")


def _repeats(text: str) -> bool:
    words = text.split()
    return any(words[:k] == words[k : 2 * k] for k in range(1, 9))


def main() -> None:
    index = load_index("indexes/docs")
    pages = english_pages()
    params = FeedbackParams(form="replace")
    result: dict[str, Any] = {"sets": {}}
    for lang in ("de", "zh"):
        for form in ("short", "paragraph"):
            queries, qrels = load_set(form, lang)
            qids = [q for q in queries if q in qrels]
            texts: dict[str, dict[str, str]] = {"title twice": {}, "title once": {}}
            for q in qids:
                title, text = pages[mate(qrels[q])]
                for key, full in (("title twice", f"{title} {text}"),
                                  ("title once", english_text(title, text))):  # fmt: skip
                    cut = (
                        short_text(full, "en")
                        if form == "short"
                        else " ".join(full.split()[:PARAGRAPH_CEILING_TOKENS])
                    )
                    texts[key][q] = cut
            entry: dict[str, Any] = {
                "queries": len(qids),
                "foreign queries opening with a repeated phrase": sum(
                    _repeats(queries[q]) for q in qids
                ),
                "configs": {},
            }
            per_query = {}
            for key, qs in texts.items():
                entry[f"{key}: English queries opening with a repeated phrase"] = sum(
                    _repeats(t) for t in qs.values()
                )
                for fb in (False, True):
                    run = {}
                    for q, t in qs.items():
                        tokens = index.tokenize(t)
                        h = index.bm25_topk(tokens, DEPTH)
                        if fb:
                            h = rank_expanded(index, expand(index, tokens, h, params), DEPTH)
                        ids = map(index.doc_id, h.docs.tolist())
                        run[q] = dict(zip(ids, h.scores.tolist(), strict=True))
                    name = key + (" +RM3" if fb else "")
                    ev = evaluate(run, {q: qrels[q] for q in qids}, METRICS)
                    per_query[name] = ev.per_query["map"]
                    entry["configs"][name] = ev.as_json()
            entry["p_map_once_vs_twice"] = randomization_test(
                per_query["title once"], per_query["title twice"], 10_000, 0
            )
            result["sets"][f"{lang} {form}"] = entry
            c = entry["configs"]
            print(f"{lang} {form}: MAP twice {c['title twice']['map']:.4f} → once "
                  f"{c['title once']['map']:.4f} (p {entry['p_map_once_vs_twice']:.4f})",
                  file=sys.stderr)  # fmt: skip
    write_result(RESULTS_DIR / "ceiling_title_once.json", result)


if __name__ == "__main__":
    main()

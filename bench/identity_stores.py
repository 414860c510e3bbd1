"""Identity dump of the store-facing search path (what the API, the command line and the runs
rank with), for refactors of how a store is opened and searched:

* **documents**: every dev query of both pairs (``--limit N``: the first N), decoded once (+LM)
  and searched through :func:`service.search.stores.store_pipeline` over the store opened by
  :func:`service.collection.docstore.open_store` — BOW-FD, DT and PSQ, each without and with
  feedback (RM3 as the settings configure it) and without and with the dense reader (when the
  store has vectors): the page's ids and scores as ``float.hex`` to depth 100, the count, its
  relation, its bound, the terms marked and the empty reason;
* **scorer**: the same queries ranked by :func:`~service.collection.docstore.store_scorer` (what
  ``clir run`` and the evaluations use) with BOW-FD, depth 1000;
* **suggestions**: translation retrieval over the pool store, depth 20, its N-best lists given
  3 s a sentence (the service's 0.5 s bound on time cuts them by the machine's load, so two
  runs may differ: ``--only tr`` dumps this part alone).

Run it on two checkouts and ``cmp`` the files::

    PYTHONPATH=<checkout> .venv/bin/python bench/identity_stores.py out.txt [--models demo]

or over other layouts of the same documents — a collection of 1, 2 or 4 shards (``--docs``),
searched in this process or by Ray shard workers (``--backend ray``) — and compare their lines
with the index's (``--no-tr --no-dense``: what a collection without vectors can be compared
on).
"""

from __future__ import annotations

import argparse
from itertools import islice
from typing import TextIO

from service.collection.docstore import open_store, store_scorer
from service.core.settings import Settings
from service.data import load_queries
from service.mt.bundle import load_bundle
from service.retrieval.base import DecodedQuery
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import SearchOptions, dense_from_settings, feedback_from_settings
from service.search.stores import Backend, StoreSearchers

DATA = "../shared/data/clir"
SETS = {
    "full": {
        "de": "models/de-en",
        "zh": "models/zh-en",
        "docs": "indexes/docs",
        "pool": "indexes/pool",
    },
    "demo": {"de": "models/demo-de-en", "docs": "indexes/demo", "pool": "indexes/demo-pool"},
}


def _hits(hits: list) -> str:  # type: ignore[type-arg]
    return " ".join(f"{h.doc_id}:{float(h.score).hex()}" for h in hits)


def dump(
    out: TextIO,
    which: str,
    limit: int | None,
    only: str | None = None,
    *,
    docs_path: str | None = None,
    backend: str = "local",
    tr: bool = True,
    dense_too: bool = True,
    methods: tuple[str, ...] = ("bowfd", "dt", "psq"),
) -> None:
    paths = SETS[which]
    settings = Settings()
    docs, pool = open_store(docs_path or paths["docs"]), open_store(paths["pool"])
    # CLIR_SEARCH_SHARD_TIMEOUT_S: a fresh checkout's shard workers compile their kernels
    # on their first call (DT's took 11 s on this machine, above the 10 s default)
    searchers = StoreSearchers(
        Backend(kind=backend, shard_timeout_s=settings.search_shard_timeout_s)  # type: ignore[arg-type]
    )
    for lang in ("de", "zh"):
        if lang not in paths:
            continue
        bundle = load_bundle(paths[lang])
        decoder = decoder_for(bundle)
        queries = islice(load_queries(f"{DATA}/lohelp-{lang}/queries.dev.tsv").items(), limit)
        decoded: list[DecodedQuery] = [decode_query(decoder, t, lang, qid=q) for q, t in queries]
        suggest = store_scorer(pool, "tr", bundle, time_budget=3.0)
        for q in decoded if tr else ():
            r = suggest.rank(q, 20)
            out.write(f"{lang}\ttr\t{q.qid}\t{_hits(r.hits)}\n")
        if only == "tr":
            continue
        pipe = searchers.pipeline(docs, bundle)
        if backend == "ray":  # every shard's worker up: no answer made here, degraded
            down = searchers.start_shard_workers(docs, bundle, 300.0)
            if down:
                raise SystemExit(f"shard workers not up: {down}")
        has_dense = dense_too and pipe.dense_status()["available"]
        for method in methods:
            for fb in (False, True):
                for dense in (False, True) if has_dense else (False,):
                    opts = SearchOptions(
                        method, k=100,
                        feedback=feedback_from_settings(settings, fb),
                        dense=dense_from_settings(settings, dense),
                    )  # fmt: skip
                    for q in decoded:
                        o = pipe.search(q, opts)
                        if o.failed:
                            raise SystemExit(f"{q.qid}: shards {o.failed} did not answer")
                        out.write(
                            f"{lang}\t{method}\tfb={fb}\tdense={dense}\t{q.qid}\t{o.total}\t"
                            f"{o.relation}\t{o.total_max}\t{sorted(o.terms)}\t{o.empty_reason}\t"
                            f"{o.dense}\t{_hits(o.hits)}\n"
                        )
        scorer = store_scorer(docs, "bowfd", bundle)
        for q in decoded if "bowfd" in methods else ():
            r = scorer.rank(q, 1000)
            out.write(f"{lang}\tscorer\t{q.qid}\t{scorer.retrieved(r, 1000, q)}\t{_hits(r.hits)}\n")
    searchers.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--models", choices=sorted(SETS), default="full")
    ap.add_argument("--limit", type=int, default=None, help="first N dev queries (default: all)")
    ap.add_argument("--only", choices=["tr"], default=None, help="translation retrieval alone")
    ap.add_argument("--docs", default=None, help="the documents' store (default: the set's)")
    ap.add_argument("--backend", choices=["local", "ray"], default="local")
    ap.add_argument("--no-tr", action="store_true", help="no translation retrieval")
    ap.add_argument("--no-dense", action="store_true", help="the lexical ranking alone")
    ap.add_argument("--methods", default="bowfd,dt,psq", help="the pipeline's methods dumped")
    args = ap.parse_args()
    with open(args.out, "w") as out:
        dump(
            out, args.models, args.limit, args.only, docs_path=args.docs, backend=args.backend,
            tr=not args.no_tr, dense_too=not args.no_dense, methods=tuple(args.methods.split(",")),
        )  # fmt: skip


if __name__ == "__main__":
    main()

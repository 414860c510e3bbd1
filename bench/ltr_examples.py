"""Decode every judged training query once with the jackknifed bundle that never saw its page,
and the dev queries with the serving bundle, into learning-to-rank examples on disk.

The examples are what :mod:`bench.bench_ltr_pooled` cross-validates on (Hieber & Riezler 2015,
§4: the candidates' best-derivation feature vectors under the current weights, recomputed per
epoch from the fixed forest; :mod:`service.ltr.examples`). ``--form short`` decodes the short
form of every query instead (the first 8 tokens of a de query, 14 characters of a zh one,
:func:`service.data.querysets.short_text`): what searchers type.

One file per language and form, written atomically at the end (decoding all 2,031 de training
queries takes most of an hour on one core)::

    nice -n 10 .venv/bin/python -m bench.ltr_examples de --jackknife var/jk/jk-de \\
        --form paragraph --out var/ltr/de-paragraph.pkl

The file holds the feature space, the training examples (each query decoded by fold
``fold_of_query(qid)``'s bundle), the dev set decoded by the serving bundle, and the decoding
figures. Not committed (about 1.3 MB per query).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench.common import DATA, ROOT
from bench.jackknife import fold_of_query
from service.data.querysets import short_queries
from service.index.inverted import load_index
from service.ltr.examples import (
    Decoding,
    DevSet,
    QueryExample,
    Selection,
    select_queries,
)
from service.ltr.shard import Shard, shard_specs
from service.ltr.space import FeatureSpace
from service.ltr.task import start_weights
from service.mt.bundle import load_bundle

FORMS = ("paragraph", "short")
POP_LIMIT = 200
CANDIDATES = 100


def _in_form(sel: Selection, form: str, lang: str) -> Selection:
    if form == "paragraph":
        return sel
    sel.queries = short_queries(sel.queries, lang)
    return sel


def _bar(desc: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, unit=" q", mininterval=30)


def build(args: argparse.Namespace) -> dict[str, Any]:
    lang = args.lang
    data = DATA / "clir" / f"lohelp-{lang}"
    model = ROOT / "models" / f"{lang}-en"
    index = load_index(ROOT / "indexes" / "docs")
    serving = load_bundle(model)
    active = serving.active_weights()
    start = start_weights(active.weights, 1.0)
    train = _in_form(
        select_queries(data / "queries.train.tsv", data / "qrels.train.txt", index, args.limit),
        args.form,
        lang,
    )
    dev_sel = _in_form(
        select_queries(
            data / "queries.dev.tsv", data / "qrels.dev.txt", index, require_relevant=False
        ),
        args.form,
        lang,
    )
    k = json.loads((args.jackknife / "fold-0.json").read_text())["folds"]
    (spec,) = shard_specs(train, 1, model="", index=str(index.path), start=start,
                          candidates=CANDIDATES, pop_limit=POP_LIMIT, lex=True)  # fmt: skip
    space = FeatureSpace()
    examples: list[QueryExample] = []
    failed: dict[str, str] = {}
    seconds = 0.0
    skipped = 0
    t0 = time.perf_counter()
    for fold in range(k):  # each query decoded by the bundle that never saw its page
        path = args.jackknife / f"fold-{fold}"
        mine = tuple(q for q in spec.queries if fold_of_query(q[0], k) == fold)
        shard = Shard(replace(spec, model=str(path), queries=mine), load_bundle(path), index)
        shard.space = space  # one feature space for all folds and the dev set
        bar = _bar(f"{lang} {args.form} train fold {fold}", len(mine))
        stats = shard.build(lambda n, _t, bar=bar: bar.update(n - bar.n))
        bar.close()
        examples.extend(shard.examples)
        failed.update(stats["failed"])
        seconds += stats["seconds"]
        skipped += stats["skipped"]
        del shard
    dec = Decoding(serving, index, start, pop_limit=POP_LIMIT, lex=True)
    bar = _bar(f"{lang} {args.form} dev", len(dev_sel.queries))
    t = time.perf_counter()
    dev = DevSet.build(dec, dev_sel, space=space, progress=lambda n, _t: bar.update(n - bar.n))
    bar.close()
    dev_seconds = time.perf_counter() - t
    order = {q: n for n, q in enumerate(train.queries)}
    examples.sort(key=lambda e: order[e.qid])
    return {
        "key": {
            "lang": lang,
            "form": args.form,
            "start": active.version,
            "jackknife": str(args.jackknife),
            "folds": k,
            "limit": args.limit,
            "candidates": CANDIDATES,
            "pop_limit": POP_LIMIT,
        },
        "start": start,
        "space": space,
        "examples": examples,
        "train_queries": dict(train.queries),
        "train_qrels": train.qrels,
        "failed": failed,
        "dev": (dev.queries, dev.qrels, dev.failed),
        "stats": {
            "train_queries": len(examples),
            "train_failed": len(failed),
            "train_skipped_no_relevant_candidate": skipped,
            "train_skipped_no_relevant_in_index": train.no_relevant_in_index,
            "train_seconds_per_query": round(seconds / max(1, len(train.queries)), 3),
            "dev_queries": len(dev.queries),
            "dev_seconds_per_query": round(dev_seconds / max(1, len(dev_sel.queries)), 3),
            "megabytes_per_query": round(
                sum(e.nbytes() for e in examples) / 1e6 / max(1, len(examples)), 3
            ),
            "features": len(space),
            "seconds": round(time.perf_counter() - t0, 1),
        },
    }


def load(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        out: dict[str, Any] = pickle.load(f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lang", choices=["de", "zh"])
    ap.add_argument("--jackknife", type=Path, required=True, help="bench.jackknife folds dir")
    ap.add_argument("--form", choices=FORMS, default="paragraph")
    ap.add_argument("--limit", type=int, default=None, help="first N training queries only")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = build(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(args.out)
    print(json.dumps({"out": str(args.out), **out["stats"]}))


if __name__ == "__main__":
    main()

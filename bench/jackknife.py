"""Jackknifed translation models for learning to rank on unseen training queries.

The LibreOffice training queries come from the same pages as the LibreOffice paragraph pairs
of the parallel data (data README §3), so the serving model translates them from memory and
weights learned on their forests do not carry over to dev queries (bench/README.md, "Learning
to rank"). A jackknife fixes that without losing training queries: the training pages are
split into ``K`` folds (by a salted hash of the page, so a page's German and Chinese queries
fall in the same fold), and fold ``k``'s bundle is trained on the parallel data minus the
LibreOffice pairs of fold ``k``'s pages. ``bench.bench_ltr --jackknife DIR`` then decodes every
training query with the bundle that never saw its page; the dev queries keep the serving model.

Run (one fold per process, both folds at once on two cores)::

    nice -n 5 .venv/bin/python -m bench.jackknife de --folds 2 --fold 0 --out /work/runs/jk-de
    nice -n 5 .venv/bin/python -m bench.jackknife de --folds 2 --fold 1 --out /work/runs/jk-de

Writes ``DIR/fold-<k>/`` (a bundle; not committed) and ``DIR/fold-<k>.json`` (pairs kept and
removed). The bundles use the serving model's training settings; the LTR benchmark decodes
with the serving model's weights, so the folds need no tuning of their own.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import time
from pathlib import Path

from bench.common import DATA
from service.core.settings import get_settings
from service.mt.training.train import TrainConfig, train_model

LOHELP = "lohelp:"


def page_key(path: str) -> str:
    """The 12 hex digits that name a LibreOffice page in the query ids (data README §2)."""
    return hashlib.sha1(path.encode("utf-8")).hexdigest()[:12]


def fold_of_key(key: str, folds: int) -> int:
    """The jackknife fold of a page, from its 12-hex-digit key (salted: independent of the
    train/dev/test split, which hashes the same path unsalted)."""
    return int(hashlib.sha1(f"jackknife:{key}".encode()).hexdigest(), 16) % folds


def fold_of_query(qid: str, folds: int) -> int:
    """The fold of a LibreOffice query ``lo-<lang>-<key>``."""
    return fold_of_key(qid.rsplit("-", 1)[-1], folds)


def fold_of_origin(origin: str, folds: int) -> int | None:
    """The fold of a parallel pair's page (``lohelp:<path>#<par_id>``); None for gettext."""
    if not origin.startswith(LOHELP):
        return None
    path = origin[len(LOHELP) :].split("#", 1)[0]
    return fold_of_key(page_key(path), folds)


def write_fold_corpus(src: Path, out: Path, fold: int, folds: int) -> dict[str, int]:
    """Copy ``src`` to ``out`` without the LibreOffice pairs of ``fold``'s pages."""
    kept = removed = 0
    tmp = out.with_name(out.name + ".tmp")
    with (
        gzip.open(src, "rt", encoding="utf-8") as fin,
        gzip.open(tmp, "wt", encoding="utf-8") as fout,
    ):
        for line in fin:
            if fold_of_origin(line.split("\t", 1)[0], folds) == fold:
                removed += 1
            else:
                kept += 1
                fout.write(line)
    tmp.replace(out)
    return {"kept": kept, "removed": removed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("lang", choices=["de", "zh"])
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--fold", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if not 0 <= args.fold < args.folds:
        raise SystemExit(f"--fold must be in 0..{args.folds - 1}")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    corpus = args.out / f"parallel-fold-{args.fold}.tsv.gz"
    counts = write_fold_corpus(
        DATA / "parallel" / f"{args.lang}-en.tsv.gz", corpus, args.fold, args.folds
    )
    manifest = train_model(
        corpus,
        DATA / "lm" / "en.txt.gz",
        args.out / f"fold-{args.fold}",
        TrainConfig(src=args.lang, tgt="en", rule_table_limit=get_settings().rule_table_limit),
    )
    record = {
        "lang": args.lang,
        "folds": args.folds,
        "fold": args.fold,
        "pairs": counts,
        "seconds": round(time.perf_counter() - t0, 1),
        "timings": manifest.get("timings"),
    }
    (args.out / f"fold-{args.fold}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record))


if __name__ == "__main__":
    main()

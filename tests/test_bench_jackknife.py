"""The jackknife folds of bench/jackknife.py: a query and its page's parallel pairs share a fold,
and a fold's corpus drops exactly that fold's LibreOffice pairs."""

from __future__ import annotations

import gzip
from pathlib import Path

from bench.jackknife import fold_of_origin, fold_of_query, page_key, write_fold_corpus

PATHS = [f"text/swriter/guide/page_{i}.html" for i in range(40)]


def test_page_keys_of_the_parallel_data_name_the_training_queries(shared_data: Path) -> None:
    """The rule is the data's own: the LibreOffice pairs' pages, keyed by page_key, are
    the training queries' pages (the parallel data holds train pages only)."""
    with gzip.open(shared_data / "parallel" / "de-en.tsv.gz", "rt", encoding="utf-8") as f:
        keys = {
            page_key(o[len("lohelp:") :].split("#", 1)[0])
            for o in (line.split("\t", 1)[0] for line in f)
            if o.startswith("lohelp:")
        }
    with open(shared_data / "clir" / "lohelp-de" / "queries.train.tsv", encoding="utf-8") as f:
        train = {line.split("\t", 1)[0].rsplit("-", 1)[-1] for line in f}
    with open(shared_data / "clir" / "lohelp-de" / "queries.dev.tsv", encoding="utf-8") as f:
        dev = {line.split("\t", 1)[0].rsplit("-", 1)[-1] for line in f}
    assert len(train & keys) > 0.9 * len(train)
    assert not dev & keys


def test_query_and_its_pages_pairs_share_a_fold() -> None:
    for folds in (2, 3):
        seen = set()
        for path in PATHS:
            fold = fold_of_origin(f"lohelp:{path}#par_id1234", folds)
            assert fold == fold_of_query(f"lo-de-{page_key(path)}", folds)
            assert fold == fold_of_query(f"lo-zh-{page_key(path)}", folds)
            seen.add(fold)
        assert seen == set(range(folds))  # 40 pages cover every fold
    assert fold_of_origin("gettext:coreutils", 2) is None


def test_fold_corpus_drops_exactly_the_folds_pages(tmp_path: Path) -> None:
    rows = [f"gettext:pkg{i}\tfremd {i}\tforeign {i}\n" for i in range(5)]
    rows += [f"lohelp:{p}#par_{j}\tfremd {p}\tforeign {p}\n" for p in PATHS for j in range(2)]
    src = tmp_path / "parallel.tsv.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.writelines(rows)
    for fold in (0, 1):
        out = tmp_path / f"fold-{fold}.tsv.gz"
        counts = write_fold_corpus(src, out, fold, 2)
        with gzip.open(out, "rt", encoding="utf-8") as f:
            kept = f.readlines()
        expected = [r for r in rows if fold_of_origin(r.split("\t", 1)[0], 2) != fold]
        assert kept == expected
        assert counts == {"kept": len(expected), "removed": len(rows) - len(expected)}
        assert 0 < counts["removed"] < 2 * len(PATHS)
        assert sum(r.startswith("gettext:") for r in kept) == 5

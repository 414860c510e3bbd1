"""The sentence-pool index and ``clir build-index``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from service.cli import main
from service.index import InvertedIndex, build_docs_index, build_pool_index, read_manifest

POOL = [
    ("p1", "Click OK to close the dialog."),
    ("p2", "Select the cells to sort."),
    ("p3", "Click Sort to sort the selected cells."),
    ("p4", "The dialog closes."),
]


@pytest.fixture
def pool_file(tmp_path: Path) -> Path:
    path = tmp_path / "pool.en.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(f"{sid}\t{text}\n" for sid, text in POOL)
    return path


def test_pool_index(pool_file: Path, tmp_path: Path) -> None:
    result = build_pool_index(pool_file, tmp_path / "pool", tokenizer="regex")
    assert result.manifest["build"]["kind"] == "pool"
    index = InvertedIndex.load(tmp_path / "pool")
    assert index.n_docs == 4
    assert index.doc("p3").text == "Click Sort to sort the selected cells."
    assert index.doc("p3").title == ""
    assert index.doc_tokens(2) == ["click", "sort", "to", "sort", "the", "selected", "cells", "."]
    sort = index.term_id("sort")
    assert sort is not None
    assert index.df[sort] == 2
    assert index.postings(sort).tfs.tolist() == [1, 2]
    hits = index.bm25_topk(index.tokenize("sort the cells"), k=2)
    # "sort" and "cells" occur in p2 and p3 (rsj = log(2.5/2.5) = 0 with 4 sentences): so
    # nothing is weighted, and "the" is in all four: nothing matches with a non-zero weight
    assert hits.docs.tolist() == []
    hits = index.bm25_topk(index.tokenize("close the dialog OK"), k=4)
    assert [index.doc_id(int(d)) for d in hits.docs] == ["p1"]


def test_cli_builds_skips_and_forces(
    pool_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "indexes" / "pool"
    args = ["build-index", "--pool", str(pool_file), "--out", str(out), "--tokenizer", "regex"]
    assert main([*args, "--rsj", "keep"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["n_docs"] == 4 and first["skipped"] is False and first["rsj"] == "keep"
    assert main([*args, "--rsj", "keep"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["skipped"] is True
    assert "up to date" in captured.err
    assert main([*args, "--rsj", "keep", "--force"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped"] is False
    assert main([*args, "--limit", "2", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["n_docs"] == 2
    assert read_manifest(out)["build"]["limit"] == 2
    assert read_manifest(out)["build"]["rsj"] == "floor"


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["build-index", "--docs", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x")]
    )
    assert code == 1
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "fine"}\n{"id": "b"\n')
    code = main(
        ["build-index", "--docs", str(bad), "--out", str(tmp_path / "x"), "--tokenizer", "regex"]
    )
    assert code == 1
    assert "bad.jsonl:2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_the_english_tokenizer_is_used_by_name(tmp_path: Path) -> None:
    from service.data import write_docs
    from service.index.analysis import LONG_STOPWORDS
    from service.records import Doc
    from service.text import get_tokenizer

    src = tmp_path / "d.jsonl"
    write_docs(src, [Doc("a", "Cats", "The cat's mat-maker sat."), Doc("b", "", "Dogs bark.")])
    index_result = build_docs_index(src, tmp_path / "ix")  # default tokenizer: "en"
    build = index_result.manifest["build"]
    assert build["tokenizer"] == "en"
    assert build["tokenizer_signature"] == get_tokenizer("en").signature() + "+normalize-v1"
    index = InvertedIndex.load(tmp_path / "ix")
    moses = get_tokenizer("en").tokenize
    assert index.tokenize("The cat's mat.") == moses("The cat's mat.")
    # normalised like the grammar's target side: markup and placeholders go, entities unescape
    assert index.tokenize("<b>Open</b> %s files &amp; folders") == ["open", "files", "&", "folders"]
    tokens = moses("Cats") + moses("The cat's mat-maker sat.") + moses("Dogs bark.")
    # the default analysis chain: no punctuation-only or one-character terms
    assert build["analysis"] == "word+min2+stop-long"
    expected = sorted(
        {t for t in tokens if len(t) > 1 and any(c.isalnum() for c in t)} - LONG_STOPWORDS
    )
    assert index.vocab.terms() == expected
    assert "." in tokens and "@-@" in tokens and "'s" in tokens and "the" in tokens

"""Readers and writers: round trips, gzip, error policies with file and line numbers."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from service.data import (
    load_qrels,
    load_queries,
    load_run,
    rank_entries,
    read_docs,
    read_parallel,
    read_pool,
    read_qrels,
    write_docs,
    write_parallel,
    write_qrels,
    write_queries,
    write_run,
)
from service.data.io import atomic_write
from service.errors import DataFormatError, MissingResourceError
from service.records import Doc, ParallelPair, Qrel, Query, ScoredDoc


def test_parallel_round_trip_gz(tmp_path: Path) -> None:
    pairs = [
        ParallelPair("gettext:x", "Datei öffnen", "Open file"),
        ParallelPair("o", "中文", "zh"),
    ]
    path = tmp_path / "p.tsv.gz"
    assert write_parallel(path, pairs) == 2
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert list(read_parallel(path)) == pairs


def test_docs_round_trip_and_validation(tmp_path: Path) -> None:
    docs = [Doc("lo:a", "Title", "line one\nline two", "libreoffice-help"), Doc("m:x", "", "t")]
    path = tmp_path / "docs.jsonl"
    write_docs(path, docs)
    assert list(read_docs(path)) == docs
    path.write_text('{"id": "a", "text": "ok"}\nnot json\n{"id": "", "text": "x"}\n[1]\n')
    with pytest.raises(DataFormatError, match=r"docs.jsonl:2: invalid JSON"):
        list(read_docs(path))


def test_skip_policy_counts_and_reports_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.txt"
    path.write_text("q1 0 d1 3\nq1 0 d2\nq1 0 d3 x\n\nq2 0 d1 1\n")
    got = list(read_qrels(path, on_error="skip"))
    assert got == [Qrel("q1", "d1", 3), Qrel("q2", "d1", 1)]
    err = capsys.readouterr().err
    assert "skipped 2 malformed line(s)" in err
    assert "line 2" in err and "line 3" in err


def test_fail_policy_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_text("o\tf\te\nonly\ttwo\n")
    with pytest.raises(DataFormatError) as info:
        list(read_parallel(path))
    assert info.value.line_no == 2
    assert str(path) in str(info.value)


def test_non_utf8_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "pool.tsv"
    path.write_bytes(b"gt:1\tgood line\ngt:2\tbad \xff\xfe bytes\ngt:3\tfine\n")
    with pytest.raises(DataFormatError, match=r":2: not valid UTF-8"):
        list(read_pool(path))
    assert [s.id for s in read_pool(path, on_error="skip")] == ["gt:1", "gt:3"]


def test_truncated_gzip_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv.gz"
    data = gzip.compress(("o\tf\te\n" * 5000).encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match="corrupt or truncated"):
        list(read_parallel(path))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(MissingResourceError, match=r"nope\.tsv: no such file"):
        list(read_parallel(tmp_path / "nope.tsv"))


def test_queries_duplicate_qid_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    write_queries(path, [Query("a", "eins"), Query("b", "zwei")])
    assert load_queries(path) == {"a": "eins", "b": "zwei"}
    path.write_text("a\teins\na\tzwei\n")
    with pytest.raises(DataFormatError, match="more than once"):
        load_queries(path)


def test_run_round_trip_and_ranking(tmp_path: Path) -> None:
    scored = [ScoredDoc("q", "a", 1.0), ScoredDoc("q", "b", 2.0), ScoredDoc("q", "c", 1.0)]
    entries = rank_entries(scored, tag="bowfd")
    assert [(e.doc_id, e.rank) for e in entries] == [("b", 1), ("c", 2), ("a", 3)]
    path = tmp_path / "r.run"
    write_run(path, entries)
    assert path.read_text().splitlines()[0] == "q Q0 b 1 2.000000 bowfd"
    assert load_run(path) == {"q": {"a": 1.0, "b": 2.0, "c": 1.0}}
    path.write_text("q Q0 a 1 nan t\n")
    with pytest.raises(DataFormatError, match="not finite"):
        load_run(path)


def test_qrels_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    write_qrels(path, [Qrel("q1", "d1", 3), Qrel("q1", "d2", 0)])
    assert load_qrels(path) == {"q1": {"d1": 3, "d2": 0}}


def test_atomic_write_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_a_document_over_the_size_limit_is_an_error_naming_its_line_and_id(
    tmp_path: Path,
) -> None:
    path = tmp_path / "docs.jsonl"
    big = Doc("lo:big", "Big", "ä" * 1500, "s")  # 3,003 bytes of UTF-8 in 1,503 characters
    write_docs(path, [Doc("lo:a", "A", "small", "s"), big, Doc("lo:c", "C", "x", "s")])
    assert len(list(read_docs(path))) == 3  # no limit: as before
    assert len(list(read_docs(path, max_doc_bytes=3003))) == 3  # at the limit: accepted
    with pytest.raises(DataFormatError) as info:
        list(read_docs(path, max_doc_bytes=3002))
    message = str(info.value)
    assert "docs.jsonl:2:" in message and "'lo:big'" in message
    assert "3,003 bytes" in message and "at most 3,002" in message
    assert "CLIR_MAX_DOC_BYTES" in message
    skipped = list(read_docs(path, on_error="skip", max_doc_bytes=3002))
    assert [d.id for d in skipped] == ["lo:a", "lo:c"]

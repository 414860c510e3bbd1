"""Passages, and vectors beside an index: build, resume, refuse what is not theirs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from service.dense.passages import PassageParams, passages, windows
from service.dense.vectors import (
    DENSE_DIR,
    PARTIAL_DIR,
    build_vectors,
    open_vectors,
    vectors_status,
)
from service.errors import ConfigurationError, DataFormatError
from service.index.inverted import InvertedIndex
from tests.dense.conftest import HashEncoder, copy_index


def test_windows_cut_at_spaces_and_stop_at_the_limit() -> None:
    text = "aaaa bbbb cccc dddd eeee"
    assert windows(text, 10, 10) == ["aaaa bbbb", "cccc dddd", "eeee"]
    assert windows(text, 10, 2) == ["aaaa bbbb", "cccc dddd"]
    assert windows("x" * 25, 10, 5) == ["x" * 10, "x" * 10, "x" * 5]  # no space: a hard cut
    assert "".join(windows(text, 7, 100)).replace(" ", "") == text.replace(" ", "")


def test_passages_carry_the_title() -> None:
    p = PassageParams(chars=50, max_passages=3)
    assert passages("Title", "", p) == ["Title"]
    assert passages("", "body", p) == ["body"]
    got = passages("T", "word " * 30, p)
    assert len(got) == 3 and all(x.startswith("T\n") for x in got)
    with pytest.raises(ConfigurationError, match="at least one passage"):
        PassageParams(max_passages=0)


def test_vectors_match_an_encoding_by_hand(dense_index: InvertedIndex) -> None:
    vectors = open_vectors(dense_index.path)
    assert vectors is not None and vectors.n_docs == dense_index.n_docs
    enc = HashEncoder()
    params = PassageParams(chars=60, max_passages=2)
    for docno in range(dense_index.n_docs):
        doc = dense_index.doc(docno)
        want = enc.encode_passages(passages(doc.title, doc.text, params))
        rows = slice(int(vectors.doc_ptr[docno]), int(vectors.doc_ptr[docno + 1]))
        got = vectors.codes[rows] * vectors.scales[rows][:, None]
        np.testing.assert_allclose(got, want, atol=1 / 127)


def test_build_resumes_after_a_kill(toy_index: InvertedIndex, tmp_path: Path, monkeypatch) -> None:
    import service.dense.vectors as mod

    monkeypatch.setattr(mod, "CHUNK_DOCS", 3)  # 8 documents: 3 chunks
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    enc = HashEncoder()
    calls: list[int] = []

    class Killed(Exception):
        pass

    def progress(done: int, total: int, seconds: float) -> None:
        calls.append(done)
        if len(calls) == 2:
            raise Killed  # as a kill after the second chunk was written

    with pytest.raises(Killed):
        build_vectors(index, enc, progress=progress)
    assert not (Path(index.path) / DENSE_DIR).exists()
    assert vectors_status(index.path) == {"complete": False, "embedded": 6}
    again = HashEncoder()
    done = build_vectors(index, again)
    assert done is not None and again.calls == 1  # only the last chunk was embedded
    assert not (Path(index.path) / PARTIAL_DIR).exists()
    fresh = copy_index(Path(toy_index.path), tmp_path / "fresh")
    whole = build_vectors(fresh, HashEncoder())
    assert whole is not None
    np.testing.assert_array_equal(done.codes, whole.codes)
    np.testing.assert_array_equal(done.doc_ptr, whole.doc_ptr)


def test_a_partial_build_of_other_parameters_starts_over(
    toy_index: InvertedIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.dense.vectors as mod

    monkeypatch.setattr(mod, "CHUNK_DOCS", 3)
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    assert build_vectors(index, HashEncoder(), PassageParams(100, 1), limit_seconds=0.0) is None
    assert vectors_status(index.path) == {"complete": False, "embedded": 3}
    built = build_vectors(index, HashEncoder(), PassageParams(60, 2))
    assert built is not None and built.params == PassageParams(60, 2)
    with pytest.raises(ConfigurationError, match="--force"):
        build_vectors(index, HashEncoder(), PassageParams(100, 1))
    assert build_vectors(index, HashEncoder(), PassageParams(100, 1), force=True) is not None


def test_vectors_of_other_documents_are_refused(dense_index: InvertedIndex, tmp_path: Path) -> None:
    manifest = Path(dense_index.path) / DENSE_DIR / "manifest.json"
    body = json.loads(manifest.read_text())
    body["index"] = "[9]:other"
    manifest.write_text(json.dumps(body))
    with pytest.raises(DataFormatError, match="other documents than the index's"):
        open_vectors(dense_index.path)


def test_damaged_vectors_name_the_file(dense_index: InvertedIndex) -> None:
    codes = Path(dense_index.path) / DENSE_DIR / "codes.npy"
    codes.write_bytes(codes.read_bytes()[:-5])
    with pytest.raises(DataFormatError, match=r"codes\.npy"):
        open_vectors(dense_index.path)


def test_an_index_without_vectors_has_none(toy_index: InvertedIndex, tmp_path: Path) -> None:
    index = copy_index(Path(toy_index.path), tmp_path / "idx")
    assert open_vectors(index.path) is None
    shutil.rmtree(tmp_path / "idx")

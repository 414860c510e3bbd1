"""The on-disk format: save/load round trip, atomic writes, damaged files, skip-if-current."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.core.arraydir import sha256_file
from service.errors import ConfigurationError, DataFormatError, MissingResourceError, NotFoundError
from service.index import InvertedIndex, build_docs_index, is_current, read_manifest, storage
from service.records import Doc
from tests.index.conftest import SEVEN


def _build(src: Path, out: Path, **kw: object) -> InvertedIndex:
    kw.setdefault("analysis", "none")  # every token a term: lengths as counted by hand
    kw.setdefault("title_weight", 1)  # titles count once, as counted by hand
    build_docs_index(src, out, tokenizer="regex", **kw)  # type: ignore[arg-type]
    return InvertedIndex.load(out)


def test_round_trip_keeps_documents_vocabulary_and_postings(
    seven_docs: Path, tmp_path: Path
) -> None:
    index = _build(seven_docs, tmp_path / "ix")
    again = InvertedIndex.load(tmp_path / "ix", verify=True)
    assert isinstance(again.df.base, np.memmap)  # memory-mapped, not read into memory
    assert again.n_docs == 7
    for i, doc in enumerate(SEVEN):
        assert again.doc(i) == doc
        assert again.doc(doc.id) == doc
        assert again.doc_id(i) == doc.id
        assert again.docno(doc.id) == i
    for t in range(index.n_terms):
        a, b = index.postings(t), again.postings(t)
        assert a.docs.tolist() == b.docs.tolist()
        assert a.weights.tolist() == b.weights.tolist()
    assert again.doc_lengths.tolist() == [7, 5, 4, 8, 2, 2, 4]
    manifest = read_manifest(tmp_path / "ix")
    assert manifest["format_version"] == storage.FORMAT_VERSION
    assert manifest["build"]["k1"] == 1.2 and manifest["build"]["b"] == 0.75
    assert manifest["build"]["tokenizer"] == "regex"
    assert manifest["build"]["source_sha256"] == sha256_file(seven_docs)
    assert manifest["counts"]["n_docs"] == 7
    assert again.signature()["rsj"] == "floor"
    with pytest.raises(NotFoundError, match="nope"):
        again.doc("nope")
    with pytest.raises(NotFoundError):
        again.doc(7)


def test_unicode_terms_and_ids(tmp_path: Path) -> None:
    from service.data import write_docs

    src = tmp_path / "u.jsonl"
    write_docs(src, [Doc("ü:1", "Größe", "naïve café"), Doc("ü:2", "", "café 東京")])
    index = _build(src, tmp_path / "ix")
    assert index.doc("ü:2").text == "café 東京"
    cafe = index.term_id("café")
    assert cafe == 0  # sorted by code point: "café" < "größe" < "naïve" < "東京"
    assert index.postings(cafe).docs.tolist() == [0, 1]
    assert index.term_id("größe") is not None and index.term_id("東京") is not None


class Boom(RuntimeError):
    pass


def test_a_crash_while_tokenizing_leaves_no_index(seven_docs: Path, tmp_path: Path) -> None:
    seen = []

    def tokenize(text: str) -> list[str]:
        seen.append(text)
        if len(seen) > 5:
            raise Boom("tokenizer crashed")
        return text.split()

    (tmp_path / "out").mkdir()
    with pytest.raises(Boom):
        build_docs_index(seven_docs, tmp_path / "out" / "ix", tokenizer="regex", tokenize=tokenize)
    assert len(seen) == 6
    assert list((tmp_path / "out").iterdir()) == []  # no index, no temporary directory


def test_a_crash_while_writing_keeps_the_old_index(
    seven_docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "ix"
    _build(seven_docs, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_save = np.save
    calls = []

    def failing_save(*args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 4:
            raise OSError("disk full")
        real_save(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        build_docs_index(seven_docs, out, tokenizer="regex", rsj_policy="keep", force=True)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl.gz", "ix"]
    assert InvertedIndex.load(out, verify=True).rsj_policy.value == "floor"


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) - 3]))
    elif how == "flip":  # same size, one data byte changed
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "header":
        path.write_bytes(b"garbage!" * (len(data) // 8) + b"x" * (len(data) % 8))
    elif how == "delete":
        path.unlink()


@pytest.mark.parametrize(
    ("file", "how", "verify"),
    [
        ("post_weight.npy", "truncate", False),
        ("vocab_blob.npy", "truncate", False),
        ("post_docs.npy", "header", False),
        ("text_blob.npy", "delete", False),
        ("doc_len.npy", "flip", True),
        ("post_docs.npy", "flip", False),  # a document number out of range: structural check
    ],
)
def test_damaged_files_are_named(
    seven_docs: Path, tmp_path: Path, file: str, how: str, verify: bool
) -> None:
    out = tmp_path / "ix"
    _build(seven_docs, out)
    _damage(out / file, how)
    with pytest.raises(DataFormatError, match=file.replace(".", r"\.")):
        InvertedIndex.load(out, verify=verify)


def test_manifest_problems(seven_docs: Path, tmp_path: Path) -> None:
    out = tmp_path / "ix"
    with pytest.raises(MissingResourceError, match="no index directory"):
        InvertedIndex.load(out)
    _build(seven_docs, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["format_version"] = 999
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataFormatError, match="format version 999"):
        InvertedIndex.load(out)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(DataFormatError, match=r"manifest\.json"):
        InvertedIndex.load(out)


def test_skip_when_current_and_rebuild_when_settings_change(
    seven_docs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ix"
    first = build_docs_index(seven_docs, out, tokenizer="regex")
    assert not first.skipped
    assert build_docs_index(seven_docs, out, tokenizer="regex").skipped
    assert not build_docs_index(seven_docs, out, tokenizer="regex", force=True).skipped
    assert not build_docs_index(seven_docs, out, tokenizer="regex", rsj_policy="drop").skipped
    assert read_manifest(out)["build"]["rsj"] == "drop"
    limited = build_docs_index(seven_docs, out, tokenizer="regex", rsj_policy="drop", limit=3)
    assert not limited.skipped and limited.manifest["counts"]["n_docs"] == 3
    # other source bytes: not current any more
    from service.data import write_docs

    write_docs(seven_docs, SEVEN[:6])
    assert not is_current(out, _params_of(out))


def _params_of(out: Path):  # type: ignore[no-untyped-def]
    from service.index import BuildParams

    b = dict(read_manifest(out)["build"])
    b["source_sha256"] = "0" * 64
    return BuildParams(**b)


def test_bad_input_is_a_domain_error(tmp_path: Path) -> None:
    from service.data import write_docs
    from service.errors import ClirError

    src = tmp_path / "dup.jsonl"
    write_docs(src, [Doc("a", "", "x y"), Doc("a", "", "z")])
    with pytest.raises(DataFormatError, match="'a' occurs more than once"):
        build_docs_index(src, tmp_path / "ix", tokenizer="regex")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ClirError, match="no documents"):
        build_docs_index(empty, tmp_path / "ix", tokenizer="regex")
    with pytest.raises(ConfigurationError, match="regex"):
        build_docs_index(src, tmp_path / "ix", tokenizer="klingon")
    assert not (tmp_path / "ix").exists()

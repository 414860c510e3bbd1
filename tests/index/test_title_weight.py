"""The title weight (BM25F in the simple form of Robertson, Zaragoza & Taylor 2004): an index
whose titles count ``w`` times must equal, posting for posting, an index of the same documents
with each title written ``w`` times; plus its manifest, signature, settings and errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from service.cli import main as cli_main
from service.core.settings import get_settings
from service.data import write_docs
from service.errors import InvalidInputError
from service.index import InvertedIndex, build_docs_index, is_current, read_manifest
from service.index.build import BuildParams, build_arrays, build_in_memory
from service.index.tokenizers import regex_tokenize
from service.records import Doc

DOCS = [
    Doc("tables", "Inserting Tables", "Choose Table - Insert Table. A table has rows.", "lo"),
    Doc("sheets", "Inserting Sheets", "Choose Sheet - Insert Sheet. Tables of a sheet.", "lo"),
    Doc("notitle", "", "tables tables tables and more tables of tables", "man"),
    Doc("sort", "Sorting Tables", "Sort the rows: choose Data - Sort.", "lo"),
    Doc("print", "Printing", "Choose File - Print. Tables print on 2 pages.", "lo"),
]


def _repeated(docs: list[Doc], w: int) -> list[Doc]:
    return [Doc(d.id, "\n".join([d.title] * w) if d.title else "", d.text, d.source) for d in docs]


def _arrays(docs: list[Doc], **kw: object) -> dict[str, object]:
    arrays, _ = build_arrays(docs, regex_tokenize, k1=1.2, b=0.75, **kw)  # type: ignore[arg-type]
    return arrays


@pytest.mark.parametrize("w", [1, 2, 3, 5])
@pytest.mark.parametrize("chain", ["none", "word+min2+stop-long"])
def test_weighted_title_equals_the_title_written_w_times(w: int, chain: str) -> None:
    weighted = _arrays(DOCS, title_weight=w, analysis=chain)
    reference = _arrays(_repeated(DOCS, w), title_weight=1, analysis=chain)
    for name in ("vocab_blob", "vocab_offsets", "df", "rsj", "post_offsets", "post_docs",
                 "post_tf", "post_weight", "doc_len", "text_blob"):  # fmt: skip
        assert weighted[name].tolist() == reference[name].tolist(), name  # type: ignore[attr-defined]
    # the stored titles are the documents' own, not repeated
    assert bytes(weighted["title_blob"]).decode() == "".join(d.title for d in DOCS)  # type: ignore[call-overload]


def test_worked_example_by_hand() -> None:
    """``tables`` in "Inserting Tables" (title once, text 0 times) at w = 3: tf 3, length
    3·2 + 9; checked against the BM25 formula written out here."""
    w, k1, b = 3, 1.2, 0.75
    index = build_in_memory(DOCS, regex_tokenize, k1=k1, b=b, title_weight=w,
                            analysis="word+min2")  # fmt: skip
    assert index.signature()["title_weight"] == w
    lengths = []
    for d in DOCS:
        title = [t for t in regex_tokenize(d.title) if len(t) > 1]
        text = [t for t in regex_tokenize(d.text) if len(t) > 1 and any(c.isalnum() for c in t)]
        lengths.append(w * len(title) + len(text))
    assert index.doc_lengths.tolist() == lengths
    avdl = sum(lengths) / len(lengths)
    term = index.vocab.id("tables")
    post = index.postings(term)
    df = 5  # every document has "tables" in its title or text
    idf = max(0.0, math.log((len(DOCS) - df + 0.5) / (df + 0.5)))
    assert post.docs.tolist() == [0, 1, 2, 3, 4]
    assert post.tfs.tolist() == [w * 1 + 0, 1, 5, w * 1, 1]
    term_t = index.vocab.id("inserting")
    p = index.postings(term_t)
    assert p.tfs.tolist() == [w, w]
    norm = k1 * (1 - b + b * lengths[0] / avdl)
    rsj = math.log((len(DOCS) - 2 + 0.5) / (2 + 0.5))
    # this project's BM25 leaves out the constant factor (k1 + 1)
    assert p.weights[0] == pytest.approx(rsj * w / (w + norm), rel=1e-6)
    assert idf == 0.0 and post.weights.tolist() == [0.0] * 5  # in every document: no weight


def test_a_title_match_outranks_the_same_words_in_text(tmp_path: Path) -> None:
    docs = [
        Doc("title", "Page Styles", "Choose one and apply it to a document.", "lo"),
        Doc("text", "Formatting", "Page styles set page margins; other styles are styles.", "lo"),
    ] + [Doc(f"other{i}", f"Topic {i}", f"Choose option {i} for text.", "lo") for i in range(8)]
    path = tmp_path / "d.jsonl"
    write_docs(path, docs)
    ranked = {}
    for w in (1, 3):
        build_docs_index(path, tmp_path / f"w{w}", tokenizer="regex", title_weight=w,
                         analysis="word+min2")  # fmt: skip
        index = InvertedIndex.load(tmp_path / f"w{w}")
        hits = index.bm25_topk(index.tokenize("page styles"), 2)
        ranked[w] = [index.doc_id(int(d)) for d in hits.docs]
    assert ranked[1][0] == "text"
    assert ranked[3][0] == "title"


def test_manifest_signature_and_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_docs(path, DOCS)
    built = build_docs_index(path, tmp_path / "ix", tokenizer="regex", title_weight=2)
    assert built.manifest["build"]["title_weight"] == 2
    assert InvertedIndex.load(tmp_path / "ix").signature()["title_weight"] == 2
    params = BuildParams(**read_manifest(tmp_path / "ix")["build"])
    assert is_current(tmp_path / "ix", params)
    # another weight is another index: the build is not skipped
    again = build_docs_index(path, tmp_path / "ix", tokenizer="regex", title_weight=3)
    assert not again.skipped and again.manifest["build"]["title_weight"] == 3
    same = build_docs_index(path, tmp_path / "ix", tokenizer="regex", title_weight=3)
    assert same.skipped
    # the default is the setting
    default = build_docs_index(path, tmp_path / "ix2", tokenizer="regex")
    assert default.manifest["build"]["title_weight"] == get_settings().docs_title_weight


def test_an_index_from_before_title_weights_reads_as_weight_one(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_docs(path, DOCS)
    build_docs_index(path, tmp_path / "ix", tokenizer="regex", title_weight=1)
    manifest = read_manifest(tmp_path / "ix")
    build = dict(manifest["build"])
    del build["title_weight"]
    old = InvertedIndex(tmp_path / "ix", {**manifest, "build": build},
                        InvertedIndex.load(tmp_path / "ix")._a)  # fmt: skip
    assert old.signature()["title_weight"] == 1
    # and it is not current for a build with today's parameters: make index rebuilds it
    assert not is_current(tmp_path / "ix", BuildParams(**{**build, "title_weight": 3}))


@pytest.mark.parametrize("bad", [0, -1, 101, 10**9, 1.5, True, "3"])
def test_a_bad_weight_is_refused_by_name(bad: object, tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_docs(path, DOCS)
    with pytest.raises(InvalidInputError, match="title weight must be an integer from 1 to 100"):
        build_docs_index(path, tmp_path / "ix", tokenizer="regex", title_weight=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "ix").exists()


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.jsonl"
    write_docs(path, DOCS)
    out = tmp_path / "ix"
    assert cli_main(["build-index", "--docs", str(path), "--out", str(out), "--tokenizer",
                     "regex", "--title-weight", "4", "--quiet"]) == 0  # fmt: skip
    assert read_manifest(out)["build"]["title_weight"] == 4
    pool = tmp_path / "pool.tsv"
    pool.write_text("s1\tA table .\n", encoding="utf-8")
    code = cli_main(["build-index", "--pool", str(pool), "--out", str(tmp_path / "p"),
                     "--title-weight", "2", "--quiet"])  # fmt: skip
    assert code != 0
    assert "--title-weight applies to --docs" in capsys.readouterr().err


def test_every_scorer_signature_names_the_title_weight(toy_bundle, toy_index) -> None:  # type: ignore[no-untyped-def]
    from service.retrieval.runner import make_scorer

    assert toy_index.title_weight == get_settings().docs_title_weight
    for method in ("dt", "psq", "bowfd"):
        parts = make_scorer(method, toy_index, toy_bundle).signature().split("|")
        assert f"title:{toy_index.title_weight}" in parts

"""The analysis chain: its steps, the index built with it (against a reference built by hand),
and the query side seeing index terms the same way (term_id, bm25_topk, scorer signatures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.data import write_docs
from service.errors import ConfigurationError, DataFormatError
from service.index import InvertedIndex, build_docs_index, build_pool_index
from service.index.analysis import STOPWORDS, Analyzer, analysis_signature, parse_chain
from service.index.tokenizers import regex_tokenize
from service.records import Doc

DOCS = [
    Doc("faq", "Perl FAQ", "Can I sort a hash? Can I print a list? Can I do it? I can?"),
    Doc("tables", "Inserting Tables", "To insert a table, choose Table - Insert Table."),
    Doc(
        "sort", "Sorting", "Sort the rows of a table: choose Data - Sort (ascending or descending)."
    ),
    Doc("print", "Printing", "Choose File - Print. The document is printed on 2 pages."),
]


@pytest.fixture()
def docs_file(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    write_docs(path, DOCS)
    return path


def test_steps_in_canonical_order_and_unknown_steps_named() -> None:
    assert parse_chain("min2+word") == ("word", "min2")
    assert parse_chain("stem, stop") == ("stop", "stem")
    assert parse_chain("none") == parse_chain("") == ()
    assert Analyzer.from_spec("min2+word").name == "word+min2"
    assert analysis_signature("min2+word") == analysis_signature("word+min2")
    assert analysis_signature("word") != analysis_signature("word+min2")
    with pytest.raises(ConfigurationError, match=r"'lemma'.*word, min2, stop, stop-long, stem"):
        parse_chain("word+lemma")


@pytest.mark.parametrize(
    ("chain", "token", "term"),
    [
        ("none", "?", "?"),
        ("word", "?", None),
        ("word", "--", None),
        ("word", "c++", "c++"),  # a token with a letter stays whole
        ("word", "i", "i"),
        ("word+min2", "i", None),
        ("word+min2", "2", None),
        ("word+min2", "42", "42"),
        ("word+min2+stop", "the", None),
        ("word+min2+stop", "table", "table"),
        ("word+min2+stop", "how", "how"),
        ("word+min2+stop-long", "how", None),
        ("word+min2+stop-long", "'t", None),
        ("word+min2+stop-long", "table", "table"),
        ("word+min2+stem", "tables", "tabl"),
        ("word+min2+stem", "inserting", "insert"),
        ("stem", "?", "?"),
    ],
)
def test_each_step(chain: str, token: str, term: str | None) -> None:
    assert Analyzer.from_spec(chain).term(token) == term


def test_stopwords_are_lowercase_words() -> None:
    assert "the" in STOPWORDS and "table" not in STOPWORDS
    assert all(w == w.lower() and w.isalpha() for w in STOPWORDS)


@pytest.mark.parametrize("chain", ["word", "word+min2", "word+min2+stop", "word+min2+stem"])
def test_index_equals_one_built_from_pre_analysed_tokens(
    chain: str, docs_file: Path, tmp_path: Path
) -> None:
    """Reference: the tokenizer followed by the analyzer, given as a custom tokenizer to an
    index without analysis; postings, lengths and weights must be the same."""
    analyzer = Analyzer.from_spec(chain)
    built = build_docs_index(docs_file, tmp_path / "a", tokenizer="regex", analysis=chain)
    assert built.manifest["build"]["analysis"] == chain
    assert built.manifest["build"]["analysis_signature"] == analysis_signature(chain)
    ref_built = build_docs_index(
        docs_file,
        tmp_path / "b",
        tokenizer="regex",
        tokenize=lambda text: analyzer.terms(regex_tokenize(text)),
        analysis="none",
    )
    assert ref_built.manifest["counts"]["n_tokens"] == built.manifest["counts"]["n_tokens"]
    a, b = InvertedIndex.load(tmp_path / "a"), InvertedIndex.load(tmp_path / "b")
    assert [a.vocab.term(i) for i in range(a.n_terms)] == [
        b.vocab.term(i) for i in range(b.n_terms)
    ]
    assert a.doc_lengths.tolist() == b.doc_lengths.tolist()
    for t in range(a.n_terms):
        assert a.postings(t).docs.tolist() == b.postings(t).docs.tolist()
        assert a.postings(t).weights.tolist() == b.postings(t).weights.tolist()


def test_query_side_goes_through_the_chain(docs_file: Path, tmp_path: Path) -> None:
    build_docs_index(docs_file, tmp_path / "ix", tokenizer="regex", analysis="word+min2+stem")
    index = InvertedIndex.load(tmp_path / "ix")
    vocab = {index.vocab.term(i) for i in range(index.n_terms)}
    assert "?" not in vocab and "i" not in vocab and "tabl" in vocab
    assert index.term_id("Tables".lower()) == index.term_id("table") == index.vocab.id("tabl")
    assert index.term_id("?") is None and index.term_id("i") is None
    assert index.term_ids(["tables", "?", "table"]) == [index.vocab.id("tabl")] * 2
    assert index.analyze("Inserting Tables?") == ["insert", "tabl"]
    # a query of punctuation only reaches no document
    assert len(index.bm25_topk(index.tokenize("???"), 10).docs) == 0
    # two tokens with one term share its weight
    merged = index.bm25_weighted({"tables": 0.5, "table": 0.5}, 4)
    single = index.bm25_weighted({"table": 1.0}, 4)
    assert merged.docs.tolist() == single.docs.tolist()
    assert merged.scores.tolist() == pytest.approx(single.scores.tolist())
    assert index.signature()["analysis"] == analysis_signature("word+min2+stem")


def test_questions_no_longer_match_the_faq_through_punctuation(
    docs_file: Path, tmp_path: Path
) -> None:
    build_docs_index(docs_file, tmp_path / "none", tokenizer="regex", analysis="none")
    build_docs_index(docs_file, tmp_path / "word", tokenizer="regex", analysis="word+min2")
    query = regex_tokenize("I insert table?")
    before = InvertedIndex.load(tmp_path / "none").bm25_topk(query, 4)
    after = InvertedIndex.load(tmp_path / "word").bm25_topk(query, 4)
    ids = InvertedIndex.load(tmp_path / "word").doc_id
    assert ids(int(before.docs[0])) == "faq"
    assert ids(int(after.docs[0])) == "tables"


def test_pool_keeps_every_token_by_default(tmp_path: Path) -> None:
    pool = tmp_path / "pool.tsv"
    pool.write_text("s1\tDo it now ?\ns2\tA table .\n", encoding="utf-8")
    built = build_pool_index(pool, tmp_path / "p", tokenizer="regex")
    assert built.manifest["build"]["analysis"] == "none"
    index = InvertedIndex.load(tmp_path / "p")
    assert index.doc_tokens(0) == ["do", "it", "now", "?"]


def test_the_default_docs_chain_and_the_setting_clir_build_index_passes(
    docs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.cli import main
    from service.core.settings import Settings, get_settings
    from service.index.build import DOCS_ANALYSIS

    assert Settings().docs_analysis == DOCS_ANALYSIS  # the default of both
    built = build_docs_index(docs_file, tmp_path / "default", tokenizer="regex")
    assert built.manifest["build"]["analysis"] == DOCS_ANALYSIS
    monkeypatch.setenv("CLIR_DOCS_ANALYSIS", "word")
    get_settings.cache_clear()
    args = ["build-index", "--docs", str(docs_file), "--out", str(tmp_path / "ix"), "--quiet"]
    assert main([*args, "--tokenizer", "regex"]) == 0
    assert InvertedIndex.load(tmp_path / "ix").manifest["build"]["analysis"] == "word"
    with pytest.raises(ConfigurationError, match="'klingon'"):
        build_docs_index(docs_file, tmp_path / "x", tokenizer="regex", analysis="klingon")
    assert not (tmp_path / "x").exists()


def _edit_manifest(path: Path, **build: object) -> None:
    manifest_path = path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for key, value in build.items():
        if value is None:
            manifest["build"].pop(key, None)
        else:
            manifest["build"][key] = value
    manifest_path.write_text(json.dumps(manifest))


def test_an_index_from_an_older_chain_is_refused_with_the_rebuild_command(
    docs_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ix"
    build_docs_index(docs_file, out, tokenizer="regex", analysis="word+min2")
    _edit_manifest(out, analysis=None, analysis_signature=None)
    with pytest.raises(DataFormatError, match=r"before analysis chains.*clir build-index --docs"):
        InvertedIndex.load(out)
    _edit_manifest(out, analysis="word+min2", analysis_signature="word+min2-v0")
    with pytest.raises(DataFormatError, match=r"word\+min2-v0.*--force"):
        InvertedIndex.load(out)


def test_a_pool_from_before_analysis_chains_is_read_as_every_token_a_term(tmp_path: Path) -> None:
    pool = tmp_path / "pool.tsv"
    pool.write_text("s1\tDo it now ?\n", encoding="utf-8")
    build_pool_index(pool, tmp_path / "p", tokenizer="regex")
    _edit_manifest(tmp_path / "p", analysis=None, analysis_signature=None)
    index = InvertedIndex.load(tmp_path / "p")
    assert index.analyzer.name == "none" and index.term_id("?") is not None


def test_an_index_in_memory_equals_the_one_written(docs_file: Path, tmp_path: Path) -> None:
    from service.index import build_in_memory

    build_docs_index(docs_file, tmp_path / "ix", tokenizer="regex", analysis="word+min2")
    disk = InvertedIndex.load(tmp_path / "ix")
    memory = build_in_memory(DOCS, regex_tokenize, analysis="word+min2")
    assert memory.analyzer.name == "word+min2" and memory.n_docs == disk.n_docs
    assert memory.vocab.terms() == disk.vocab.terms()
    for t in range(disk.n_terms):
        assert memory.postings(t).docs.tolist() == disk.postings(t).docs.tolist()
        assert memory.postings(t).weights.tolist() == disk.postings(t).weights.tolist()

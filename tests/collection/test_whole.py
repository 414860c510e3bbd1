"""An index built whole is a store like any other: opened by ``open_store`` as a collection of
one shard holding one segment (the index itself), ranked by the collection's per-segment
partials and exact merge — as the index's own scorer ranks it, to the last bit, for every
method, with and without feedback, under every rsj policy — and refused writes with the
command that builds a collection."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from service.collection.docstore import open_store, probe_index, store_scorer, whole_index, writable
from service.data import write_docs
from service.errors import ConflictError, NotFoundError
from service.index import build_docs_index
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.base import DecodedQuery, get_scorer
from service.retrieval.bowfd.scorer import BowFdScorer
from service.retrieval.feedback import FeedbackParams
from service.retrieval.query import decode_query
from service.search.pipeline import SearchOptions
from service.search.stores import store_pipeline
from tests.collection.test_live import QUERIES, WORDS


def documents(n: int, seed: int) -> list[Doc]:
    """``n`` documents of a few words the toy bundle translates to among filler words (some
    in most documents, so that each rsj policy has terms to act on)."""
    rng = random.Random(seed)
    fillers = [f"filler{i}" for i in range(150)]
    out = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(0, 4)) + rng.choices(fillers, k=rng.randint(2, 30))
        words += ["common"] * (rng.random() < 0.7)
        rng.shuffle(words)
        out.append(
            Doc(f"d{i}", " ".join(rng.choices(WORDS, k=rng.randint(0, 2))), " ".join(words), "t")
        )
    return out


@pytest.fixture(scope="module", params=["floor", "drop", "keep"])
def index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"whole-{request.param}")
    write_docs(root / "docs.jsonl", documents(300, 5))
    build_docs_index(root / "docs.jsonl", root / "idx", rsj_policy=request.param)
    return root / "idx"


@pytest.fixture(scope="module")
def queries(toy_bundle: ModelBundle) -> list[DecodedQuery]:
    decoder = toy_bundle.decoder()
    return [decode_query(decoder, q, "de", qid=f"q{i}") for i, q in enumerate(QUERIES)]


def test_an_index_opens_as_a_collection_of_one_segment(index: Path) -> None:
    one = InvertedIndex.load(index)
    store = open_store(index)
    assert store.built_whole and store.path == index
    snap = store.snapshot
    assert snap.commit.shards == 1 and [len(s) for s in snap.shards] == [1]
    assert snap.n_docs == one.n_docs and snap.commit.avdl == pytest.approx(one.avdl)
    assert whole_index(store) is probe_index(store) is snap.views()[0].index
    for docno in (0, 17, one.n_docs - 1):
        doc = one.doc(docno)
        assert store.doc(docno) == doc and store.doc(doc.id) == doc  # by number and by id
    with pytest.raises(NotFoundError):
        store.doc("no-such-id")
    assert store.refresh() is False  # nothing is ever committed to it
    with pytest.raises(ConflictError, match="--shards"):
        writable(store)
    for token in ("haus", "the", "zzzunheard"):
        assert snap.collection_df(token) == one.collection_df(token)


@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
@pytest.mark.parametrize("form", [None, "interpolate", "rerank"])
def test_a_one_segment_collection_ranks_as_the_index(
    index: Path, toy_bundle: ModelBundle, queries: list[DecodedQuery], method: str, form: str | None
) -> None:
    one = InvertedIndex.load(index)
    feedback = None if form is None else FeedbackParams(form=form, pool=20)  # type: ignore[arg-type]
    scorer = get_scorer(method, one, bundle=toy_bundle)
    store = open_store(index)
    many = store_scorer(store, method, toy_bundle)
    pipe = store_pipeline(store, toy_bundle)
    found = 0
    for q in queries:
        want = scorer.rank(q, 20, feedback=feedback)
        got = many.rank(q, 20, feedback=feedback)
        searched = pipe.search(q, SearchOptions(method, k=20, feedback=feedback))
        pairs = [(h.doc_id, h.score) for h in want.hits]
        found += len(pairs)
        assert [(h.doc_id, h.score) for h in got.hits] == pairs, (method, q.qid)
        assert [(h.doc_id, h.score) for h in searched.hits] == pairs, (method, q.qid)
        assert many.retrieved(got, 20, q) == scorer.retrieved(want, 20, q)
        assert (searched.total, searched.relation) == scorer.retrieved(want, 20, q)
        assert got.signature == want.signature
        assert got.info.get("expansion") == want.info.get("expansion")
    assert found >= 20  # not a trivial agreement


@pytest.mark.parametrize("form", ["rerank", "rerank+interpolate"])
def test_a_rerank_over_a_store_prepares_the_forests_once(
    index: Path,
    toy_bundle: ModelBundle,
    queries: list[DecodedQuery],
    form: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BOW-FD's feedback stage ranks the first ranking's documents again over the forests
    that ranking prepared (with the relevance model's term weights), as the index's scorer
    does — not over forests prepared again (Hieber & Riezler 2015, §3: the forest does not
    depend on the documents)."""
    prepared: list[str] = []
    original = BowFdScorer.prepare_forests

    def counted(self: BowFdScorer, query: DecodedQuery, weighting: object = None) -> object:
        prepared.append(query.qid)
        return original(self, query, weighting)  # type: ignore[arg-type]

    monkeypatch.setattr(BowFdScorer, "prepare_forests", counted)
    feedback = FeedbackParams(form=form, pool=20)  # type: ignore[arg-type]
    pipe = store_pipeline(open_store(index), toy_bundle)
    reranked = 0
    for q in queries:
        prepared.clear()
        outcome = pipe.search(q, SearchOptions("bowfd", k=10, explain=True, feedback=feedback))
        reranked += bool(outcome.hits)
        assert prepared == [q.qid], q.qid
    assert reranked >= 2

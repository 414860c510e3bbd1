"""RM3's relevance model over a collection (Lavrenko & Croft 2001, §3): the vectorised sums
over segments equal one index's over the same documents to the last bit — documents from any
segments, in any order, under each rsj policy a collection can use — and over an index built
whole under every policy."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from service.collection.feedback import relevance_model
from service.collection.reader import Collection
from service.collection.writer import CollectionWriter, create_collection
from service.index.build import build_params, write_index
from service.index.inverted import InvertedIndex
from service.index.tokenizers import get_index_tokenizer
from service.mt.bundle import ModelBundle
from service.retrieval import feedback as one_index
from service.retrieval.feedback import FeedbackParams, cut_relevance
from service.retrieval.query import decode_query
from service.search.pipeline import SearchOptions
from service.search.stores import store_pipeline
from tests.collection.test_live import QUERIES
from tests.collection.test_whole import documents


@pytest.fixture(scope="module", params=["floor", "keep"])  # no collection drops postings
def stores(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Collection, InvertedIndex]:
    """A collection of 3 shards written in several commits (several segments a shard) and the
    index built whole from the same documents in the same order."""
    root = tmp_path_factory.mktemp(f"rm-{request.param}")
    docs = documents(240, 11)
    params = build_params("docs", rsj_policy=request.param)
    write_index(root / "idx", docs, get_index_tokenizer("en"), params)
    create_collection(root / "c", params, 3)
    for start in range(0, len(docs), 60):
        with CollectionWriter(root / "c", buffer_mb=0.002) as w:
            w.add(docs[start : start + 60])
            w.commit()
    coll = Collection(root / "c")
    assert sum(len(shard) for shard in coll.snapshot.shards) > 3  # several segments a shard
    return coll, InvertedIndex.load(root / "idx")


def by_term(index: InvertedIndex, model: dict[int, float]) -> dict[str, float]:
    return {index.term(t): w for t, w in model.items()}


@pytest.mark.parametrize("seed", range(6))
def test_the_collection_model_is_the_index_model(
    stores: tuple[Collection, InvertedIndex], seed: int
) -> None:
    coll, index = stores
    rng = random.Random(seed)
    seqs = rng.sample(range(index.n_docs), rng.randint(1, 25))  # any order, any segments
    weights = [rng.random() for _ in seqs]
    want = by_term(index, one_index.relevance_model(index, seqs, weights))
    got = relevance_model(coll.snapshot, seqs, weights)
    assert want  # the documents hold weighted terms: there is something to compare
    assert got == want  # every term, every float
    reference = by_term(index, one_index.relevance_model_reference(index, seqs, weights))
    assert got.keys() == reference.keys()
    assert all(got[t] == pytest.approx(reference[t], rel=1e-12) for t in got)


@pytest.mark.parametrize("policy", ["floor", "drop", "keep"])
def test_over_an_index_built_whole(tmp_path: Path, policy: str) -> None:
    write_index(
        tmp_path / "idx", documents(240, 11), get_index_tokenizer("en"),
        build_params("docs", rsj_policy=policy),
    )  # fmt: skip
    index = InvertedIndex.load(tmp_path / "idx")
    whole = Collection.of_index(index)
    seqs, weights = [17, 3, 200, 42], [0.5, 0.25, 0.125, 0.125]
    want = by_term(index, one_index.relevance_model(index, seqs, weights))
    assert relevance_model(whole.snapshot, seqs, weights) == want


def test_a_document_no_segment_holds_is_refused(stores: tuple[Collection, InvertedIndex]) -> None:
    from service.errors import NotFoundError

    coll, index = stores
    with pytest.raises(NotFoundError, match=f"no document number {index.n_docs}"):
        relevance_model(coll.snapshot, [0, index.n_docs], [0.5, 0.5])


@pytest.mark.parametrize(("seed", "top"), [(0, 1), (1, 5), (2, 10), (3, 30), (4, 1000)])
def test_the_top_terms_cut_as_the_whole_model(
    stores: tuple[Collection, InvertedIndex], seed: int, top: int
) -> None:
    """Naming only the terms that can make RM3's cut (ties at its edge included) cuts to the
    same terms and weights as the whole model — ties broken by the term alike."""
    coll, _ = stores
    rng = random.Random(seed)
    seqs = rng.sample(range(coll.snapshot.n_docs), rng.randint(1, 25))
    weights = [rng.choice([0.5, 0.25, rng.random()]) for _ in seqs]  # equal weights: ties
    whole = relevance_model(coll.snapshot, seqs, weights)
    some = relevance_model(coll.snapshot, seqs, weights, top)
    assert set(some) <= set(whole) and all(some[t] == whole[t] for t in some)
    assert len(some) >= min(top, len(whole))
    params = FeedbackParams(terms=top)
    assert cut_relevance(some, params) == cut_relevance(whole, params)


@pytest.mark.parametrize("form", ["interpolate", "replace", "rerank", "rerank+interpolate"])
def test_a_search_with_feedback_counts_as_over_one_index(
    stores: tuple[Collection, InvertedIndex], toy_bundle: ModelBundle, form: str
) -> None:
    """The whole page of a search with RM3 — hits, the count, its relation and its upper
    bound — over several segments equals the index's, every method (DT's bound once summed
    its segments' top lists)."""
    coll, index = stores
    decoder = toy_bundle.decoder()
    queries = [decode_query(decoder, q, "de", qid=f"q{i}") for i, q in enumerate(QUERIES)]
    feedback = FeedbackParams(form=form, docs=5, pool=30)  # type: ignore[arg-type]
    many, one = (
        store_pipeline(coll, toy_bundle),
        store_pipeline(Collection.of_index(index), toy_bundle),
    )
    seen = 0
    for method in ("dt", "psq", "bowfd"):
        opts = SearchOptions(method, k=20, feedback=feedback)
        for q in queries:
            a, b = one.search(q, opts), many.search(q, opts)
            assert [(h.doc_id, h.score) for h in b.hits] == [(h.doc_id, h.score) for h in a.hits]
            assert (b.total, b.relation, b.total_max) == (a.total, a.relation, a.total_max), (
                method, q.text,
            )  # fmt: skip
            seen += a.total_max is not None
    # a mix's count is a lower bound with an upper bound: some to compare
    assert seen or not feedback.for_method(True).mixes

"""The search pipeline's dense stage: the fused ranking is RRF of the lexical ranking and the
dense reader's exact top list (computed here by the references), over the API as over the
library; off by request or without vectors, the ranking is the method's own."""

from __future__ import annotations

import pytest

from service.collection.reader import Collection
from service.dense.kernels import doc_scores_reference
from service.dense.vectors import open_vectors
from service.index.inverted import InvertedIndex
from service.mt.bundle import ModelBundle
from service.retrieval.base import get_scorer
from service.retrieval.fusion import RankedList, get_fusion
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.search.pipeline import (
    DenseParams,
    SearchOptions,
    SearchPipeline,
    dense_query_text,
)
from service.search.stores import store_pipeline
from tests.dense.conftest import HashEncoder

QUERY = "das haus ist groß"


def _pipeline(index: InvertedIndex, bundle: ModelBundle) -> SearchPipeline:
    return store_pipeline(Collection.of_index(index), bundle)


@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
@pytest.mark.parametrize("fusion", ["rrf", "mix"])
def test_fused_ranking_is_the_reference_fusion(
    dense_index: InvertedIndex, toy_bundle: ModelBundle, method: str, fusion: str
) -> None:
    query = decode_query(decoder_for(toy_bundle), QUERY, "de")
    pipe = _pipeline(dense_index, toy_bundle)
    params = DenseParams(depth=6, fusion=fusion, weight=0.5)
    out = pipe.search(query, SearchOptions(method, k=4, dense=params))
    assert out.dense == "on"
    # the references: the method's own ranking, and every document's best passage by hand
    lexical = get_scorer(method, dense_index, bundle=toy_bundle).rank(query, 6)
    vectors = open_vectors(dense_index.path)
    assert vectors is not None
    qvec = HashEncoder().encode_queries([dense_query_text(out.translation)])[0]
    scores = doc_scores_reference(vectors.codes, vectors.scales, vectors.doc_ptr, qvec)
    dense = sorted(range(len(scores)), key=lambda d: (-scores[d], d))[:6]
    want = get_fusion(fusion, weights=(1.0, 0.5)).fuse_reference(
        [
            RankedList.of([(h.docno, h.score) for h in lexical.hits]),
            RankedList.of([(d, float(scores[d])) for d in dense]),
        ],
        4,
    )
    assert [h.docno for h in out.hits] == want.docs.tolist()
    assert [h.score for h in out.hits] == pytest.approx(want.scores.tolist(), abs=1e-12)
    for h, ranks in zip(out.hits, want.ranks.tolist(), strict=True):
        assert out.readers[h.docno] == {
            name: r for name, r in zip(("lexical", "dense"), ranks, strict=True) if r
        }
    assert out.ranking.signature.endswith(
        f"|{params.signature()}|enc:test-hash:hash32:32|passages:60x2"
    )


def test_dense_off_is_the_methods_own_ranking(
    dense_index: InvertedIndex, toy_bundle: ModelBundle
) -> None:
    query = decode_query(decoder_for(toy_bundle), QUERY, "de")
    out = _pipeline(dense_index, toy_bundle).search(query, SearchOptions("bowfd", k=5))
    own = get_scorer("bowfd", dense_index, bundle=toy_bundle).rank(query, 5)
    assert out.dense == "off" and not out.readers
    assert [(h.docno, h.score) for h in out.hits] == [(h.docno, h.score) for h in own.hits]


def test_a_page_does_not_depend_on_its_size(
    dense_index: InvertedIndex, toy_bundle: ModelBundle
) -> None:
    query = decode_query(decoder_for(toy_bundle), QUERY, "de")
    pipe = _pipeline(dense_index, toy_bundle)
    dense = DenseParams(depth=8)
    whole = pipe.search(query, SearchOptions("dt", k=6, dense=dense)).hits
    page = pipe.search(query, SearchOptions("dt", k=3, offset=3, dense=dense)).hits
    assert [h.docno for h in page] == [h.docno for h in whole[3:6]]


def test_the_head_is_fused_and_the_lexical_ranking_goes_on_below(
    dense_index: InvertedIndex, toy_bundle: ModelBundle
) -> None:
    query = decode_query(decoder_for(toy_bundle), "das haus ist groß . ein auto", "de")
    pipe = _pipeline(dense_index, toy_bundle)
    params = DenseParams(depth=2, fusion="mix")
    out = pipe.search(query, SearchOptions("bowfd", k=8, dense=params))
    lexical = get_scorer("bowfd", dense_index, bundle=toy_bundle).rank(query, 8)
    vectors = open_vectors(dense_index.path)
    assert vectors is not None
    qvec = HashEncoder().encode_queries([dense_query_text(out.translation)])[0]
    scores = doc_scores_reference(vectors.codes, vectors.scales, vectors.doc_ptr, qvec)
    dense = sorted(range(len(scores)), key=lambda d: (-scores[d], d))[:2]
    head = get_fusion("mix").fuse_reference(
        [
            RankedList.of([(h.docno, h.score) for h in lexical.hits[:2]]),
            RankedList.of([(d, float(scores[d])) for d in dense]),
        ],
        8,
    )
    rest = [h.docno for h in lexical.hits if h.docno not in set(head.docs.tolist())]
    want = (head.docs.tolist() + rest)[:8]
    assert [h.docno for h in out.hits] == want
    got = [h.score for h in out.hits]
    tail = got[len(head.docs) :]
    assert got == sorted(got, reverse=True)  # the scores say the order
    assert tail and max(tail) < min(got[: len(head.docs)]) and len(set(tail)) == len(tail)
    for h in out.hits[len(head.docs) :]:  # below the head: the lexical reader's rank only
        assert out.readers[h.docno] == {
            "lexical": 1 + [x.docno for x in lexical.hits].index(h.docno)
        }
    # a page of the ranking is the same page whatever depth was asked
    page = pipe.search(query, SearchOptions("bowfd", k=2, offset=2, dense=params)).hits
    assert [h.docno for h in page] == want[2:4]

"""Translation retrieval over a sentence pool held as a collection ranks exactly as over the
pool index: the committed demo pool as 1, 2 and 4 shards, German TR dev queries decoded by the
demo bundle, the same translations given to both (their k-best search has a time budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.collection import Collection, SnapshotSearcher, build_collection
from service.data import read_queries
from service.index.build import BuildParams
from service.index.inverted import InvertedIndex
from service.mt.bundle import load_bundle
from service.retrieval.base import get_scorer
from service.retrieval.explain import TrExplanation
from service.retrieval.partials import get_method
from service.retrieval.query import decode_query

ROOT = Path(__file__).resolve().parents[3]
DEV = ROOT.parent / "shared" / "data" / "tr" / "de-en" / "queries.dev.tsv"

pytestmark = [pytest.mark.slow, pytest.mark.data]


def test_tr_over_a_pool_collection_equals_the_pool_index(
    tmp_path: Path, weights_root: Path
) -> None:
    """Every 160th German TR dev query (20 spread over the set), dealt in turn to the pool as
    1, 2 and 4 shards of several segments each (each layout checked on a third of them: the
    suite's time budget)."""
    if not DEV.is_file():
        pytest.skip(f"{DEV} is absent (../shared/data beside the checkout)")
    pool = InvertedIndex.load(ROOT / "indexes" / "demo-pool")
    bundle = load_bundle(ROOT / "models" / "demo-de-en", state_root=weights_root)
    docs = [pool.doc(i) for i in range(pool.n_docs)]
    snaps = []
    for shards in (1, 2, 4):
        out = tmp_path / f"c{shards}"
        build_collection(docs, out, BuildParams(**pool.manifest["build"]),
                         shards=shards, buffer_mb=0.5)  # fmt: skip
        snaps.append(Collection(out).snapshot)
        assert sum(len(s) for s in snaps[-1].shards) > shards  # several segments are merged
    scorer = get_scorer("tr", pool, bundle=bundle)
    method = get_method("tr")
    searcher = SnapshotSearcher(bundle)
    decoder = bundle.decoder()
    queries = list(read_queries(DEV))[::160]
    assert len(queries) >= 20
    for i, q in enumerate(queries):
        dq = decode_query(decoder, q.text, "de", qid=q.qid, search=False)
        translations = method.plan(scorer, dq)
        want = scorer.score_translations(translations)
        ranked = sorted(want.scores.items(), key=lambda ds: (-ds[1], ds[0]))[:10]
        snap = snaps[i % len(snaps)]  # a layout, with the same translations as its plan
        parts = [
            p for shard in snap.shards
            if (p := searcher.shard_partial("tr", shard, dq, 10, {}, translations)) is not None
        ]  # fmt: skip
        final = method.finish(method.merge(parts), 10)
        got_ids = [snap.locate_seq(s)[0].index.doc_id(snap.locate_seq(s)[1])
                   for s in final.seqs.tolist()]  # fmt: skip
        assert got_ids == [pool.doc_id(d) for d, _ in ranked], q.qid
        assert final.scores.tolist() == [s for _, s in ranked], q.qid
        assert list(final.explanations) == [
            TrExplanation(tuple(want.found_by[d])) for d, _ in ranked
        ], q.qid

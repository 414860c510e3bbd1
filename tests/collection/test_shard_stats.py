"""A shard worker opens its own shards only, yet scores with the whole collection's statistics:
a term no opened segment holds still has the collection's df (PSQ's expected df sums the dfs
of a word's translations, Darwish & Oard 2003, so one alternative missing from a shard would
raise every other's weight there), and each method's partial over a shard equals the one made
with every shard open."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.collection.manifest import shard_of
from service.collection.reader import Collection
from service.collection.searcher import SnapshotSearcher
from service.collection.writer import CollectionWriter, create_collection
from service.index.build import build_params
from service.mt.bundle import ModelBundle
from service.records import Doc
from service.retrieval.partials import get_method
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES
from tests.collection.test_whole import documents

RARE = ("automobile", "home")  # translations the toy bundle gives "Auto" and "Haus" too


def corpus() -> list[Doc]:
    """The test documents without the words of :data:`RARE`, and three documents of shard 0
    that hold them: the other shards lack them, and PSQ's expected df of "Auto" and "Haus"
    counts them."""

    def common(text: str) -> str:
        return " ".join(w for w in text.split() if w not in RARE)

    docs = [Doc(d.id, common(d.title), common(d.text), d.source) for d in documents(240, 7)]
    ids = (f"rare{i}" for i in range(1000))
    mine = [i for i in ids if shard_of(i, 3) == 0][:3]
    texts = ["an automobile and a car", "at home in the house", "a home and an automobile"]
    return docs + [Doc(i, "", t, "t") for i, t in zip(mine, texts, strict=True)]


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    path = tmp_path_factory.mktemp("shards") / "c"
    create_collection(path, build_params("docs"), 3)
    with CollectionWriter(path, buffer_mb=0.002) as w:
        w.add(corpus())
        w.commit()
    return Collection(path)


def test_a_shard_alone_knows_every_terms_collection_df(collection: Collection) -> None:
    full = collection.snapshot
    terms = {t for v in full.views() for t in v.segment.terms()}
    for shard in range(3):
        alone = Collection(collection.path, shards=[shard]).snapshot
        held = {t for v in alone.views() for t in v.segment.terms()}
        assert shard == 0 or set(RARE) <= terms - held  # the terms of shard 0 alone
        assert {t: alone.collection_df(t) for t in sorted(terms)} == {
            t: full.collection_df(t) for t in sorted(terms)
        }
        assert alone.collection_df("zzzunheard") == 0


@pytest.mark.parametrize("method", ["dt", "psq", "bowfd"])
def test_a_shards_partial_is_the_one_made_with_every_shard_open(
    collection: Collection, toy_bundle: ModelBundle, method: str
) -> None:
    decoder = toy_bundle.decoder()
    searcher = SnapshotSearcher(toy_bundle)
    full = collection.snapshot
    lead = searcher.any_scorer(full, method, {})
    alone = [Collection(collection.path, shards=[shard]).snapshot for shard in range(3)]
    for i, text in enumerate(QUERIES):
        query = decode_query(decoder, text, "de", qid=f"q{i}")
        plan = get_method(method).plan(lead, query)
        for shard in range(3):
            got = searcher.shard_partial(method, alone[shard].shards[shard], query, 20, {}, plan)
            want = searcher.shard_partial(method, full.shards[shard], query, 20, {}, plan)
            assert got is not None and want is not None
            assert got.seqs.tolist() == want.seqs.tolist(), (method, text, shard)
            assert got.scores.tolist() == want.scores.tolist(), (method, text, shard)


def test_a_shard_alone_learns_the_terms_a_later_commit_adds(tmp_path: Path) -> None:
    """The term dictionary is read once and extended by each commit it sees."""
    path = tmp_path / "c"
    create_collection(path, build_params("docs"), 3)
    with CollectionWriter(path) as w:
        w.add(corpus())
        w.commit()
    alone = Collection(path, shards=[1])
    assert alone.snapshot.collection_df("zeppelin") == 0
    new = next(i for i in (f"z{n}" for n in range(1000)) if shard_of(i, 3) == 0)
    with CollectionWriter(path) as w:
        w.add([Doc(new, "", "a zeppelin over the house", "t")])
        w.commit()
    assert alone.refresh()
    assert alone.snapshot.collection_df("zeppelin") == 1
    assert not any(v.index.term_id("zeppelin") is not None for v in alone.snapshot.views())

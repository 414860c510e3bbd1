"""Documents by id in a segment: a binary search over the ids' hashes, checked against a
dictionary, and two ids that share a hash told apart by the id itself."""

from __future__ import annotations

import random

import numpy as np

from service.collection.segment import IdTable, id_hash


def test_id_table_finds_what_a_dictionary_finds() -> None:
    rng = random.Random(5)
    ids = [f"doc-{rng.randrange(10**9)}-ü" for _ in range(3000)]
    ids = list(dict.fromkeys(ids))
    table = IdTable.of([i.encode() for i in ids], ids.__getitem__)
    reference = {d: n for n, d in enumerate(ids)}
    asked = rng.sample(ids, 500) + [f"missing-{i}" for i in range(500)]
    rng.shuffle(asked)
    got = {asked[i]: docno for i, docno in table.find(asked)}
    assert got == {d: reference[d] for d in asked if d in reference}
    assert np.all(np.diff(table.hashes.astype(np.float64)) >= 0)
    assert id_hash(b"x") == id_hash(b"x") != id_hash(b"y")


def test_ids_sharing_a_hash_are_told_apart() -> None:
    ids = ["a", "b", "c"]
    # every id given one hash: only the id itself can tell them apart
    table = IdTable(np.zeros(3, np.uint64), np.arange(3, dtype=np.int64), ids.__getitem__)
    same = np.zeros(2, np.uint64)
    assert table.find(["c", "zz"], same) == [(0, 2)]
    assert table.find(["b", "a"], same) == [(0, 1), (1, 0)]

"""Tests of the LM table and its query kernels (service.mt.lm.table, service.mt.lm.kernels): the
keys and the layout, word ids, and the structure queries of state minimisation, by hand, in the
kernels, against a brute-force pass, the reference ArpaLM and KenLM's own states."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from service.mt.lm import (
    LN10,
    ArpaLM,
    KenLM,
    LmTable,
    backoff10,
    build_lm_table,
    droppable,
    left_extends_ids,
    logp10,
)
from service.mt.lm.assemble import MAX_LOAD
from tests.mt.lm.structure import (
    assert_kenlm_minimises_alike,
    assert_left_flags,
    assert_structures_agree,
    structure_queries,
)
from tests.mt.lm.toy_lm import (
    PRUNED_ARPA,
    TOY_ARPA,
    TOY_BIGRAM,
    key_of,
    write,
)


def test_the_kernel_and_the_keys(toy: Path) -> None:
    table = build_lm_table(toy, verify=False)
    assert (table.order, len(table.vocab)) == (3, 5)
    assert [table.unk, table.bos, table.eos] == [0, 1, 2]
    size = len(table.keys)
    assert size & (size - 1) == 0 and 4 / size <= MAX_LOAD
    # the key of "<s> a b" hashes from the last word backwards
    slot = int(np.flatnonzero(table.keys == key_of([table.vocab[w] for w in ("<s>", "a", "b")]))[0])
    assert table.probs[slot] == np.float32(-0.2)
    assert table.backoffs[slot] == 0 and np.signbit(table.backoffs[slot])
    ctx = np.array([table.bos, table.vocab["a"]], dtype=np.int64)
    assert logp10(*table.arrays(), ctx, 2, table.vocab["b"]) == np.float32(-0.2)
    assert logp10(*table.arrays(), ctx, 0, table.vocab["b"]) == np.float32(-0.8)
    assert table.nbytes == size * 17 + 5 * 9  # 8 + 4 + 4 + 1 bytes per slot, 4 + 4 + 1 per word
    for arr in (*table.arrays(), *table.structure_arrays()):
        assert not arr.flags.writeable


def test_word_ids_and_oov_like_kenlm(toy: Path) -> None:
    table = build_lm_table(toy, verify=False)
    kenlm = KenLM(toy)
    for word in ("a", "b", "</s>", "<s>", "<unk>", "zzz", "A", ""):
        assert table.is_oov(word) == kenlm.is_oov(word), word
    assert table.word_id("zzz") == table.unk
    assert table.word_id("b") == 4


# --- structure queries (state minimisation) ----------------------------------------------

# An order-3 model for the hand-written cases: "c d" and the unigram e have nonzero backoffs
# but extend nothing; "a b" has a zero backoff and is the context of "a b </s>"; the unigram d
# and "b </s>" have zero backoffs and extend nothing.
STRUCTURE_ARPA = """\\data\\
ngram 1=8
ngram 2=4
ngram 3=2

\\1-grams:
-1.0\t<unk>
-99\t<s>\t-0.5
-0.7\t</s>
-0.6\ta\t-0.3
-0.8\tb\t-0.2
-0.9\tc\t-0.4
-1.1\td
-1.2\te\t-0.25

\\2-grams:
-0.4\t<s> a\t-0.1
-0.5\ta b
-0.3\tb </s>
-0.35\tc d\t-0.2

\\3-grams:
-0.2\t<s> a b
-0.11\ta b </s>

\\end\\
"""

# An order-4 model pruned as SRILM prunes: "y x a </s>" without "x a </s>" and "a </s>". KenLM
# inserts those two as blanks and marks their contexts "x a" and "a" as extended: both have a
# zero backoff and are the context of no listed n-gram, yet they are kept. (The n-grams of p
# and q make room for the blanks in KenLM's probing tables.)
BLANK_CONTEXT_ARPA = """\\data\\
ngram 1=8
ngram 2=5
ngram 3=4
ngram 4=1

\\1-grams:
-1.0\t<unk>
-99\t<s>\t-0.5
-0.7\t</s>
-0.6\ta
-0.9\tx\t-0.4
-1.1\ty\t-0.35
-1.2\tp\t-0.1
-1.3\tq\t-0.1

\\2-grams:
-0.35\tx a
-0.45\ty x\t-0.05
-0.5\tp q\t-0.1
-0.5\tq p\t-0.1
-0.5\tp p\t-0.1

\\3-grams:
-0.25\ty x a\t-0.12
-0.2\tp q p
-0.2\tq p q
-0.2\tp p q

\\4-grams:
-0.05\ty x a </s>

\\end\\
"""

STRUCTURE_RIGHT = [
    (("c", "d"), ("c", "d")),  # a nonzero backoff without an extension is kept
    (("e",), ("e",)),
    (("a", "b"), ("a", "b")),  # a zero backoff with an extension is kept
    (("d",), ()),  # a zero backoff without an extension is dropped
    (("b", "</s>"), ()),
    (("b", "d"), ()),  # unlisted, then d
    (("d", "a"), ("a",)),  # unlisted, then the backoff of a
    (("zzz", "qqq"), ()),  # <unk> <unk> is unlisted, <unk> has no backoff
    (("zzz", "a"), ("a",)),
    (("<s>",), ("<s>",)),
    (("<s>", "a"), ("<s>", "a")),
    ((), ()),
]

STRUCTURE_LEFT = [
    ((), True),
    (("a",), True),  # <s> a
    (("b",), True),  # a b
    (("a", "b"), True),  # <s> a b
    (("b", "</s>"), True),  # a b </s>
    (("</s>",), True),
    (("d",), True),  # c d
    (("c",), False),
    (("e",), False),
    (("c", "d"), False),
    (("<s>", "a"), False),
    (("<s>",), False),
    (("zzz",), False),  # <unk> ends no n-gram
    (("a", "b", "</s>"), False),  # an n-gram of the highest order
    (("<s>", "a", "b", "</s>"), False),
]

STRUCTURE_BACKOFF = [
    (("c", "d"), -0.2),
    (("a",), -0.3),
    (("<s>",), -0.5),
    (("a", "b"), 0.0),  # listed without a backoff
    (("d", "a"), 0.0),  # not listed
    (("zzz",), 0.0),  # <unk> has none
    (("x", "y"), 0.0),
    (("<s>", "a", "b"), 0.0),
    ((), 0.0),
]


@pytest.fixture(scope="module")
def structure_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[LmTable, ArpaLM]:
    arpa = write(tmp_path_factory.mktemp("structure"), STRUCTURE_ARPA)
    return build_lm_table(arpa, verify=True), ArpaLM(arpa)


@pytest.mark.parametrize(("context", "expected"), STRUCTURE_RIGHT)
def test_right_minimal_by_hand(
    structure_models: tuple[LmTable, ArpaLM], context: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    for lm in structure_models:
        assert lm.right_minimal(context) == expected, type(lm).__name__


@pytest.mark.parametrize(("words", "expected"), STRUCTURE_LEFT)
def test_left_extends_by_hand(
    structure_models: tuple[LmTable, ArpaLM], words: tuple[str, ...], expected: bool
) -> None:
    for lm in structure_models:
        assert lm.left_extends(words) is expected, type(lm).__name__


@pytest.mark.parametrize(("context", "log10"), STRUCTURE_BACKOFF)
def test_backoff_by_hand(
    structure_models: tuple[LmTable, ArpaLM], context: tuple[str, ...], log10: float
) -> None:
    table, arpalm = structure_models
    assert table.backoff(context) == float(np.float32(log10)) * LN10
    assert arpalm.backoff(context) == log10 * LN10
    assert isinstance(table.backoff(context), float)


def test_the_structure_kernels(structure_models: tuple[LmTable, ArpaLM]) -> None:
    table, _ = structure_models
    keys, backoffs, uni_backoffs, left_ext, uni_left_ext = table.structure_arrays()
    assert keys is table.keys and left_ext.dtype == np.bool_ and len(left_ext) == len(keys)
    assert len(uni_left_ext) == len(uni_backoffs) == len(table.vocab)
    v = table.vocab
    ids = np.array([v["c"], v["d"], v["a"], v["b"], 0, 0], dtype=np.int64)
    # only the first n ids count
    assert not droppable(keys, backoffs, uni_backoffs, ids, 2)  # c d
    assert droppable(keys, backoffs, uni_backoffs, ids[1:], 2)  # d a: unlisted
    assert not droppable(keys, backoffs, uni_backoffs, ids[2:], 2)  # a b: +0.0
    assert droppable(keys, backoffs, uni_backoffs, ids[1:], 1)  # d
    assert not droppable(keys, backoffs, uni_backoffs, ids, 0)
    assert backoff10(keys, backoffs, uni_backoffs, ids, 2) == np.float32(-0.2)
    assert backoff10(keys, backoffs, uni_backoffs, ids, 1) == np.float32(-0.4)
    assert backoff10(keys, backoffs, uni_backoffs, ids[1:], 2) == 0
    assert backoff10(keys, backoffs, uni_backoffs, ids, 0) == 0
    assert left_extends_ids(keys, left_ext, uni_left_ext, ids[2:], 2)  # a b
    assert left_extends_ids(keys, left_ext, uni_left_ext, ids[1:], 1)  # d
    assert not left_extends_ids(keys, left_ext, uni_left_ext, ids, 1)  # c
    assert not left_extends_ids(keys, left_ext, uni_left_ext, ids, 2)  # c d
    assert left_extends_ids(keys, left_ext, uni_left_ext, ids, 0)


def test_contexts_of_blanks_are_kept_as_kenlm_keeps_them(tmp_path: Path) -> None:
    arpa = write(tmp_path, BLANK_CONTEXT_ARPA)
    table, arpalm = build_lm_table(arpa, verify=True), ArpaLM(arpa)
    for lm in (table, arpalm):
        assert lm.right_minimal(("x", "a")) == ("x", "a")
        assert lm.right_minimal(("a",)) == ("a",)
        assert lm.right_minimal(("y", "x", "a")) == ("y", "x", "a")  # backoff -0.12
        assert lm.right_minimal(("y", "x")) == ("y", "x")  # the context of "y x a"
        assert lm.right_minimal(("<s>",)) == ("<s>",)
        assert lm.right_minimal(("</s>",)) == ()
        # the blanks are suffixes; their suffixes are suffixes of the listed 4-gram
        assert lm.left_extends(("x", "a", "</s>")) and lm.left_extends(("a", "</s>"))
        assert lm.left_extends(("x", "a")) and not lm.left_extends(("y", "x", "a"))
        assert lm.backoff(("x", "a", "</s>")) == 0.0
    assert_left_flags(table, arpalm)


@pytest.mark.parametrize("name", ["toy", "pruned", "bigram", "structure", "blank-context"])
def test_the_structure_equals_arpalms_and_brute_force(tmp_path: Path, name: str) -> None:
    texts = {
        "toy": TOY_ARPA,
        "pruned": PRUNED_ARPA,
        "bigram": TOY_BIGRAM.read_text(encoding="utf-8"),
        "structure": STRUCTURE_ARPA,
        "blank-context": BLANK_CONTEXT_ARPA,
    }
    arpa = write(tmp_path, texts[name])
    table, arpalm = build_lm_table(arpa, verify=False), ArpaLM(arpa)
    assert_left_flags(table, arpalm)
    queries = structure_queries(arpalm, random.Random(5), list(arpalm.entries), 2000)
    assert_structures_agree(table, arpalm, queries)
    assert_kenlm_minimises_alike(table, KenLM(arpa), queries)

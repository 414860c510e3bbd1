"""Tests of the LM as hash-table arrays (service.mt.lm_table): hand-computed backoffs on toy ARPA
files (one with SRILM-style pruned suffixes that KenLM fills with blanks), equality with KenLM
bit for bit (toy and demo LM), correct float32 rounding of ARPA numbers, key collisions and
duplicates, malformed files, the structure queries of state minimisation (by hand, against a
brute-force pass and against ArpaLM), and the on-disk cache (memory-mapped, rebuilt when stale,
corrupt, of the previous format or unwritable)."""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from service.errors import DataFormatError, MissingResourceError
from service.mt import lm_table
from service.mt.lm import LN10, ArpaLM, KenLM
from service.mt.lm_table import (
    SEED,
    LmTable,
    backoff10,
    build_lm_table,
    cache_path,
    droppable,
    left_extends_ids,
    load_lm_table,
    logp10,
    mix,
)
from tests.mt.toy_lm import TOY_ARPA

TOY_BIGRAM = Path(__file__).resolve().parents[1] / "data" / "toy_bigram.arpa"

ROOT = Path(__file__).resolve().parents[2]
DEMO_LM = ROOT / "models" / "demo-de-en" / "lm.arpa"

# TOY_ARPA is tests/data/toy_trigram.arpa; PRUNED_ARPA adds words and n-grams to it:
# a 4-gram model pruned as SRILM prunes: "y x a </s>" is listed, its suffixes "x a </s>" and
# "a </s>" are not. KenLM inserts them as blanks holding the backed-off probabilities (its
# probing tables need room for them: hence the extra trigrams).
PRUNED_ARPA = """\\data\\
ngram 1=7
ngram 2=5
ngram 3=4
ngram 4=1

\\1-grams:
-1.0\t<unk>
-99\t<s>\t-0.5
-0.7\t</s>
-0.6\ta\t-0.3
-0.8\tb\t-0.2
-0.9\tx\t-0.4
-1.1\ty\t-0.35

\\2-grams:
-0.4\t<s> a\t-0.1
-0.5\ta b\t-0.25
-0.3\tb </s>
-0.35\tx a\t-0.15
-0.45\ty x\t-0.05

\\3-grams:
-0.2\t<s> a b
-0.25\ty x a\t-0.12
-0.11\ta b </s>
-0.33\tx a b

\\4-grams:
-0.05\ty x a </s>

\\end\\
"""


def f32sum(*terms: float) -> float:
    """Left-to-right float32 sum: KenLM's arithmetic."""
    total = np.float32(terms[0])
    for t in terms[1:]:
        total = np.float32(total + np.float32(t))
    return float(total)


# (context, word, log10 p in float32, the same by hand in decimal)
TOY_CASES = [
    ((), "a", f32sum(-0.6), -0.6),
    (("<s>",), "a", f32sum(-0.4), -0.4),
    (("<s>", "a"), "b", f32sum(-0.2), -0.2),
    (("a", "b"), "</s>", f32sum(-0.3, -0.25), -0.55),  # bo(a b) + p(</s> | b)
    (("<s>",), "b", f32sum(-0.8, -0.5), -1.3),  # bo(<s>) + p(b)
    (("<s>", "b"), "a", f32sum(-0.6, -0.2), -0.8),  # bo(<s> b) = 0: bo(b) + p(a)
    (("b", "a"), "b", f32sum(-0.5), -0.5),
    (("<s>", "a"), "zzz", f32sum(-1.0, -0.3, -0.1), -1.4),  # zzz is <unk>
    (("a", "zzz"), "</s>", f32sum(-0.7), -0.7),  # bo(<unk>) = 0
    (("zzz", "a"), "b", f32sum(-0.5), -0.5),
    (("<s>", "a", "b", "a"), "b", f32sum(-0.5), -0.5),  # only the last two words count
]

PRUNED_CASES = [
    (("y", "x", "a"), "</s>", f32sum(-0.05), -0.05),  # listed, reached through two blanks
    (("x", "a"), "</s>", f32sum(-0.7, -0.3, -0.15), -1.15),  # the blank "x a </s>"
    (("a",), "</s>", f32sum(-0.7, -0.3), -1.0),  # the blank "a </s>"
    (("<s>", "a"), "</s>", f32sum(-0.7, -0.3, -0.1), -1.1),
    (("b", "x", "a"), "</s>", f32sum(-0.7, -0.3, -0.15), -1.15),
    (("y", "x", "a"), "b", f32sum(-0.33, -0.12), -0.45),  # p(b | x a) + bo(y x a)
    (("b", "x", "a"), "b", f32sum(-0.33), -0.33),
    (("a", "b"), "</s>", f32sum(-0.11), -0.11),
    (("y", "a"), "b", f32sum(-0.5), -0.5),
    (("y", "x"), "a", f32sum(-0.25), -0.25),
    (("y", "x"), "b", f32sum(-0.8, -0.4, -0.05), -1.25),  # p(b) + bo(x) + bo(y x)
]


def key_of(ids: list[int]) -> np.uint64:
    """The table key of the n-gram ``ids`` (oldest first), computed with the public ``mix``."""
    h = SEED
    for w in reversed(ids):
        h = np.uint64(mix(h, np.uint64(w)))  # numba returns a Python int
    return h if h else np.uint64(1)


def write(tmp_path: Path, text: str, name: str = "lm.arpa") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write(tmp_path, TOY_ARPA)


@pytest.fixture
def pruned(tmp_path: Path) -> Path:
    return write(tmp_path, PRUNED_ARPA)


# --- scores ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[LmTable, KenLM, ArpaLM]:
    arpa = write(tmp_path_factory.mktemp("toy"), TOY_ARPA)
    return build_lm_table(arpa, verify=True), KenLM(arpa), ArpaLM(arpa)


@pytest.fixture(scope="module")
def pruned_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[LmTable, KenLM, ArpaLM]:
    arpa = write(tmp_path_factory.mktemp("pruned"), PRUNED_ARPA)
    return build_lm_table(arpa, verify=True), KenLM(arpa), ArpaLM(arpa)


def assert_score(
    models: tuple[LmTable, KenLM, ArpaLM],
    context: tuple[str, ...],
    word: str,
    expected: float,
    decimal: float,
) -> None:
    """The table's score is ``expected`` (the hand-computed ``decimal`` in float32), KenLM's
    to the bit, and ArpaLM's to float32 precision (ArpaLM adds in float64)."""
    table, kenlm, arpalm = models
    assert table.logp10(context, word) == expected
    assert expected == pytest.approx(decimal, abs=1e-6)
    assert table.logp(context, word) == kenlm.logp(context, word)
    assert table.logp(context, word) == pytest.approx(arpalm.logp(context, word), abs=1e-6)


@pytest.mark.parametrize(("context", "word", "expected", "decimal"), TOY_CASES)
def test_toy_scores_by_hand_and_against_kenlm_and_arpalm(
    toy_models: tuple[LmTable, KenLM, ArpaLM],
    context: tuple[str, ...],
    word: str,
    expected: float,
    decimal: float,
) -> None:
    assert_score(toy_models, context, word, expected, decimal)
    assert toy_models[0].logp(context, word) == expected * LN10


@pytest.mark.parametrize(("context", "word", "expected", "decimal"), PRUNED_CASES)
def test_pruned_suffixes_are_filled_in_as_kenlm_does(
    pruned_models: tuple[LmTable, KenLM, ArpaLM],
    context: tuple[str, ...],
    word: str,
    expected: float,
    decimal: float,
) -> None:
    assert_score(pruned_models, context, word, expected, decimal)


def test_blanks_are_counted(pruned: Path, tmp_path: Path) -> None:
    table = load_lm_table(pruned, cache_dir=tmp_path / "cache")
    manifest = json.loads((cache_path(pruned, tmp_path / "cache") / "manifest.json").read_text())
    assert manifest["blanks"] == 2  # "a </s>" and "x a </s>"
    assert manifest["counts"] == [7, 5, 4, 1] and manifest["verified"]
    assert np.count_nonzero(table.keys) == 5 + 4 + 1 + 2


def test_the_kernel_and_the_keys(toy: Path) -> None:
    table = build_lm_table(toy, verify=False)
    assert (table.order, len(table.vocab)) == (3, 5)
    assert [table.unk, table.bos, table.eos] == [0, 1, 2]
    size = len(table.keys)
    assert size & (size - 1) == 0 and 4 / size <= lm_table.MAX_LOAD
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


def test_zero_backoffs_carry_kenlms_extension_sign(tmp_path: Path) -> None:
    # "<s> a" without a backoff is the context of "<s> a b": +0.0, kept in KenLM's state;
    # "b </s>" and the unigram </s> extend nothing: -0.0
    arpa = write(tmp_path, TOY_ARPA.replace("-0.4\t<s> a\t-0.1", "-0.4\t<s> a"))
    table = build_lm_table(arpa, verify=True)
    ids = table.vocab

    def backoff(*ngram: str) -> np.float32:
        slot = np.flatnonzero(table.keys == key_of([ids[w] for w in ngram]))
        return np.float32(table.backoffs[int(slot[0])])

    assert backoff("<s>", "a") == 0 and not np.signbit(backoff("<s>", "a"))
    assert backoff("b", "</s>") == 0 and np.signbit(backoff("b", "</s>"))
    assert np.signbit(table.uni_backoffs[table.eos]) and np.signbit(table.uni_probs[ids["a"]])
    assert table.logp10(("<s>", "a"), "</s>") == f32sum(-0.7, -0.3)


def test_word_ids_and_oov_like_kenlm(toy: Path) -> None:
    table = build_lm_table(toy, verify=False)
    kenlm = KenLM(toy)
    for word in ("a", "b", "</s>", "<s>", "<unk>", "zzz", "A", ""):
        assert table.is_oov(word) == kenlm.is_oov(word), word
    assert table.word_id("zzz") == table.unk
    assert table.word_id("b") == 4


def test_float32_rounding_is_correct_where_float64_rounds_twice(tmp_path: Path) -> None:
    # a decimal just beside a float32 rounding boundary: through float64 it lands on the
    # boundary and rounds to even, KenLM's StringToFloat rounds it the right way
    text = None
    for start in np.arange(-0.61, -0.60, 1e-4, dtype=np.float32):
        lo = np.float32(start)
        hi = np.nextafter(lo, np.float32(-1))
        mid = (float(lo) + float(hi)) / 2
        with localcontext() as ctx:
            ctx.prec = 80
            for offset in (Decimal("1e-30"), Decimal("-1e-30")):
                candidate = format(Decimal(mid) + offset, "f")
                exact = Fraction(Decimal(candidate))
                right = min((lo, hi), key=lambda c: abs(Fraction(float(c)) - exact))
                if np.float32(float(candidate)) != right:
                    text, want = candidate, right
                    break
        if text is not None:
            break
    assert text is not None
    arpa = write(tmp_path, TOY_ARPA.replace("-0.6\ta\t-0.3", f"{text}\ta\t-0.3"))
    table = build_lm_table(arpa, verify=True)  # KenLM agrees
    assert table.uni_probs[table.vocab["a"]] == want
    assert float(table.uni_probs[table.vocab["a"]]) != float(np.float32(float(text)))


def test_the_fast_number_parser_agrees_with_the_exact_one() -> None:
    rng = random.Random(7)
    texts = ["0", "-0", "-99", "1e-3", "-1.5E+2", "+0.25", "-0.30102999566398114", ".5", "5."]
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 22)))
        point = rng.randint(0, len(digits))
        text = f"-{digits[:point]}.{digits[point:]}" if point else f"-{digits}"
        if rng.random() < 0.3:
            text += f"e{rng.randint(-30, 5)}"
        texts.append(text)
    fast_paths = 0
    for text in texts:
        buf = np.frombuffer(text.encode(), dtype=np.uint8)
        value, sure = lm_table._parse_float32(buf, 0, len(buf))
        if sure:
            fast_paths += 1
            exact = lm_table._exact_float32(text)
            assert np.float32(value).view(np.int32) == exact.view(np.int32), text
    assert fast_paths > 2000
    for bad in ("", "-", "1.2.3", "e5", "--1", "0x10", "1e"):
        buf = np.frombuffer(bad.encode(), dtype=np.uint8)
        assert not lm_table._parse_float32(buf, 0, len(buf))[1], bad


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


def assert_left_flags(table: LmTable, arpalm: ArpaLM) -> None:
    """``left_ext`` and ``uni_left_ext`` against a brute-force set of the proper suffixes of
    the listed n-grams, slot by slot (every slot holds a listed n-gram or such a suffix)."""
    suffixes = {ng[i:] for ng in arpalm.entries for i in range(1, len(ng))}
    higher = {ng for ng in suffixes.union(arpalm.entries) if len(ng) >= 2}
    slots = {k: s for s, k in enumerate(table.keys.tolist()) if k}
    assert len(slots) == len(higher)
    ids = table.vocab
    for ngram in higher:
        slot = slots[int(key_of([ids[w] for w in ngram]))]
        assert bool(table.left_ext[slot]) == (ngram in suffixes), ngram
    for word, i in ids.items():
        assert bool(table.uni_left_ext[i]) == ((word,) in suffixes), word


def structure_queries(
    arpalm: ArpaLM, rng: random.Random, ngrams: list[tuple[str, ...]], count: int
) -> list[tuple[str, ...]]:
    """Every run of words inside the given n-grams (their contexts, prefixes and suffixes),
    then ``count`` random tuples of 0 to ``order`` words from the vocabulary, ``<s>``,
    ``<unk>`` and unknown words."""
    queries = {ng[i:j] for ng in ngrams for i in range(len(ng)) for j in range(i, len(ng) + 1)}
    words = [*sorted(arpalm.vocab), "<s>", "<unk>", "</s>", "zzz-oov", "qqq-oov"]
    for _ in range(count):
        queries.add(tuple(rng.choice(words) for _ in range(rng.randint(0, arpalm.order))))
    return sorted(queries)


def assert_structures_agree(table: LmTable, arpalm: ArpaLM, queries: list[tuple[str, ...]]) -> None:
    """Equal answers; backoffs to float32 precision (ArpaLM reads them as float64)."""
    assert table.order == arpalm.order
    for q in queries:
        if len(q) < table.order:
            assert table.right_minimal(q) == arpalm.right_minimal(q), q
        assert table.left_extends(q) == arpalm.left_extends(q), q
        assert table.backoff(q) == pytest.approx(arpalm.backoff(q), rel=1e-6, abs=1e-12), q


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


def assert_kenlm_minimises_alike(
    table: LmTable, kenlm: KenLM, queries: list[tuple[str, ...]]
) -> None:
    """``right_minimal`` is KenLM's own right state: a context (scored from the null context)
    reaches the state of its right-minimal suffix, a suffix of it that is its own minimum and
    whose state differs from that of its own suffix (KenLM's states compare by their words)."""
    null = kenlm.null_state()
    for q in queries:
        if len(q) >= table.order:
            continue
        short = table.right_minimal(q)
        assert q[len(q) - len(short) :] == short and table.right_minimal(short) == short, q
        assert kenlm.score_words(null, q)[1] == kenlm.score_words(null, short)[1], q
        if short:
            assert kenlm.score_words(null, short)[1] != kenlm.score_words(null, short[1:])[1], q


# --- the demo LM -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[LmTable, Path]:
    """The demo LM's table, built and verified once (about 20 s), and its cache directory."""
    cache_dir = tmp_path_factory.mktemp("demo-lm")
    return load_lm_table(DEMO_LM, cache_dir=cache_dir, verify=True), cache_dir


@pytest.mark.slow
def test_demo_lm_equals_kenlm_on_every_ngram_and_random_queries(
    demo_table: tuple[LmTable, Path],
) -> None:
    table, cache_dir = demo_table
    manifest = json.loads((cache_path(DEMO_LM, cache_dir) / "manifest.json").read_text())
    # the build compared every listed n-gram (all but <s>) and 20,000 random queries
    assert manifest["verification"]["ngrams"] == sum(manifest["counts"]) - 1
    assert manifest["verification"]["random_queries"] == lm_table.RANDOM_QUERIES
    assert table.verified and table.order == 3
    # and, independently, through service.mt.lm.KenLM: listed n-grams and random queries
    kenlm = KenLM(DEMO_LM)
    lines = [
        ln.split("\t")[1].split(" ")
        for ln in DEMO_LM.read_text(encoding="utf-8").splitlines()
        if ln.count("\t") >= 1 and not ln.startswith("\\")
    ]
    rng = random.Random(3)
    ngrams = rng.sample(lines, 3000)
    vocab = list(table.vocab)
    queries: list[tuple[list[str], str]] = []
    for ngram in ngrams:
        if ngram[-1] != "<s>":
            queries.append((ngram[:-1], ngram[-1]))
    for q in range(5000):
        base = rng.choice(lines)
        words = [rng.choice(vocab) for _ in range(3)] + base
        n = rng.randint(1, 3)
        words = words[-n:]
        words = [w if rng.random() > 0.1 else f"oov{q}" for w in words]
        if n > 1 and rng.random() < 0.25:
            words[0] = "<s>"
        if words[-1] == "<s>":
            words[-1] = "</s>"
        queries.append((words[:-1], words[-1]))
    assert len(queries) >= 7000
    for context, word in queries:
        assert table.logp(context, word) == kenlm.logp(context, word), (context, word)


@pytest.mark.slow
def test_the_verification_catches_a_wrong_score(tmp_path: Path) -> None:
    arpa = lm_table._read_arpa(DEMO_LM)
    built = lm_table._assemble(arpa)
    lm_table._verify(built, arpa, random_queries=100)
    table = built.table
    probs = table.probs.copy()
    slot = int(np.flatnonzero(table.keys)[1234])
    probs[slot] = np.nextafter(probs[slot], np.float32(0))  # one ulp
    wrong = replace(built, table=replace(table, probs=probs))
    with pytest.raises(DataFormatError, match="differs from KenLM"):
        lm_table._verify(wrong, arpa, random_queries=100)


@pytest.mark.slow
def test_demo_lm_structure_equals_arpalms(demo_table: tuple[LmTable, Path]) -> None:
    table, _ = demo_table
    arpalm = ArpaLM(DEMO_LM)
    # the flags in bulk: as many per-slot flags as suffixes of two words or more, and the
    # per-word flags word by word
    suffixes = {ng[i:] for ng in arpalm.entries for i in range(1, len(ng))}
    assert int(np.count_nonzero(table.left_ext)) == sum(len(s) >= 2 for s in suffixes)
    for word, i in table.vocab.items():
        assert bool(table.uni_left_ext[i]) == ((word,) in suffixes), word
    # the queries on a sample of the listed n-grams and random word tuples
    rng = random.Random(11)
    ngrams = rng.sample(sorted(arpalm.entries), 3000)
    queries = structure_queries(arpalm, rng, ngrams, 3000)
    assert_structures_agree(table, arpalm, queries)
    assert_kenlm_minimises_alike(table, KenLM(DEMO_LM), queries)


# --- build errors ------------------------------------------------------------------------


def test_two_ngrams_with_one_key_are_an_error(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # narrow the keys to two bits: four n-grams of order >= 2 must share a key
    mask = np.uint64(0b11)
    monkeypatch.setattr(lm_table, "_KEY_MASK", mask)
    ids = {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4}

    def key(ngram: tuple[str, ...]) -> int:
        return int(key_of([ids[w] for w in ngram]) & mask) or 1

    seen: dict[int, tuple[str, ...]] = {}
    for ngram in [("<s>", "a"), ("a", "b"), ("b", "</s>"), ("<s>", "a", "b")]:
        if key(ngram) in seen:
            first, second = seen[key(ngram)], ngram
            break
        seen[key(ngram)] = ngram
    with pytest.raises(DataFormatError, match="same 64-bit key") as err:
        build_lm_table(toy, verify=False)
    assert f"{' '.join(first)!r} (of line" in str(err.value)
    assert f"{' '.join(second)!r} (of line" in str(err.value)


def test_an_ngram_listed_twice_is_an_error(tmp_path: Path) -> None:
    text = TOY_ARPA.replace("ngram 2=3", "ngram 2=4").replace(
        "-0.3\tb </s>\n", "-0.3\tb </s>\n-0.35\ta b\n"
    )
    with pytest.raises(DataFormatError, match="'a b' is listed twice \\(also on line 15\\)") as e:
        build_lm_table(write(tmp_path, text), verify=False)
    assert e.value.line_no == 17


def test_an_ngram_without_its_context_is_refused_like_kenlm(tmp_path: Path) -> None:
    text = TOY_ARPA.replace("-0.2\t<s> a b", "-0.2\tb a b")
    arpa = write(tmp_path, text)
    with pytest.raises(DataFormatError, match="context 'b a' of this 3-gram") as e:
        build_lm_table(arpa, verify=False)
    assert e.value.line_no == 19
    with pytest.raises(DataFormatError):
        KenLM(arpa)


MALFORMED = [
    (TOY_ARPA, "", None, "no \\\\data\\\\ header"),
    ("\\data\\\n", "", 1, "text before the \\\\data"),
    ("\\data\\", "hello\n\\data\\", 1, "text before the"),
    ("ngram 2=3", "ngram 2=x", 3, "expected 'ngram N=count'"),
    ("ngram 2=3", "ngram 3=3", 3, "expected the count of the 2-grams"),
    ("-0.6\ta\t-0.3", "-0.6\ta\t-0.3\t7", 10, "needs 2 or 3 fields, got 4"),
    ("-0.6\ta\t-0.3", "-0.6x\ta\t-0.3", 10, "bad number"),
    ("-0.5\ta b\t-0.25", "-0.5\ta b\tnan", 15, "finite"),
    ("-0.6\ta\t-0.3", "0.6\ta\t-0.3", 10, "positive log10 probability"),
    ("-0.2\t<s> a b", "-0.2\t<s> a b\t-0.1", 19, "highest order \\(3\\) has no backoff"),
    ("-0.3\tb </s>", "-0.3\tb c", 16, "'c' of this 2-gram is not listed"),
    ("-0.8\tb\t-0.2", "-0.8\ta\t-0.2", 11, "unigram 'a' is listed twice"),
    ("ngram 2=3", "ngram 2=2", 16, "more than the 2 lines"),
    ("ngram 2=3", "ngram 2=4", 18, "section has 3 lines, its header declares 4"),
    ("\\2-grams:", "\\4-grams:", 13, "expected the \\\\2-grams: header"),
    ("\\end\\\n", "", None, "expected \\\\end\\\\"),
    ("\\end\\\n", "\\end\\\nmore\n", 22, "text after"),
    ("-1.0\t<unk>", "-1.0\tunk", None, "no <unk> unigram"),
    ("-99\t<s>\t-0.5", "-99\tS\t-0.5", None, "no <s> unigram"),
    ("-0.7\t</s>", "-0.7\tS", None, "no </s> unigram"),
]


@pytest.mark.parametrize(("old", "new", "line", "message"), MALFORMED)
def test_malformed_arpa_files_name_file_and_line(
    tmp_path: Path, old: str, new: str, line: int | None, message: str
) -> None:
    assert old in TOY_ARPA
    arpa = write(tmp_path, TOY_ARPA.replace(old, new, 1))
    with pytest.raises(DataFormatError, match=message) as err:
        build_lm_table(arpa, verify=False)
    assert err.value.path == str(arpa)
    assert err.value.line_no == line


def test_separators_like_arpalm_and_gzip(tmp_path: Path) -> None:
    import gzip

    spaced = TOY_ARPA.replace("\t", "  ").replace("\n", " \r\n").replace("\\data\\", "\n\\data\\")
    arpa = write(tmp_path, spaced, "spaced.arpa")
    table = build_lm_table(arpa, verify=False)
    packed = tmp_path / "lm.arpa.gz"
    packed.write_bytes(gzip.compress(TOY_ARPA.encode()))
    for other in (table, build_lm_table(packed, verify=False)):
        for context, word, expected, _ in TOY_CASES:
            assert other.logp10(context, word) == expected
    assert ArpaLM(arpa).logp(("<s>", "a"), "b") == pytest.approx(table.logp(("<s>", "a"), "b"))
    with pytest.raises(MissingResourceError):
        build_lm_table(tmp_path / "none.arpa")


# --- the cache ---------------------------------------------------------------------------


def _arrays_equal(a: LmTable, b: LmTable) -> bool:
    names = lm_table._ARRAYS
    return all(
        np.array_equal(getattr(a, n).view(np.uint8), getattr(b, n).view(np.uint8)) for n in names
    ) and dict(a.vocab) == dict(b.vocab)


def test_cache_is_written_then_memory_mapped(toy: Path) -> None:
    logs: list[str] = []
    first = load_lm_table(toy, log=logs.append)
    cache = toy.parent / "lm.table"
    assert cache == cache_path(toy)
    assert any("building" in m for m in logs) and first.verified
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["arpa"]["size"] == toy.stat().st_size
    assert manifest["arpa"]["mtime_ns"] == toy.stat().st_mtime_ns
    assert manifest["counts"] == [5, 3, 1] and manifest["verified"] is True
    assert manifest["table_size"] == len(first.keys)
    logs.clear()
    second = load_lm_table(toy, log=logs.append)
    assert logs == []
    assert all(isinstance(a, np.memmap) for a in second.arrays())
    assert _arrays_equal(first, second) and _arrays_equal(second, build_lm_table(toy))
    assert [p.name for p in toy.parent.iterdir() if p.name.startswith(".")] == []


def test_a_changed_arpa_file_is_rebuilt(toy: Path) -> None:
    load_lm_table(toy)
    logs: list[str] = []
    toy.write_text(TOY_ARPA.replace("-0.2\t<s> a b", "-0.9\t<s> a b"), encoding="utf-8")
    stat = toy.stat()
    os.utime(toy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    table = load_lm_table(toy, log=logs.append)
    assert any("changed" in m for m in logs)
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.9)
    # touching it is a change too (the cache does not hash the file on every load)
    logs.clear()
    os.utime(toy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    load_lm_table(toy, log=logs.append)
    assert any("changed" in m for m in logs)
    logs.clear()
    load_lm_table(toy, log=logs.append)
    assert logs == []


@pytest.mark.parametrize("damage", ["manifest", "truncate", "missing", "shape", "flags", "vocab"])
def test_a_damaged_cache_is_rebuilt(toy: Path, damage: str) -> None:
    load_lm_table(toy)
    good = build_lm_table(toy)  # in memory: rewriting a memory-mapped file would change it
    cache = cache_path(toy)
    if damage == "manifest":
        (cache / "manifest.json").write_text("{not json")
    elif damage == "truncate":
        keys = cache / "keys.npy"
        keys.write_bytes(keys.read_bytes()[:-8])
    elif damage == "missing":
        (cache / "backoffs.npy").unlink()
    elif damage == "shape":  # a consistent-looking file of the wrong length
        np.save(cache / "probs.npy", np.zeros(3, np.float32))
        manifest = json.loads((cache / "manifest.json").read_text())
        manifest["files"]["probs.npy"] = (cache / "probs.npy").stat().st_size
        (cache / "manifest.json").write_text(json.dumps(manifest))
    elif damage == "flags":  # the right length, the wrong type
        flags = np.load(cache / "left_ext.npy").astype(np.uint8)
        (cache / "left_ext.npy").unlink()
        np.save(cache / "left_ext.npy", flags)
        manifest = json.loads((cache / "manifest.json").read_text())
        manifest["files"]["left_ext.npy"] = (cache / "left_ext.npy").stat().st_size
        (cache / "manifest.json").write_text(json.dumps(manifest))
    else:
        (cache / "vocab.txt").write_text("<unk>\n<s>\n</s>\na\n")
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("building" in m for m in logs), logs
    assert _arrays_equal(table, good)
    assert isinstance(table.keys, np.memmap)
    logs.clear()
    assert _arrays_equal(load_lm_table(toy, log=logs.append), good) and logs == []


def test_a_cache_of_the_previous_format_is_rebuilt(toy: Path) -> None:
    # format 1 had no left-extension flags
    load_lm_table(toy)
    cache = cache_path(toy)
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["format"] == lm_table.TABLE_FORMAT == 2
    for name in ("left_ext.npy", "uni_left_ext.npy"):
        (cache / name).unlink()
        del manifest["files"][name]
    manifest["format"] = 1
    (cache / "manifest.json").write_text(json.dumps(manifest))
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("another format" in m for m in logs), logs
    assert json.loads((cache / "manifest.json").read_text())["format"] == 2
    assert (cache / "left_ext.npy").is_file() and isinstance(table.left_ext, np.memmap)
    assert table.left_extends(("a", "b")) and not table.left_extends(("<s>", "a"))
    logs.clear()
    load_lm_table(toy, log=logs.append)
    assert logs == []


def test_an_unverified_cache_is_not_taken_when_verification_is_asked(toy: Path) -> None:
    assert not load_lm_table(toy, verify=False).verified
    logs: list[str] = []
    assert load_lm_table(toy, verify=False, log=logs.append).verified is False and logs == []
    assert load_lm_table(toy, verify=True, log=logs.append).verified
    assert any("not verified" in m for m in logs)


def test_a_half_written_cache_is_never_loaded(toy: Path) -> None:
    # what a crash leaves: a temporary directory without a manifest, no final directory
    tmp = toy.parent / ".lm.table.tmp-crashed"
    tmp.mkdir()
    (tmp / "keys.npy").write_bytes(b"\x93NUMPY garbage")
    old = toy.stat().st_mtime - 2 * lm_table._STALE_TEMP_SECONDS
    os.utime(tmp, (old, old))
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("building" in m for m in logs)
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.2)
    assert not tmp.exists()  # a stale leftover is removed


def test_an_unwritable_directory_builds_in_memory(
    toy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(toy.parent))

    # (the tests may run as root, whom chmod cannot stop)
    monkeypatch.setattr(os, "mkdir", refuse)
    logs: list[str] = []
    table = load_lm_table(toy, log=logs.append)
    assert any("cannot write" in m and "in memory" in m for m in logs)
    assert not isinstance(table.keys, np.memmap) and table.verified
    assert not cache_path(toy).exists()
    assert table.logp10(("<s>", "a"), "b") == f32sum(-0.2)


def test_cache_dir(toy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "cache"
    table = load_lm_table(toy, cache_dir=elsewhere)
    assert (elsewhere / "lm.table" / "manifest.json").is_file()
    assert not (toy.parent / "lm.table").exists()
    assert isinstance(table.keys, np.memmap)

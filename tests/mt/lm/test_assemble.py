"""Tests of the build of the LM table (service.mt.lm.assemble): scores computed by hand on toy ARPA
files (one with SRILM-style pruned suffixes that KenLM fills with blanks) equal KenLM's bit for
bit and ArpaLM's to float32 precision, the sign KenLM gives a zero backoff, and the errors of a
build (two n-grams with one key, an n-gram listed twice or without its context)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.errors import DataFormatError
from service.mt.lm import (
    LN10,
    ArpaLM,
    KenLM,
    LmTable,
    assemble,
    build_lm_table,
    cache_path,
    load_lm_table,
)
from tests.mt.lm.toy_lm import (
    PRUNED_ARPA,
    PRUNED_CASES,
    TOY_ARPA,
    TOY_CASES,
    f32sum,
    key_of,
    write,
)

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


# --- build errors ------------------------------------------------------------------------


def test_two_ngrams_with_one_key_are_an_error(toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # narrow the keys to two bits: four n-grams of order >= 2 must share a key
    mask = np.uint64(0b11)
    monkeypatch.setattr(assemble, "KEY_MASK", mask)
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

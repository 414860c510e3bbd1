"""Tests of the stateful LM protocol (service.mt.lm): a hand-written toy ARPA file whose
back-off arithmetic is done by hand, KenLM against the pure-Python ArpaLM reference, KenLM's
stateful scores against its own whole-sentence score, right states, OOVs, the null LM, and the
n-gram structure for state minimisation (ArpaLM's against KenLM's LM table and KenLM's own
states)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from service.errors import ConfigurationError, DataFormatError, MissingResourceError
from service.mt.lm import (
    LN10,
    ArpaLM,
    KenLM,
    LanguageModel,
    NgramStructure,
    NoLM,
    load_language_model,
)
from service.mt.training.lm_estimate import LMPLZ_DISCOUNT_FALLBACK, estimate_kneser_ney, write_arpa
from tests.mt.lm.toy_lm import TOY_ARPA


@pytest.fixture
def toy_arpa(tmp_path: Path) -> Path:
    path = tmp_path / "toy.arpa"
    path.write_text(TOY_ARPA, encoding="utf-8")
    return path


@pytest.fixture(params=[ArpaLM, KenLM], ids=["arpa", "kenlm"])
def toy_lm(request: pytest.FixtureRequest, toy_arpa: Path) -> LanguageModel:
    model: LanguageModel = request.param(toy_arpa)  # the reference is no registry kind
    return model


# log10 values worked out from TOY_ARPA (tests/data/toy_trigram.arpa):
#   "a b":   p(a|<s>) = -0.4 (listed); p(b|<s> a) = -0.2 (listed);
#            p(</s>|a b): "a b </s>" unlisted -> bo(a b) + p(</s>|b) = -0.25 + -0.3 = -0.55
#            total -1.15
#   "b a b": p(b|<s>) = bo(<s>) + p(b) = -0.5 + -0.8 = -1.3
#            p(a|<s> b) = bo(<s> b) [unlisted: 0] + p(a|b) = 0 + bo(b) + p(a) = -0.2 + -0.6 = -0.8
#            p(b|b a) = bo(b a) [unlisted: 0] + p(b|a) = -0.5 (listed)
#            p(</s>|a b) = -0.55 as above;  total -3.15
#   "a zzz": p(a|<s>) = -0.4; zzz is <unk>: p(<unk>|<s> a) = bo(<s> a) + bo(a) + p(<unk>)
#            = -0.1 + -0.3 + -1.0 = -1.4; p(</s>|a <unk>) = 0 + bo(<unk>) [0] + p(</s>) = -0.7
#            total -2.5
TOY_SENTENCES = [("a b", -1.15), ("b a b", -3.15), ("a zzz", -2.5)]


@pytest.mark.parametrize(("sentence", "log10p"), TOY_SENTENCES)
def test_toy_sentence_scores(toy_lm: LanguageModel, sentence: str, log10p: float) -> None:
    assert toy_lm.sentence_score(sentence.split()) == pytest.approx(log10p * LN10, abs=1e-6)


def test_toy_word_scores_and_log_conversion(toy_lm: LanguageModel) -> None:
    state = toy_lm.begin_state()
    logp, state = toy_lm.score(state, "a")
    assert logp == pytest.approx(-0.4 * math.log(10), abs=1e-6)
    logp, state = toy_lm.score(state, "b")
    assert logp == pytest.approx(-0.2 * math.log(10), abs=1e-6)
    assert toy_lm.end_score(state) == pytest.approx(-0.55 * math.log(10), abs=1e-6)
    # from no context at all: p(b | a) is listed, p(a) is a unigram
    assert toy_lm.logp((), "a") == pytest.approx(-0.6 * LN10, abs=1e-6)
    assert toy_lm.logp(("a",), "b") == pytest.approx(-0.5 * LN10, abs=1e-6)
    assert toy_lm.logp(("<s>", "a"), "b") == pytest.approx(-0.2 * LN10, abs=1e-6)


def test_toy_kenlm_whole_sentence_score(toy_arpa: Path) -> None:
    lm = KenLM(toy_arpa)
    assert lm.order == 3
    for sentence, log10p in TOY_SENTENCES:
        assert lm.kenlm_sentence_score(sentence.split()) == pytest.approx(log10p * LN10, abs=1e-6)


def test_is_oov(toy_lm: LanguageModel) -> None:
    assert not toy_lm.is_oov("a")
    assert not toy_lm.is_oov("</s>")
    assert toy_lm.is_oov("zzz")
    assert toy_lm.is_oov("<unk>")


# --- an estimated model: KenLM against ArpaLM and against itself ----------------------------


def _sentences(seed: int, count: int, oov_rate: float = 0.0) -> list[list[str]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    weights = [1 / (i + 1) for i in range(30)]
    out = []
    for _ in range(count):
        sentence = rng.choices(words, weights, k=rng.randint(1, 10))
        out.append([w if rng.random() >= oov_rate else "oov" + w for w in sentence])
    return out


@pytest.fixture(scope="module")
def estimated(tmp_path_factory: pytest.TempPathFactory) -> tuple[KenLM, ArpaLM]:
    model = estimate_kneser_ney(_sentences(1, 400), 4, discount_fallback=LMPLZ_DISCOUNT_FALLBACK)
    path = tmp_path_factory.mktemp("lm") / "est.arpa"
    write_arpa(model, path)
    return KenLM(path), ArpaLM(path)


def test_kenlm_stateful_scores_sum_to_whole_sentence_score(estimated: tuple[KenLM, ArpaLM]) -> None:
    kenlm, arpa = estimated
    assert kenlm.order == arpa.order == 4
    for sentence in _sentences(2, 60, oov_rate=0.1):
        k_state, a_state = kenlm.begin_state(), arpa.begin_state()
        total = 0.0
        for word in sentence:
            k_logp, k_state = kenlm.score(k_state, word)
            a_logp, a_state = arpa.score(a_state, word)
            assert k_logp == pytest.approx(a_logp, abs=1e-5), (sentence, word)
            total += k_logp
        assert kenlm.end_score(k_state) == pytest.approx(arpa.end_score(a_state), abs=1e-5)
        total += kenlm.end_score(k_state)
        assert total == pytest.approx(kenlm.kenlm_sentence_score(sentence), abs=1e-4)
        assert total == pytest.approx(kenlm.sentence_score(sentence), abs=1e-9)


def test_right_state_depends_on_the_last_words_only(estimated: tuple[KenLM, ArpaLM]) -> None:
    for lm in estimated:
        for sentence in _sentences(3, 40):
            state = lm.begin_state()
            for i, word in enumerate(sentence):
                _, state = lm.score(state, word)
                if i + 1 >= lm.order - 1:
                    right = lm.right_state(sentence[: i + 1])
                    assert hash(right) == hash(state)
                    assert right == state
                    assert lm.end_score(right) == pytest.approx(lm.end_score(state), abs=1e-9)


def test_states_are_hashable_and_recombine(estimated: tuple[KenLM, ArpaLM]) -> None:
    kenlm, _ = estimated
    # different histories with the same last three words (order 4) reach the same state
    s1 = kenlm.score_words(kenlm.begin_state(), ["w5", "w0", "w1", "w2"])[1]
    s2 = kenlm.score_words(kenlm.begin_state(), ["w0", "w1", "w2"])[1]
    s3 = kenlm.score_words(kenlm.null_state(), ["w3", "w0", "w1", "w2"])[1]
    assert s1 == s2 == s3
    assert len({s1, s2, s3}) == 1
    assert kenlm.context_state(("w0", "w1", "w2")) == s1
    assert kenlm.begin_state() != kenlm.null_state()


# --- the n-gram structure (state minimisation) ---------------------------------------------

# on TOY_ARPA: (context, right-minimal suffix); "a b" and the unigrams <s>, a, b have backoffs,
# "<s> a" is the context of "<s> a b"; </s>, <unk> and "b </s>" have none and extend nothing
TOY_RIGHT = [
    ((), ()),
    (("<s>",), ("<s>",)),
    (("<s>", "a"), ("<s>", "a")),
    (("a", "b"), ("a", "b")),
    (("b", "a"), ("a",)),  # unlisted
    (("b", "</s>"), ()),
    (("</s>",), ()),
    (("zzz",), ()),  # <unk>
    (("zzz", "b"), ("b",)),
]
TOY_LEFT = [
    ((), True),
    (("a",), True),
    (("b",), True),
    (("</s>",), True),
    (("a", "b"), True),
    (("<s>",), False),
    (("<s>", "a"), False),
    (("b", "</s>"), False),
    (("zzz",), False),
    (("<s>", "a", "b"), False),
]
TOY_BACKOFF = [
    ((), 0.0),
    (("a", "b"), -0.25),
    (("<s>",), -0.5),
    (("b",), -0.2),
    (("b", "</s>"), 0.0),
    (("b", "a"), 0.0),
    (("zzz",), 0.0),
]


def test_toy_structure_by_hand(toy_lm: LanguageModel) -> None:
    structure = toy_lm.structure()
    assert structure is not None and isinstance(structure, NgramStructure)
    for context, short in TOY_RIGHT:
        assert structure.right_minimal(context) == short, context
    for words, extends in TOY_LEFT:
        assert structure.left_extends(words) is extends, words
    for context, log10 in TOY_BACKOFF:
        assert structure.backoff(context) == pytest.approx(log10 * LN10, abs=1e-6), context


def test_structure_of_each_model(toy_arpa: Path) -> None:
    from service.mt.lm import LmTable

    arpa = ArpaLM(toy_arpa)
    assert arpa.structure() is arpa
    kenlm = KenLM(toy_arpa)
    table = kenlm.structure()
    assert isinstance(table, LmTable) and kenlm.structure() is table  # loaded once
    assert not table.verified  # and cached beside the ARPA file
    assert (toy_arpa.parent / "toy.table" / "manifest.json").is_file()
    assert NoLM().structure() is None


def test_kenlm_structure_needs_the_arpa_file(toy_arpa: Path) -> None:
    kenlm = KenLM(toy_arpa)
    # a file KenLM has loaded but the LM table cannot read (as a KenLM binary would be)
    toy_arpa.write_bytes(b"mmap lm http://kheafield.com/code format version 5\0\x01\x02")
    with pytest.raises(ConfigurationError, match="needs the language model as an ARPA") as err:
        kenlm.structure()
    assert str(toy_arpa) in str(err.value)


def test_arpalm_structure_equals_kenlms_table_and_states(estimated: tuple[KenLM, ArpaLM]) -> None:
    kenlm, arpa = estimated
    table = kenlm.structure()
    rng = random.Random(4)
    words = [*sorted(arpa.vocab), "<s>", "<unk>", "oov"]
    queries = {ng[i:j] for ng in arpa.entries for i in range(len(ng)) for j in range(i, len(ng))}
    for _ in range(3000):
        queries.add(tuple(rng.choice(words) for _ in range(rng.randint(0, arpa.order - 1))))
    null = kenlm.null_state()
    dropped = 0
    for q in sorted(queries):
        short = arpa.right_minimal(q)
        assert table.right_minimal(q) == short, q
        assert table.left_extends(q) == arpa.left_extends(q), q
        assert table.backoff(q) == pytest.approx(arpa.backoff(q), rel=1e-6, abs=1e-12), q
        # KenLM's own right state after q is the state after its right-minimal suffix
        assert kenlm.score_words(null, q)[1] == kenlm.score_words(null, short)[1], q
        dropped += len(q) - len(short)
    assert dropped > 0


# --- the null LM and loading --------------------------------------------------------------------


def test_no_lm() -> None:
    lm = NoLM()
    assert lm.begin_state() == lm.null_state() == ()
    assert lm.score(lm.begin_state(), "anything") == (0.0, ())
    assert lm.end_score(()) == 0.0
    assert lm.sentence_score(["a", "b"]) == 0.0
    assert lm.right_state(["a", "b", "c"]) == ()
    assert not lm.is_oov("zzz")
    assert isinstance(load_language_model(None), NoLM)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(MissingResourceError, match=r"missing\.arpa"):
        KenLM(tmp_path / "missing.arpa")
    with pytest.raises(MissingResourceError, match=r"missing\.arpa"):
        ArpaLM(tmp_path / "missing.arpa")
    garbage = tmp_path / "garbage.arpa"
    garbage.write_text("this is not a language model\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"garbage\.arpa"):
        KenLM(garbage)
    with pytest.raises(DataFormatError, match=r"garbage\.arpa"):
        ArpaLM(garbage)
    truncated = tmp_path / "truncated.arpa"
    truncated.write_text(TOY_ARPA.replace("-0.3\tb </s>\n", ""), encoding="utf-8")
    with pytest.raises(DataFormatError, match="its header declares"):
        ArpaLM(truncated)
    with pytest.raises(ConfigurationError, match="kenlm"):
        load_language_model(garbage, "srilm")
    with pytest.raises(ConfigurationError, match="kenlm"):  # the reference is no kind
        load_language_model(garbage, "arpa")

"""The toy ARPA files of the LM tests, and helpers to write them and to check their numbers.

``TOY_ARPA`` (tests/data/toy_trigram.arpa: vocabulary <unk> <s> </s> a b; bigrams "<s> a",
"a b", "b </s>"; the one trigram "<s> a b"), whose scores the tests work out by hand;
``PRUNED_ARPA``, the same with SRILM-style pruned suffixes that KenLM fills with blanks;
``TOY_BIGRAM`` (tests/data/toy_bigram.arpa) and the demo bundle's LM (``DEMO_LM``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from service.mt.lm import SEED, mix

DATA = Path(__file__).resolve().parents[2] / "data"
TOY_TRIGRAM = DATA / "toy_trigram.arpa"
TOY_ARPA = TOY_TRIGRAM.read_text(encoding="utf-8")  # tests derive broken variants from the text
TOY_BIGRAM = DATA / "toy_bigram.arpa"

ROOT = Path(__file__).resolve().parents[3]
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

"""A small synthetic German-English corpus whose translations are known, for end-to-end
tests of training, decoding and retrieval."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from service.mt.training.train import TrainConfig

NOUNS = {"haus": "house", "auto": "car", "buch": "book", "hund": "dog", "baum": "tree"}
ADJS = {"klein": "small", "groß": "big", "alt": "old", "neu": "new", "rot": "red"}
# second, rarer translations: the forest holds both, the 1-best picks the first
ALTERNATIVES = {"house": "home", "big": "large", "car": "automobile"}
DETS = {"das": "the", "ein": "a"}
CONFIG = TrainConfig(src="de", lm_discount_fallback=True)  # the toy LM text is tiny


def synthetic(path: Path, lm_path: Path, n: int = 400, seed: int = 0) -> None:
    rng = random.Random(seed)
    rows, english = [], []
    for k in range(n):
        d, noun, adj = rng.choice(list(DETS)), rng.choice(list(NOUNS)), rng.choice(list(ADJS))
        if k % 3 == 0:
            de, en = f"{d} {noun}", f"{DETS[d]} {NOUNS[noun]}"
        else:
            de, en = f"{d} {noun} ist {adj}", f"{DETS[d]} {NOUNS[noun]} is {ADJS[adj]}"
        if rng.random() < 0.3:
            en = " ".join(ALTERNATIVES.get(w, w) for w in en.split())
        rows.append(f"gettext:test\t{de}\t{en}")
        english.append(en)
    path.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    lm_path.write_text("\n".join(english) + "\n")

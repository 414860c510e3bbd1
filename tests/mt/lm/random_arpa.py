"""Random back-off n-gram models in ARPA form, for checking LM state minimisation exactly.

Each model lists random n-grams over a small vocabulary, closed under prefixes and suffixes
(as KenLM and the LM table require), with random log10 probabilities and backoffs, a third of
the backoffs zero (so that some contexts are dropped and some are kept only for their
extension)."""

from __future__ import annotations

import random
from pathlib import Path

WORDS = ("a", "b", "c", "d", "e")


def random_arpa(rng: random.Random, order: int, ngrams: int = 40) -> str:
    """The text of a random ARPA model of ``order`` (vocabulary ``<unk> <s> </s> a .. e``)."""
    listed: set[tuple[str, ...]] = {(w,) for w in ("<unk>", "<s>", "</s>", *WORDS)}
    for _ in range(ngrams):
        n = rng.randint(2, order)
        gram = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            gram[0] = "<s>"
        if rng.random() < 0.2:
            gram[-1] = "</s>"
        if "<s>" in gram[1:] or "</s>" in gram[:-1]:
            continue
        for i in range(n):  # every substring: closed under prefixes and suffixes
            for j in range(i + 1, n + 1):
                listed.add(tuple(gram[i:j]))
    contexts = {g[:-1] for g in listed if len(g) > 1}
    by_order: dict[int, list[tuple[str, ...]]] = {}
    for g in sorted(listed):
        by_order.setdefault(len(g), []).append(g)
    lines = ["\\data\\"]
    lines += [f"ngram {n}={len(by_order[n])}" for n in sorted(by_order)]
    for n in sorted(by_order):
        lines += ["", f"\\{n}-grams:"]
        for g in by_order[n]:
            prob = -99.0 if g == ("<s>",) else round(rng.uniform(-3.0, -0.05), 4)
            fields = [f"{prob}", " ".join(g)]
            if n < order and g[-1] != "</s>":
                back = 0.0 if rng.random() < 0.33 else round(rng.uniform(-1.5, 0.3), 4)
                if back != 0.0 or g in contexts or rng.random() < 0.5:
                    fields.append(f"{back}")
            lines.append("\t".join(fields))
    lines += ["", "\\end\\", ""]
    return "\n".join(lines)


def write_random_arpa(path: Path, seed: int, order: int, ngrams: int = 40) -> Path:
    path.write_text(random_arpa(random.Random(seed), order, ngrams), encoding="utf-8")
    return path

"""clir tune end to end on the synthetic bundle: dev data join, tuning, new version."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from service.mt.bundle import ModelBundle
from tests.synthetic import ADJS, DETS, NOUNS


def _tr_dir(root: Path) -> Path:
    tr = root / "tr" / "de-en"
    tr.mkdir(parents=True)
    queries, qrels, pool = [], [], []
    k = 0
    for d, de_d in DETS.items():
        for noun, en_noun in NOUNS.items():
            for adj, en_adj in ADJS.items():
                qid = f"tr-de-{k:04d}"
                queries.append(f"{qid}\t{d} {noun} ist {adj}")
                qrels.append(f"{qid} 0 gt:{k} 1")
                pool.append(f"gt:{k}\t{de_d} {en_noun} is {en_adj}")
                k += 1
    (tr / "queries.dev.tsv").write_text("\n".join(queries) + "\n")
    (tr / "qrels.dev.txt").write_text("\n".join(qrels) + "\n")
    (root / "tr" / "pool.en.tsv.gz").write_bytes(gzip.compress(("\n".join(pool) + "\n").encode()))
    return tr


def test_bleu_of_scores_token_sequences(toy_bundle: ModelBundle) -> None:
    import sacrebleu

    from service.mt.tuning.data import DevPair
    from service.mt.tuning.run import bleu_of, translate_1best

    pairs = [
        DevPair("a", ("das", "buch", "ist", "alt"), ("the", "book", "is", "old")),
        DevPair("b", ("ein", "hund", "ist", "klein"), ("a", "cat", "is", "small")),
    ]
    weights = toy_bundle.active_weights().weights
    hyps = translate_1best(toy_bundle, weights, [p.source for p in pairs])
    expected = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps], [[" ".join(p.reference) for p in pairs]], tokenize="none"
    ).score
    assert bleu_of(toy_bundle, weights, pairs) == pytest.approx(expected)
    assert bleu_of(toy_bundle, weights, pairs[:1]) == pytest.approx(100.0)

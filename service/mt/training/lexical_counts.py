"""Estimating the lexical translation table (Koehn et al. 2003, §3.3; Chen et al. 2017, §2.2).

From the symmetrised word alignments by relative frequency of links:
``w(e|f) = c(f, e) / Σ_e' c(f, e')`` and ``w(f|e) = c(f, e) / Σ_f' c(f', e)``, where every
link counts once and an unaligned word is linked to NULL (an unaligned target word adds
``c(NULL, e)``, an unaligned source word ``c(f, NULL)``), so ``w(e|NULL)`` and ``w(NULL|f)``
exist and each conditional distribution sums to one over the real words and NULL.

:func:`lexical_table_from_corpus` counts on the encoded corpus (vectorised);
:func:`lexical_counts_reference` counts straight from the definition and
:func:`lexical_table_from_counts` turns its counts into a table (for tests). The rule features
read the table through :func:`lexical_id_maps` (lexical weights,
:mod:`service.mt.training.features`); the table itself, its lookups and its storage are
:class:`service.mt.lexical.LexicalTable`, which serving reads from the model bundle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from service.mt.lexical import LexicalTable
from service.mt.training.extract import AlignedPair, EncodedCorpus, Vocab

I64 = npt.NDArray[np.int64]


def lexical_counts_reference(
    pairs: Iterable[AlignedPair],
) -> Counter[tuple[str | None, str | None]]:
    """Link counts ``c(f, e)`` with NULL as ``None``, straight from the definition."""
    counts: Counter[tuple[str | None, str | None]] = Counter()
    for pair in pairs:
        links = set(pair.alignment)
        for i, j in links:
            counts[pair.source[i], pair.target[j]] += 1
        aligned_f = {i for i, _ in links}
        aligned_e = {j for _, j in links}
        for i, f in enumerate(pair.source):
            if i not in aligned_f:
                counts[f, None] += 1
        for j, e in enumerate(pair.target):
            if j not in aligned_e:
                counts[None, e] += 1
    return counts


def lexical_table_from_corpus(corpus: EncodedCorpus) -> LexicalTable:
    """Count links and NULL links of an encoded corpus (vectorised)."""
    ne = len(corpus.target_vocab)
    sent_of_link = np.repeat(np.arange(len(corpus)), np.diff(corpus.link_offsets))
    f_pos = corpus.source_offsets[sent_of_link] + corpus.link_i
    e_pos = corpus.target_offsets[sent_of_link] + corpus.link_j
    f_aligned = np.zeros(len(corpus.source), dtype=bool)
    f_aligned[f_pos] = True
    e_aligned = np.zeros(len(corpus.target), dtype=bool)
    e_aligned[e_pos] = True
    f = np.concatenate(
        [corpus.source[f_pos], corpus.source[~f_aligned], np.zeros((~e_aligned).sum())]
    ).astype(np.int64)
    e = np.concatenate(
        [corpus.target[e_pos], np.zeros((~f_aligned).sum()), corpus.target[~e_aligned]]
    ).astype(np.int64)
    keys, counts = np.unique(f * ne + e, return_counts=True)
    return LexicalTable(
        list(corpus.source_vocab.words),
        list(corpus.target_vocab.words),
        keys // ne,
        keys % ne,
        counts.astype(np.float64),
    )


def lexical_table_from_counts(counts: Counter[tuple[str | None, str | None]]) -> LexicalTable:
    """From a ``(f, e) -> count`` mapping, NULL as ``None`` (the reference's output)."""
    sv, tv = Vocab(), Vocab()
    rows = [
        (0 if f is None else sv.add(f), 0 if e is None else tv.add(e), c)
        for (f, e), c in counts.items()
    ]
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
    return LexicalTable(
        sv.words,
        tv.words,
        arr[:, 0].astype(np.int64),
        arr[:, 1].astype(np.int64),
        arr[:, 2],
    )


def lexical_id_maps(
    table: LexicalTable, source_vocab: Vocab, target_vocab: Vocab
) -> tuple[I64, I64]:
    """Maps from another vocabulary's ids to the table's ids (-1 = unknown; 0 -> NULL)."""
    fmap = np.asarray(
        [0] + [table.source_ids.get(w, -1) for w in source_vocab.words[1:]], dtype=np.int64
    )
    emap = np.asarray(
        [0] + [table.target_ids.get(w, -1) for w in target_vocab.words[1:]], dtype=np.int64
    )
    return fmap, emap

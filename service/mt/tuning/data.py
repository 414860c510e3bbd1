"""Tuning data: LibreOffice help paragraph pairs of the dev pages.

The translation-retrieval dev set ``tr/<src>-en/`` pairs each foreign paragraph (query) with
the pool entry (entries) holding its English reference; joining ``queries.dev.tsv``,
``qrels.dev.txt`` and ``tr/pool.en.tsv.gz`` gives parallel dev sentences. A deterministic
share of them (by a hash of the query id) is held out as the tuning test set, never seen by
the optimiser. Both sides are processed like the training corpus (:func:`preprocess`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from service.data import load_qrels, load_queries, read_pool
from service.errors import InvalidInputError, MissingResourceError
from service.text import preprocess


@dataclass(frozen=True)
class DevPair:
    qid: str
    source: tuple[str, ...]
    reference: tuple[str, ...]


@dataclass(frozen=True)
class DevSplit:
    tune: list[DevPair]
    heldout: list[DevPair]


def _heldout(qid: str, share: float) -> bool:
    h = int(hashlib.sha1(qid.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return h < share


def load_dev_pairs(
    tr_dir: str | Path,
    pool: str | Path,
    src: str,
    *,
    heldout_share: float = 0.2,
    max_words: int = 40,
    max_pairs: int | None = None,
) -> DevSplit:
    """Dev sentence pairs of ``tr_dir`` split into tuning and held-out parts.

    Pairs with more than ``max_words`` source tokens are skipped (tuning decodes every
    sentence many times); ``max_pairs`` caps each part after a deterministic order by qid hash.
    """
    tr_dir = Path(tr_dir)
    queries_path, qrels_path = tr_dir / "queries.dev.tsv", tr_dir / "qrels.dev.txt"
    for p in (queries_path, qrels_path, Path(pool)):
        if not p.exists():
            raise MissingResourceError(f"{p}: tuning data not found")
    queries = load_queries(queries_path)
    qrels = load_qrels(qrels_path)
    wanted: dict[str, str] = {}
    for qid, judged in qrels.items():
        rel = sorted(d for d, r in judged.items() if r > 0)
        if qid in queries and rel:
            wanted[rel[0]] = qid
    english: dict[str, str] = {}
    for sent in read_pool(pool, on_error="skip"):
        if sent.id in wanted:
            english[wanted[sent.id]] = sent.text
    tune: list[DevPair] = []
    heldout: list[DevPair] = []
    order = sorted(english, key=lambda q: hashlib.sha1(q.encode()).hexdigest())
    for qid in order:
        source = tuple(preprocess(queries[qid], src))
        reference = tuple(preprocess(english[qid], "en"))
        if not source or not reference or len(source) > max_words:
            continue
        part = heldout if _heldout(qid, heldout_share) else tune
        if max_pairs is None or len(part) < max_pairs:
            part.append(DevPair(qid, source, reference))
    if not tune:
        raise InvalidInputError(f"{tr_dir}: no usable dev sentence pair")
    return DevSplit(tune, heldout)

"""Translator suggestions reread by the dense reader: translation retrieval's head reordered by
the meaning of each sentence.

Translation retrieval (TR paper, Algorithms 1 and 2; :mod:`service.retrieval.tr`) scores a
pool sentence by the words it shares with the N best translations and their edit similarity:
agreement on the surface. A sentence that says the same in other words scores low. Here the
first ``head`` sentences of its ranking are read again by the dense encoder — the 1-best
translation as an E5 query, each sentence as an E5 passage — and scored as the TR paper
combines its factors, by a product: ``score · max(cos, ε)^power``. Below the head TR's order
goes on, each score times the head's smallest ``cos^power`` (a sentence below the head scored
no more than the head's last by TR, so the list stays in order and the head stays first).

``power`` and ``head`` were chosen on the dev sentences (bench/README.md, "Translator
suggestions read densely"): with a large power the head is ordered by the dense similarity,
TR's score breaking near-ties. A sentence's vector is computed the first time it is read and
kept (a bounded cache per encoder): suggestions for similar sentences share their heads.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from service.collection.docstore import Store, whole_index
from service.core.arraydir import MANIFEST
from service.dense.encoders import Encoder, get_encoder
from service.dense.vectors import DENSE_DIR, DenseVectors, open_vectors
from service.errors import ClirError, ConfigurationError
from service.retrieval.base import DecodedQuery, Hit, Ranking, Scorer

Float32Array = npt.NDArray[np.float32]

#: the cosine's floor in the product (a sentence the encoder reads as unrelated keeps a trace
#: of its TR score instead of zero, so ties below it stay in TR's order)
FLOOR = 1e-6


@dataclass(frozen=True)
class SuggestionRerank:
    """How TR's head is reread: its first ``head`` sentences, ``score · cos^power``."""

    head: int = 20
    power: float = 16.0

    def __post_init__(self) -> None:
        if self.head < 1:
            raise ConfigurationError(f"the dense head must hold a sentence, not {self.head}")
        if not 0 <= self.power <= 1000:
            raise ConfigurationError(f"the dense power must be in [0, 1000], not {self.power}")

    def signature(self) -> str:
        return f"dense-head:{self.head}^{self.power:g}"


class SentenceVectors:
    """Pool sentences' passage vectors by id, computed on first read; at most ``capacity``
    kept, the least recently read dropped first."""

    def __init__(self, encoder: Encoder, capacity: int = 50_000) -> None:
        self.encoder = encoder
        self.capacity = capacity
        self._rows: OrderedDict[str, Float32Array] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, ids: Sequence[str], texts: Callable[[int], str], docnos: Sequence[int]) -> Any:
        """One row per id: the kept ones, and ``texts(docno)`` embedded for the others."""
        with self._lock:
            rows = {key: self._rows[key] for key in ids if key in self._rows}
            for key in rows:
                self._rows.move_to_end(key)
        missing = [i for i, key in enumerate(ids) if key not in rows]
        fresh = self.encoder.encode_passages([texts(docnos[i]) for i in missing])
        with self._lock:
            for i, row in zip(missing, fresh, strict=True):
                rows[ids[i]] = self._rows[ids[i]] = row
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
        if not ids:
            return np.zeros((0, self.encoder.dim), np.float32)
        return np.stack([rows[key] for key in ids])


def rerank_head(
    ranking: Ranking, cosines: Sequence[float], params: SuggestionRerank, k: int
) -> tuple[Ranking, list[float]]:
    """``ranking``'s first ``len(cosines)`` hits scored ``score · max(cos, ε)^power`` and
    ordered by it (ties: TR's order), the rest below in TR's order, each times the head's
    smallest factor; the top ``k``, and the cosine of each returned hit (NaN below the head).
    The slow, obviously correct form of this is the sort it is."""
    n = len(cosines)
    factors = [max(float(c), FLOOR) ** params.power for c in cosines]
    head = [
        (h.score * f, i, h, c)
        for i, (h, f, c) in enumerate(zip(ranking.hits[:n], factors, cosines, strict=True))
    ]
    head.sort(key=lambda t: (-t[0], t[1]))
    hits = [Hit(h.docno, h.doc_id, s, h.explanation) for s, _, h, _ in head]
    cos = [float(c) for *_, c in head]
    low = min(factors, default=1.0)
    for h in ranking.hits[n:]:
        hits.append(Hit(h.docno, h.doc_id, h.score * low, h.explanation))
        cos.append(math.nan)
    signature = f"{ranking.signature}|{params.signature()}"
    return Ranking(ranking.qid, hits[:k], signature, dict(ranking.info)), cos[:k]


class SuggestionReader:
    """The dense reader of translator suggestions with one encoder (its sentence vectors
    kept between suggestions)."""

    def __init__(self, encoder: Encoder, params: SuggestionRerank) -> None:
        self.encoder = encoder
        self.params = params
        self.vectors = SentenceVectors(encoder)

    def rerank(
        self,
        ranking: Ranking,
        translation: str,
        texts: Callable[[int], str],
        k: int,
        stored: DenseVectors | None = None,
    ) -> tuple[Ranking, list[float]]:
        """TR's ``ranking`` (at least ``head`` deep when it can be) reread: see
        :func:`rerank_head`; ``translation``: the 1-best English, ``texts(docno)``: a pool
        sentence's text. ``stored``: the pool's own vectors (``clir embed --index`` over the
        pool), read instead of embedding the head when this encoder made them (a sentence's
        best passage, int8: :mod:`service.dense.kernels`)."""
        head = ranking.hits[: self.params.head]
        if not head or not translation.strip():  # nothing to read: TR's order
            hits = ranking.hits[:k]
            return Ranking(ranking.qid, hits, ranking.signature, ranking.info), [math.nan] * len(
                hits
            )
        query = self.encoder.encode_queries([translation])[0]
        docnos = [h.docno for h in head]
        if stored is not None and stored.encoder == self.encoder.signature():
            cosines = stored.scores_of(query, np.asarray(docnos, dtype=np.int64)).tolist()
        else:
            rows = self.vectors.get([h.doc_id for h in head], texts, docnos)
            cosines = (rows @ query).tolist()
        out, cos = rerank_head(ranking, cosines, self.params, k)
        sig = f"{out.signature}|enc:{self.encoder.signature()}"
        return Ranking(out.qid, out.hits, sig, out.info), cos


@cache
def suggestion_reader(encoder: str, model: str | None, head: int, power: float) -> SuggestionReader:
    """The process's reader for these parameters (one sentence-vector cache each)."""
    return SuggestionReader(get_encoder(encoder, model), SuggestionRerank(head, power))


def suggestion_reader_from_settings(
    settings: Any, on: bool | None = None
) -> SuggestionReader | None:
    """The dense reader of suggestions as the settings configure it, or None when it is off
    (``on``: a request's choice, over the setting)."""
    if not (settings.suggest_dense if on is None else on):
        return None
    return suggestion_reader(
        settings.dense_encoder,
        settings.dense_model,
        settings.suggest_dense_head,
        settings.suggest_dense_power,
    )


def rank_suggestions(
    scorer: Scorer,
    query: DecodedQuery,
    k: int,
    reader: SuggestionReader | None,
    texts: Callable[[int], str],
    *,
    explain: bool = False,
    lock: AbstractContextManager[Any] | None = None,
    stored: DenseVectors | None = None,
) -> tuple[Ranking, list[float]]:
    """Translation retrieval's top ``k`` for a decoded sentence, its head reread by ``reader``
    when given (TR ranks ``head`` deep then); with each hit's dense cosine (NaN: not reread).
    ``lock``: held while TR reads the query's forests (not while the encoder runs);
    ``stored``: the pool's vectors, when it has them (:func:`pool_vectors`)."""
    depth = k if reader is None else max(k, reader.params.head)
    with lock if lock is not None else nullcontext():
        ranking = scorer.rank(query, depth, explain=explain)
    if reader is None:
        return ranking, [math.nan] * len(ranking.hits)
    translations = ranking.info.get("translations") or [{"text": ""}]
    return reader.rerank(ranking, str(translations[0]["text"]), texts, k, stored)


def pool_vectors(pool: Store | None) -> DenseVectors | None:
    """The vectors of a pool held as one index, when it has usable ones (read again when they
    are written or replaced); otherwise — none, damaged or made for other sentences, or a pool
    held as a collection — None, and the reread embeds the head's sentences as it reads them
    (a suggestion never fails for its pool's vectors)."""
    index = whole_index(pool)
    if index is None:
        return None
    path = index.path
    manifest = Path(path) / DENSE_DIR / MANIFEST
    try:
        stamp = manifest.stat().st_mtime_ns
    except OSError:
        return None
    return _open_pool_vectors(str(path), stamp)


@lru_cache(maxsize=4)
def _open_pool_vectors(path: str, stamp: int) -> DenseVectors | None:
    try:
        return open_vectors(path)
    except ClirError:
        return None

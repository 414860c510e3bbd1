"""What the search pipeline reads densely: a store's passage vectors, in the store's document
numbering (one index: :class:`IndexDense`; a collection: ``service.collection.dense``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from service.dense.sketch import SketchParams
from service.dense.vectors import DenseVectors
from service.index.inverted import InvertedIndex

#: Why a store is read lexically only, when it has no vectors (the same words for an index
#: and a collection: the command that writes them takes either).
NO_VECTORS = "no vectors (clir embed --index writes them)"


class DenseSource(ABC):
    """The dense vectors over a store's documents, in the store's document numbering."""

    encoder_signature: str
    passages_signature: str = ""  # how documents were cut into passages (PassageParams)

    def signature(self) -> str:
        """What of the vectors changes the dense reader's numbers: encoder and passages."""
        return f"enc:{self.encoder_signature}|passages:{self.passages_signature}"

    @abstractmethod
    def top(
        self,
        query: np.ndarray,
        depth: int,
        sketch: SketchParams | None = None,
        later: float = 0.0,
    ) -> list[tuple[int, str, float]]:
        """``(docno, doc_id, score)`` of the ``depth`` nearest documents, best first, each
        scored by its best passage, every passage after its first less ``later``
        (:mod:`service.dense.kernels`; ``sketch``: when a first pass picks the candidates of
        vectors too large to read whole, :mod:`service.dense.sketch`)."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """What /readyz shows: documents with and without vectors, the encoder."""


class IndexDense(DenseSource):
    """The vectors of one index (``dense/`` in its directory)."""

    def __init__(self, index: InvertedIndex, vectors: DenseVectors) -> None:
        self.index = index
        self.vectors = vectors
        self.encoder_signature = vectors.encoder
        self.passages_signature = vectors.params.signature()

    def top(
        self,
        query: np.ndarray,
        depth: int,
        sketch: SketchParams | None = None,
        later: float = 0.0,
    ) -> list[tuple[int, str, float]]:
        docs, scores = self.vectors.top(query, depth, sketch=sketch, later=later)
        return [
            (d, self.index.doc_id(d), float(s))
            for d, s in zip(docs.tolist(), scores.tolist(), strict=True)
        ]

    def status(self) -> dict[str, Any]:
        return {
            "encoder": self.encoder_signature,
            "passages": self.vectors.params.signature(),
            "documents": self.vectors.n_docs,
            "pending": 0,
        }

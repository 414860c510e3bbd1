"""Small typed records that flow between the parts of the system.

They are frozen dataclasses with slots: cheap to create in bulk, hashable, and never mutated
after creation. Larger structures (hypergraphs, indexes) live in their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ParallelPair:
    """One line of ``parallel/*.tsv.gz``: ``origin \\t foreign \\t english``."""

    origin: str
    foreign: str
    english: str


@dataclass(frozen=True, slots=True)
class Doc:
    """An English document of the collection (``clir/docs.jsonl.gz``)."""

    id: str
    title: str
    text: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class PoolSentence:
    """An English reference sentence of the translation-retrieval pool."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    """A query: ``qid \\t text``."""

    qid: str
    text: str


@dataclass(frozen=True, slots=True)
class Qrel:
    """A relevance judgment, TREC format ``qid 0 docid rel``."""

    qid: str
    doc_id: str
    rel: int


@dataclass(frozen=True, slots=True)
class ScoredDoc:
    """A retrieved document with its score (one line of a TREC run, without rank and tag)."""

    qid: str
    doc_id: str
    score: float


@dataclass(frozen=True, slots=True)
class RunEntry:
    """One line of a TREC run file: ``qid Q0 docid rank score tag``."""

    qid: str
    doc_id: str
    rank: int
    score: float
    tag: str


@dataclass(frozen=True, slots=True)
class Translation:
    """One entry of an n-best list: tokens, model score and sparse feature vector."""

    tokens: tuple[str, ...]
    score: float
    features: dict[str, float] = field(default_factory=dict, hash=False, compare=False)

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


# Qrels and runs grouped by query: {qid: {doc_id: value}}.
QrelsDict = dict[str, dict[str, int]]
RunDict = dict[str, dict[str, float]]

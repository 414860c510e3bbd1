"""What retrieved a hit: one small typed record per retrieval method.

A scorer asked to explain (``rank(..., explain=True)``) attaches an :class:`Explanation` to
every hit. Whoever shows it — the web layer (``POST /v1/search``, ``POST /v1/suggest``), the
``clir search --explain`` command — reads it through two methods and never through the method's
name:

* :meth:`Explanation.matched_terms`: the English terms that earned the document its score, in
  order (repeats possible), which the snippets and the document view mark;
* :meth:`Explanation.to_json`: the JSON object the API returns as a hit's ``explanation``. Its
  shape per method is part of the API: the page's script
  (``service/api/web/js/explanation.js``) renders each one and keeps its own copy of
  :meth:`~Explanation.matched_terms`.

The records:

* :class:`BowFdExplanation` — BOW-FD (Hieber & Riezler 2015, §3): per sentence of the query,
  the document's best derivation under W'(·, d) (its translation, the words of it that matched
  the document with their counts and bm25 weights, its SMT and IR scores);
* :class:`DtExplanation` — DT (Hieber & Riezler 2015, §5): the query's 1-best translation and
  its distinct words that occur in the document;
* :class:`PsqExplanation` — PSQ (Hieber & Riezler 2015, §5): per source word, its translations
  that occur in the document, with Pr(e|f);
* :class:`FeedbackExplanation` — any document method with feedback
  (:mod:`service.retrieval.feedback`): the expanded query's terms the document holds, those of
  the 1-best translation and those the feedback added;
* :class:`TrExplanation` — translation retrieval (TR paper, Algorithms 1 and 2): the N-best
  translations that found the pool sentence, with Pr(t|s), the cosine, the Levenshtein
  similarity and Pr(d|t). TR ranks sentences by whole translations and names no matched terms.

A :class:`Candidate` is what TR's explanation is made from: a pool sentence one translation
found, with its cosine, Levenshtein similarity and Pr(d|t).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Explanation(ABC):
    """How one hit was retrieved (subclasses: one per method)."""

    @abstractmethod
    def matched_terms(self) -> list[str]:
        """The English terms the explanation says matched the document, in order."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The hit's ``explanation`` as the API returns it."""


def explanation_json(explanation: Explanation | None) -> dict[str, Any] | None:
    """``explanation.to_json()``, or None for a hit without an explanation."""
    return None if explanation is None else explanation.to_json()


# --- BOW-FD -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatchedTerm:
    """A word of a derivation that the document holds: its occurrences in the derivation and
    its bm25 weight in the document (the fields, in order, are the JSON keys)."""

    term: str
    count: int
    bm25: float


@dataclass(frozen=True)
class SentenceDerivation:
    """One query sentence's best derivation for the document ("the translation that retrieved
    it"). ``in_sentence_list`` (queries of several sentences only): whether the document is in
    this sentence's top list, or took the list's smoothed score."""

    sentence: int
    translation: str
    matched: tuple[MatchedTerm, ...]
    smt: float  # Σ_e w_smt·φ(e) (+ LEX) over the derivation's edges
    ir: float  # Σ_{t ∈ h} (v + δ_t)·bm25(t, d)
    in_sentence_list: bool | None = None

    @property
    def score(self) -> float:
        return self.smt + self.ir

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "translation": self.translation,
            "matched": [asdict(m) for m in self.matched],  # term, count, bm25
            "smt": self.smt,
            "ir": self.ir,
            "score": self.score,
            "sentence": self.sentence,
        }
        if self.in_sentence_list is not None:
            out["in_sentence_list"] = self.in_sentence_list
        return out


@dataclass(frozen=True)
class BowFdExplanation(Explanation):
    """BOW-FD: the document's best derivation for every sentence of the query."""

    sentences: tuple[SentenceDerivation, ...]

    def matched_terms(self) -> list[str]:
        """The words of each sentence's best derivation that matched the document."""
        return [m.term for s in self.sentences for m in s.matched]

    def to_json(self) -> dict[str, Any]:
        return {"sentences": [s.to_json() for s in self.sentences]}


# --- DT -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DtExplanation(Explanation):
    """DT: the 1-best translation (sentences joined) and its distinct words in the document
    (first-seen order)."""

    translation: str
    matched: tuple[str, ...]

    def matched_terms(self) -> list[str]:
        return list(self.matched)

    def to_json(self) -> dict[str, Any]:
        return {"translation": self.translation, "matched": list(self.matched)}


# --- PSQ ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FoundTranslations:
    """A source word of the query and its translations found in the document, with
    Pr(e|f) (rounded to 6 places), most probable first."""

    source: str
    translations: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class PsqExplanation(Explanation):
    """PSQ: per source word (that has any), its translations found in the document."""

    terms: tuple[FoundTranslations, ...]

    def matched_terms(self) -> list[str]:
        """The translations found in the document (source word -> {english: Pr(e|f)})."""
        return [e for found in self.terms for e, _ in found.translations]

    def to_json(self) -> dict[str, Any]:
        return {"terms": {found.source: dict(found.translations) for found in self.terms}}


# --- TR -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FoundByTranslation:
    """One of the N-best translations that found a pool sentence (probabilities and
    similarities rounded to 6 places)."""

    rank: int  # of the translation in the N-best list, from 1
    translation: str
    pr_t: float
    cosine: float
    levenshtein: float
    pr_d_given_t: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # the fields, in order, are the JSON keys


@dataclass(frozen=True)
class TrExplanation(Explanation):
    """TR: the translations that found the pool sentence, in the order they found it."""

    found_by: tuple[FoundByTranslation, ...]

    def matched_terms(self) -> list[str]:
        """None: TR scores whole translations (cosine and Levenshtein), not matched terms."""
        return []

    def to_json(self) -> dict[str, Any]:
        return {"found_by": [f.to_json() for f in self.found_by]}


# --- feedback (RM3) -------------------------------------------------------------------------------
@dataclass(frozen=True)
class FeedbackExplanation(Explanation):
    """A hit of the RM3-expanded query: its terms the document holds (with their weights
    P'(w) in the expanded query), split into the translation's and the feedback's."""

    feedback: str  # the feedback's signature, e.g. rm3(10,10,0.5)
    translation: str
    matched: tuple[tuple[str, float], ...]  # (term, P'(w)) the document holds, best first
    added: tuple[str, ...]  # those of ``matched`` that the feedback added
    first: Explanation | None = None  # the method's own, when its ranking held the document

    def matched_terms(self) -> list[str]:
        own = self.first.matched_terms() if self.first is not None else []
        return list(dict.fromkeys([*own, *(t for t, _ in self.matched)]))

    def to_json(self) -> dict[str, Any]:
        return {
            "feedback": self.feedback,
            "translation": self.translation,
            "matched": [{"term": t, "weight": round(w, 6)} for t, w in self.matched],
            "added": list(self.added),
            "first": None if self.first is None else self.first.to_json(),
        }


@dataclass(frozen=True)
class Candidate:
    """A pool sentence found by one translation: cosine, Levenshtein, Pr(d|t) (unnormalised)."""

    docno: int
    cosine: float
    levenshtein: float
    prob: float

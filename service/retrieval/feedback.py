"""Pseudo-relevance feedback on the English side: RM3 over a method's own top documents
(Lavrenko & Croft 2001, §3; RM3 as in Abdul-Jaleel et al. 2004, UMass at TREC 2004, §2).

A first ranking by any document method (DT, PSQ, BOW-FD) gives its top ``docs`` documents F.
The relevance model is

    P(w | R) ∝ Σ_{d ∈ F} P(d | q) · P(w | d),     P(w | d) = tf(w, d) / |d|

(Lavrenko & Croft 2001, §3, eq. 9 with maximum-likelihood document models), where P(d | q) is
the first method's posterior over F: the softmax of its scores (for BOW-FD the exponentiated
log-linear model score, which is what its model says; ``weighting="uniform"`` gives each
document the same share). The ``terms`` most probable words of P(w | R) are kept and
renormalised, and interpolated with the query's own term distribution — the 1-best translation's
index terms, P(w | q) = count / length —

    P'(w) = λ · P(w | q) + (1 − λ) · P(w | R),     λ = ``original_weight``

(RM3, Abdul-Jaleel et al. 2004, §2; Anserini's defaults are 10 documents, 10 terms, λ = 0.5;
ours keep its documents and terms and take λ = 0.7, chosen on the dev sets: bench/README.md).
The expanded query ranks the same index by BM25 with real-valued term weights
Σ_w P'(w) · bm25(w, d) (:meth:`~service.index.inverted.InvertedIndex.rank`). In the default
form, ``interpolate``, the result mixes that ranking with the method's own — CombSUM of their
min-max normalised scores (Fox & Shaw 1994; Lee 1997, §3), both read ``pool`` deep —, which
keeps the top of the method's ranking where the expanded query alone drifts; ``replace``
returns the expanded query's ranking alone.

The ``rerank`` forms feed the relevance model back into the method's own model instead of (or
besides) an English query: BOW-FD ranks its first ranking's documents again with every
expansion term the forest can produce earning extra IR weight — the per-term weights of Hieber
& Riezler 2015, §3 ("Decomposable Retrieval Features": ``t`` earns ``(v + δ_t)·bm25(t, d)``) —

    δ_t = v · (1 − λ)/λ · n · P_cut(t | R),

``n`` the 1-best translation's term count and P_cut the cut, renormalised relevance model: RM3
itself, relative to the original query, weights a query term λ/n + (1 − λ)·P(t|R) =
(λ/n)·(1 + δ_t/v) (:func:`rerank_weights`). ``rerank`` returns that second ranking alone,
``rerank+interpolate`` mixes it with the expanded query's as ``interpolate`` does. A method
without a forest (DT, PSQ) runs them as ``interpolate`` (:meth:`FeedbackParams.for_method`).

The stage is one function, :func:`feedback_stage`: expand, rank again (the rerank forms),
rank the expanded query, finish. It reads the store through a :class:`FeedbackReader` — one
index (:class:`IndexFeedback`, what ``Scorer.rank(..., feedback=)`` runs) or a collection's
snapshot (:class:`service.collection.feedback.SnapshotFeedback`) —, so RM3 is written once
whatever the store.

Term vectors come from the index's postings, transposed once per process
(:meth:`~service.index.inverted.InvertedIndex.doc_vectors`), never from raw text per request.
Terms whose rsj is 0 add nothing to BM25 and are not expansion terms. :func:`relevance_model`
is the vectorised estimate; :func:`relevance_model_reference` recomputes it from the
documents' stored text with plain Python, and the tests hold the two equal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from service.errors import InvalidInputError
from service.index.build import field_terms
from service.index.inverted import Hits, InvertedIndex
from service.retrieval.bowfd.features import IR_TERM_PREFIX
from service.retrieval.explain import Explanation, FeedbackExplanation

Weighting = Literal["posterior", "uniform"]
Form = Literal["interpolate", "replace", "rerank", "rerank+interpolate"]
FORMS: tuple[Form, ...] = ("interpolate", "replace", "rerank", "rerank+interpolate")
WEIGHTINGS: tuple[Weighting, ...] = ("posterior", "uniform")


@dataclass(frozen=True)
class FeedbackParams:
    """RM3's parameters (Anserini's defaults), recorded in the scorer signature."""

    docs: int = 10  # feedback documents |F|
    terms: int = 10  # expansion terms kept from P(w | R)
    original_weight: float = 0.7  # λ: the query's own share (Anserini: 0.5; 0.7 tuned on dev)
    weighting: Weighting = "posterior"  # P(d | q): softmax of the first scores, or uniform
    # the result: the method's ranking again with the relevance model's term weights (rerank:
    # chosen on the dev sets; a method without a forest interpolates), the method's ranking and
    # the expanded query's mixed, the expanded one alone, or rerank and mixed
    form: Form = "rerank"
    mix: float = 0.5  # interpolate: the expanded ranking's share
    pool: int = 100  # interpolate: how deep both rankings are read and normalised

    def __post_init__(self) -> None:
        if not 1 <= self.docs <= 1000:
            raise InvalidInputError(f"feedback docs must be in [1, 1000], got {self.docs}")
        if not 1 <= self.terms <= 1000:
            raise InvalidInputError(f"feedback terms must be in [1, 1000], got {self.terms}")
        if not 0.0 <= self.original_weight <= 1.0:
            raise InvalidInputError(
                f"feedback original_weight must be in [0, 1], got {self.original_weight}"
            )
        if self.form not in FORMS:
            raise InvalidInputError(
                f"feedback form must be one of {', '.join(FORMS)}, got {self.form!r}"
            )
        if not 0.0 <= self.mix <= 1.0:
            raise InvalidInputError(f"feedback mix must be in [0, 1], got {self.mix}")
        if not 1 <= self.pool <= 10_000:
            raise InvalidInputError(f"feedback pool must be in [1, 10000], got {self.pool}")
        if self.reranks and self.original_weight == 0.0:
            raise InvalidInputError(
                f"feedback form {self.form} weights the forest relative to the original query: "
                "original_weight must be above 0"
            )
        if self.weighting not in WEIGHTINGS:
            raise InvalidInputError(
                f"feedback weighting must be one of {', '.join(WEIGHTINGS)}, got {self.weighting!r}"
            )

    @property
    def mixes(self) -> bool:
        """The result mixes the method's ranking with the expanded query's."""
        return self.form in ("interpolate", "rerank+interpolate")

    @property
    def reranks(self) -> bool:
        """The method ranks again with the relevance model as extra term weight."""
        return self.form in ("rerank", "rerank+interpolate")

    def for_method(self, reranks: bool) -> FeedbackParams:
        """The parameters a method runs: one that cannot rank again (:attr:`Scorer.reranks`)
        runs the rerank forms as ``interpolate``."""
        return self if reranks or not self.reranks else replace(self, form="interpolate")

    def signature(self) -> str:
        w = "" if self.weighting == "posterior" else f",{self.weighting}"
        rm3 = f"rm3({self.docs},{self.terms},{self.original_weight:g}{w})"
        if self.form == "rerank":  # the method's top `pool` ranked again
            return f"{rm3}+rerank@{self.pool}"
        if self.reranks:
            rm3 += "+rerank"
        return f"{rm3}+mix({self.mix:g}@{self.pool})" if self.mixes else rm3

    def first_depth(self, k: int) -> int:
        """How deep the method's own ranking is needed for a result of ``k``."""
        return self.docs if self.form == "replace" else max(self.docs, k, self.pool)

    def expanded_depth(self, k: int) -> int:
        """How deep the expanded query's ranking is needed for a result of ``k`` (0: the
        result does not read it)."""
        if self.form == "rerank":
            return 0
        return max(k, self.pool) if self.mixes else k


@dataclass(frozen=True)
class Expansion:
    """The expanded query: index terms with their weights P'(w), best first, and which of
    them the original query did not have (``added``); ``relevance`` the cut, renormalised
    relevance model P_cut(w | R) (best first) and ``query_length`` the original query's term
    count ``n``, what :func:`rerank_weights` reads."""

    terms: tuple[tuple[str, float], ...]
    added: tuple[str, ...]
    feedback_docs: tuple[int, ...]
    relevance: tuple[tuple[str, float], ...] = ()
    query_length: int = 0

    def weights(self) -> dict[str, float]:
        return dict(self.terms)

    def within(self, usable: AbstractSet[str]) -> Expansion:
        """The expansion as far as a method can use it: its terms in ``usable`` (the rerank
        form weights only the words the forest can produce)."""
        return Expansion(
            tuple((t, w) for t, w in self.terms if t in usable),
            tuple(t for t in self.added if t in usable),
            self.feedback_docs,
            tuple((t, w) for t, w in self.relevance if t in usable),
            self.query_length,
        )


def rerank_weights(
    expansion: Expansion, params: FeedbackParams, v: float, weights: Mapping[str, float]
) -> dict[str, float]:
    """``weights`` (a method's weight vector) with the rerank forms' extra IR weight of every
    relevance-model term added to its ``ir:<term>`` entry: δ_t = v · (1 − λ)/λ · n · P_cut(t|R)
    (see the module docstring; a term the forest cannot produce earns nothing from it)."""
    out = dict(weights)
    lam = params.original_weight
    scale = v * (1.0 - lam) / lam * expansion.query_length
    for term, p in expansion.relevance:
        name = IR_TERM_PREFIX + term
        out[name] = out.get(name, 0.0) + scale * p
    return out


def document_weights(scores: Sequence[float], weighting: Weighting) -> npt.NDArray[np.float64]:
    """P(d | q) over the feedback documents: the softmax of their first-pass scores (the
    posterior of a log-linear model), or uniform."""
    s = np.asarray(scores, dtype=np.float64)
    if not len(s):
        return s
    if weighting == "uniform":
        return np.full(len(s), 1.0 / len(s))
    e = np.exp(s - s.max())
    out: npt.NDArray[np.float64] = e / e.sum()
    return out


def relevance_model(
    index: InvertedIndex, docnos: Sequence[int], doc_weights: npt.ArrayLike
) -> dict[int, float]:
    """P(w | R) over term ids (unnormalised by the cut): Σ_d P(d|q) · tf(w, d) / |d| from the
    documents' term vectors, for terms with a non-zero rsj; |d| is the document's indexed
    length (its terms' frequencies summed, a title's counted ``title_weight`` times)."""
    ptr, term_ids, tfs = index.doc_vectors(docnos)
    rows = np.diff(ptr)
    weights = np.asarray(doc_weights, dtype=np.float64)
    totals = np.maximum(index.doc_lengths[np.asarray(docnos, dtype=np.int64)], 1)
    share = np.repeat(weights / totals, rows) * tfs
    keep = index.rsj[term_ids] != 0
    ids, inverse = np.unique(term_ids[keep], return_inverse=True)
    mass = np.zeros(len(ids), dtype=np.float64)
    np.add.at(mass, inverse, share[keep])
    return dict(zip(ids.tolist(), mass.tolist(), strict=True))


def relevance_model_reference(
    index: InvertedIndex, docnos: Sequence[int], doc_weights: Sequence[float]
) -> dict[int, float]:
    """:func:`relevance_model` recomputed from each document's stored title and text through
    the index's tokenizer and analysis chain (a title counted ``title_weight`` times), with
    plain Python: the reference the vectorised estimate is tested against."""
    model: dict[int, float] = {}
    for docno, weight in zip(docnos, doc_weights, strict=True):
        doc = index.doc(int(docno))
        title, text = field_terms(index.tokenize, doc, index.analyzer)
        counts: Counter[str] = Counter()
        for term in title:
            counts[term] += index.title_weight
        counts.update(text)
        length = sum(counts.values())
        for term, tf in counts.items():
            tid = index.vocab.id(term)
            if tid is None or index.rsj[tid] == 0:
                continue
            model[tid] = model.get(tid, 0.0) + float(weight) * tf / length
    return model


def query_model(index: InvertedIndex, tokens: Sequence[str]) -> dict[int, float]:
    """P(w | q): the query tokens' index terms, count / number of terms (repeats counted)."""
    return query_model_counted(index, tokens)[0]


def query_model_counted(
    index: InvertedIndex, tokens: Sequence[str]
) -> tuple[dict[int, float], int]:
    """:func:`query_model`, and the number of terms ``n`` (repeats counted)."""
    ids = [t for t in index.term_ids(tokens) if index.rsj[t] != 0]
    if not ids:
        return {}, 0
    counts = Counter(ids)
    return {t: c / len(ids) for t, c in counts.items()}, len(ids)


def expand(
    index: InvertedIndex,
    query_tokens: Sequence[str],
    first: Hits | Sequence[tuple[int, float]],
    params: FeedbackParams,
    *,
    reference: bool = False,
) -> Expansion:
    """RM3's expanded query for ``query_tokens`` (the 1-best translation) from the ``first``
    ranking's top ``params.docs`` documents (best first)."""
    pairs = (
        list(zip(first.docs.tolist(), first.scores.tolist(), strict=True))
        if isinstance(first, Hits)
        else [(int(d), float(s)) for d, s in first]
    )
    docnos, weights = feedback_documents(pairs, params)
    estimate = relevance_model_reference if reference else relevance_model
    rm = estimate(index, docnos, weights) if docnos else {}
    original, n = query_model_counted(index, query_tokens)
    return build_expansion(original, n, rm, params, docnos, index.term)


Key = TypeVar("Key", int, str)


def feedback_documents(
    first: Sequence[tuple[int, float]], params: FeedbackParams
) -> tuple[list[int], list[float]]:
    """The feedback documents F — the first ranking's top ``params.docs`` — and P(d | q)."""
    pairs = list(first)[: params.docs]
    weights = document_weights([s for _, s in pairs], params.weighting)
    return [d for d, _ in pairs], weights.tolist()


def build_expansion(
    original: Mapping[Key, float],
    n: int,
    rm: Mapping[Key, float],
    params: FeedbackParams,
    docs: Sequence[int],
    name: Callable[[Key], str],
) -> Expansion:
    """The expansion of a query model ``original`` (of ``n`` terms) by the relevance model
    ``rm`` (:func:`combine`), its terms named by ``name`` (a single index keys them by id, a
    collection by the term itself)."""
    order = combine(original, rm, params)
    return Expansion(
        tuple((name(t), w) for t, w in order),
        tuple(name(t) for t, _ in order if t not in original),
        tuple(docs),
        tuple((name(t), w) for t, w in cut_relevance(rm, params)),
        n,
    )


def cut_relevance(rm: Mapping[Key, float], params: FeedbackParams) -> list[tuple[Key, float]]:
    """P(w|R) cut to its ``params.terms`` most probable terms (ties by the key) and
    renormalised, best first; empty when it holds no mass."""
    kept = sorted(rm.items(), key=lambda kv: (-kv[1], kv[0]))[: params.terms]
    total = math.fsum(w for _, w in kept)
    return [(t, w / total) for t, w in kept] if total > 0 else []


def combine(
    original: Mapping[Key, float], rm: Mapping[Key, float], params: FeedbackParams
) -> list[tuple[Key, float]]:
    """P'(w) = λ·P(w|q) + (1 − λ)·P(w|R), P(w|R) cut to its ``params.terms`` most probable
    terms and renormalised; the terms with a positive weight, best first, ties by the key (a
    term id of one index, or the term: an index numbers its terms in their sorted order, so
    both order alike)."""
    rel = dict(cut_relevance(rm, params))
    lam = params.original_weight if rel and original else (1.0 if original else 0.0)
    combined: dict[Key, float] = {}
    for t, w in original.items():
        combined[t] = combined.get(t, 0.0) + lam * w
    for t, w in rel.items():
        combined[t] = combined.get(t, 0.0) + (1.0 - lam) * w
    return sorted(((t, w) for t, w in combined.items() if w > 0), key=lambda kv: (-kv[1], kv[0]))


def rank_expanded(index: InvertedIndex, expansion: Expansion, k: int) -> Hits:
    """The top ``k`` documents for the expanded query: Σ_w P'(w) · bm25(w, d)."""
    return rank_expanded_counted(index, expansion, k)[0]


def rank_expanded_counted(index: InvertedIndex, expansion: Expansion, k: int) -> tuple[Hits, int]:
    """:func:`rank_expanded`, and how many documents hold an expansion term (none for
    ``k`` = 0: the rerank form reads no expanded ranking)."""
    ids = [index.vocab.id(t) for t, _ in expansion.terms]
    pairs = [(i, w) for i, (_, w) in zip(ids, expansion.terms, strict=True) if i is not None]
    if not pairs or k < 1:
        return Hits(np.zeros(0, np.int32), np.zeros(0, np.float32)), 0
    return index.rank_counted([i for i, _ in pairs], [w for _, w in pairs], k)


def _min_max(scores: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
    s = np.asarray(scores, dtype=np.float64)
    if not len(s):
        return s
    lo, hi = float(s.min()), float(s.max())
    out: npt.NDArray[np.float64] = (s - lo) / (hi - lo if hi > lo else 1.0)
    return out


def interpolate(first: Hits, second: Hits, share: float, k: int) -> Hits:
    """CombSUM of the two rankings' min-max normalised scores (Fox & Shaw 1994; Lee 1997,
    §3): ``(1 − share)·first + share·second`` over the documents of either, a document missing
    from a ranking scoring 0 there; the top ``k``, ties by ascending document number."""
    docs = np.union1d(first.docs, second.docs).astype(np.int32)
    mixed = np.zeros(len(docs), dtype=np.float64)
    for hits, w in ((first, 1.0 - share), (second, share)):
        if len(hits.docs):
            mixed[np.searchsorted(docs, hits.docs)] += w * _min_max(hits.scores)
    order = np.lexsort((docs, -mixed))[:k]
    return Hits(docs[order], mixed[order].astype(np.float32))


def interpolate_reference(first: Hits, second: Hits, share: float, k: int) -> Hits:
    """:func:`interpolate` with dictionaries and plain Python: the reference."""

    def normalised(h: Hits) -> dict[int, float]:
        scores = [float(x) for x in h.scores.tolist()]
        if not scores:
            return {}
        lo, hi = min(scores), max(scores)
        span = hi - lo if hi > lo else 1.0
        return {int(d): (x - lo) / span for d, x in zip(h.docs.tolist(), scores, strict=True)}

    a, b = normalised(first), normalised(second)
    merged = {d: (1 - share) * a.get(d, 0.0) + share * b.get(d, 0.0) for d in a.keys() | b.keys()}
    best = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return Hits(
        np.array([d for d, _ in best], dtype=np.int32),
        np.array([x for _, x in best], dtype=np.float32),
    )


class FeedbackStage(NamedTuple):
    """The feedback stage's result: (document, score, explanation) best first, and what it
    adds to the method's ``info`` (the expansion, and the counts ``retrieved`` reads)."""

    hits: list[tuple[int, float, Explanation | None]]
    info: dict[str, Any]
    retrieved: tuple[int, Literal["eq", "gte"]]


def finish_feedback(
    first: Sequence[tuple[int, float]],
    expanded: Hits,
    reached: int,
    expansion: Expansion,
    translation: Sequence[str],
    k: int,
    params: FeedbackParams,
    *,
    own_retrieved: int,
    own_candidates: Any,
    own_relation: Literal["eq", "gte"] = "gte",
    holds: Callable[[str, int], bool] | None = None,
    own_explanation: Callable[[int], Explanation | None] | None = None,
    usable: AbstractSet[str] | None = None,
) -> FeedbackStage:
    """What one index and a sharded collection share after each ranked the expanded query
    its own way (``expanded``, ``reached`` documents holding an expansion term): in the
    mixing forms the mix with the method's ``first`` ranking (:func:`interpolate`, its top
    ``pool``; in the rerank forms ``first`` is the method's second ranking), in the
    ``rerank`` form ``first`` alone; with ``holds(term, doc)``, each hit's explanation (the
    expansion terms it holds, and the method's own explanation where ``own_explanation`` has
    one); and the
    count retrieved — the expanded query's, the method's own (``own_retrieved``,
    ``own_relation``) in the ``rerank`` form, or with both mixed their union's: exact when
    neither ranking was cut (each shorter than its depth), else at least the larger count and
    at most the expanded count plus the method's candidates (the bound the API's
    ``total_max`` reads). In the ``rerank`` form, the expansion shown and explained is the
    part the method could use: its terms in ``usable`` (the forest's index terms)."""
    mixed = params.mixes
    found = expanded  # the expanded query's own ranking (``expanded`` becomes the page's)
    if params.form == "rerank" and usable is not None:
        expansion = expansion.within(usable)
    if params.form == "rerank":
        head = first[:k]
        expanded = Hits(
            np.array([d for d, _ in head], dtype=np.int32),
            np.array([x for _, x in head], dtype=np.float32),
        )
    elif mixed:
        pool = first[: params.pool]
        own = Hits(
            np.array([d for d, _ in pool], dtype=np.int32),
            np.array([x for _, x in pool], dtype=np.float32),
        )
        expanded = interpolate(own, expanded, params.mix, k)
    in_first = {d for d, _ in first}
    hits: list[tuple[int, float, Explanation | None]] = []
    for d, score in zip(expanded.docs.tolist(), expanded.scores.tolist(), strict=True):
        expl: Explanation | None = None
        if holds is not None:
            mine = own_explanation(d) if own_explanation is not None and d in in_first else None
            expl = _explain(d, expansion, translation, params, holds, mine)
        hits.append((d, float(score), expl))
    total, relation, candidates = _retrieved(
        params, k, reached, own_retrieved, own_relation, own_candidates, in_first, found, first
    )
    info = {
        "first_candidates": own_candidates,
        "candidates": candidates,
        "reached": total,
        "reached_relation": relation,
        "expansion": {**as_mapping(expansion), "feedback": params.signature()},
    }
    return FeedbackStage(hits, info, (total, relation))


def _explain(
    doc: int,
    expansion: Expansion,
    translation: Sequence[str],
    params: FeedbackParams,
    holds: Callable[[str, int], bool],
    own: Explanation | None,
) -> Explanation:
    """A hit's explanation: the expansion terms ``doc`` holds, and the method's own."""
    held = {t for t, _ in expansion.terms if holds(t, doc)}
    return FeedbackExplanation(
        params.signature(),
        " ".join(translation),
        tuple((t, w) for t, w in expansion.terms if t in held),
        tuple(t for t in expansion.added if t in held),
        own,
    )


def _retrieved(
    params: FeedbackParams,
    k: int,
    reached: int,
    own_retrieved: int,
    own_relation: Literal["eq", "gte"],
    own_candidates: Any,
    in_first: AbstractSet[int],
    found: Hits,
    first: Sequence[tuple[int, float]],
) -> tuple[int, Literal["eq", "gte"], Any]:
    """The count retrieved, its relation and the candidate counts (:func:`finish_feedback`)."""
    mixed = params.mixes
    if params.form == "rerank":  # the method's own documents, ranked again
        candidates = own_candidates if isinstance(own_candidates, list) else [own_candidates]
        return own_retrieved, own_relation, candidates
    candidates = [reached]
    if mixed and isinstance(own_candidates, list):
        candidates += [int(c) for c in own_candidates]
    elif mixed and isinstance(own_candidates, int):
        candidates.append(own_candidates)
    total = max(reached, own_retrieved) if mixed else reached
    relation: Literal["eq", "gte"] = "gte" if mixed and len(candidates) > 1 else "eq"
    if mixed and len(first) < params.first_depth(k) and len(found) < params.expanded_depth(k):
        # neither ranking was cut, so both hold every document they rank: count their union
        total, relation = len(set(in_first) | set(found.docs.tolist())), "eq"
    return total, relation, candidates


def as_mapping(expansion: Expansion) -> Mapping[str, object]:
    """The expansion as the API and the explanations show it."""
    return {
        "terms": [{"term": t, "weight": round(w, 6)} for t, w in expansion.terms],
        "added": list(expansion.added),
        "feedback_docs": len(expansion.feedback_docs),
    }


Explainer = Callable[[int], Explanation | None]
#: The method again over its own documents (``own``, best first) with an expansion's relevance
#: model as extra weight: (document, score) best first, and the explainer of its hits.
RankAgain = Callable[
    ["Expansion", "FeedbackParams", Sequence[tuple[int, float]]],
    tuple[list[tuple[int, float]], Explainer | None],
]


class FeedbackReader(Protocol):
    """What the feedback stage reads of a store: documents are numbered as the store's
    rankings number them (an index's document numbers, a collection's sequence numbers)."""

    def expand(
        self, translation: Sequence[str], own: Sequence[tuple[int, float]], params: FeedbackParams
    ) -> Expansion:
        """RM3's expanded query from the ranking ``own``'s top ``params.docs`` documents."""
        ...

    def rank_expanded(self, expansion: Expansion, k: int) -> tuple[Hits, int]:
        """The expanded query's top ``k``, and how many documents hold an expansion term."""
        ...

    def usable(self, words: AbstractSet[str]) -> set[str]:
        """The index terms of ``words`` (the forests' target words) with a positive weight."""
        ...

    def holds(self, term: str, doc: int) -> bool:
        """Whether document ``doc`` holds the index term of ``term``."""
        ...


class IndexFeedback:
    """:class:`FeedbackReader` over one index."""

    def __init__(self, index: InvertedIndex) -> None:
        self.index = index

    def expand(
        self, translation: Sequence[str], own: Sequence[tuple[int, float]], params: FeedbackParams
    ) -> Expansion:
        return expand(self.index, translation, own, params)

    def rank_expanded(self, expansion: Expansion, k: int) -> tuple[Hits, int]:
        return rank_expanded_counted(self.index, expansion, k)

    def usable(self, words: AbstractSet[str]) -> set[str]:
        terms = (self.index.weighted_term(w) for w in words)
        return {t for t in terms if t is not None}

    def holds(self, term: str, doc: int) -> bool:
        return self.index.contains(term, doc)


def feedback_stage(
    reader: FeedbackReader,
    translation: Sequence[str],
    target_words: AbstractSet[str],
    own: Sequence[tuple[int, float]],
    k: int,
    params: FeedbackParams,
    *,
    own_retrieved: tuple[int, Literal["eq", "gte"]],
    own_candidates: Any,
    explain: bool = False,
    own_explanation: Explainer | None = None,
    rerank: RankAgain | None = None,
) -> FeedbackStage:
    """The feedback stage after a method's first ranking ``own`` (best first, at least
    ``params.first_depth(k)`` deep; the method ``own_retrieved`` documents), whatever the
    store: the expansion from its top documents; in the rerank forms the method again over
    them (``rerank``); the expanded query's ranking; and :func:`finish_feedback`. ``params``
    is already the method's (:meth:`FeedbackParams.for_method`); ``translation``: the 1-best
    translation's tokens; ``target_words``: the forests' (what the ``rerank`` form shows)."""
    expansion = reader.expand(translation, own, params)
    if params.reranks:
        assert rerank is not None, "the rerank forms need the method's rank_again"
        own, own_explanation = rerank(expansion, params, own)
    found, reached = reader.rank_expanded(expansion, params.expanded_depth(k))
    usable = reader.usable(target_words) if params.form == "rerank" else None
    return finish_feedback(
        own, found, reached, expansion, translation, k, params,
        own_retrieved=own_retrieved[0], own_candidates=own_candidates,
        own_relation=own_retrieved[1], holds=reader.holds if explain else None,
        own_explanation=own_explanation, usable=usable,
    )  # fmt: skip

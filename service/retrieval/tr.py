"""Translation retrieval (TR) for translators: N-best query translation, cosine retrieval over
a sentence pool and Levenshtein re-weighting (TR paper, §1–2, Algorithms 1 and 2).

A translator's source sentence ``s`` should find English pool sentences ``d`` that translate
it. The TR paper ranks them by ``Pr(d|s) = Σ_t Pr(t|s)·Pr(d|t)`` over the N-best translations
``t``:

* ``Pr(t|s)``: the log-linear model's probability (TR paper, eq. 1) renormalised over the list, i.e.
  the softmax of the derivations' model scores over the N distinct best strings.
  A query of several sentences is translated sentence by sentence and the lists combined by
  a beam: the N best concatenations by summed score.
* ``Pr(d|t)`` (TR paper, eq. 2 and its Levenshtein variant) ``= cos(t, d)^λ1 · E(t, d)^λ2`` with
  query weights ``w_{t,t'} = lg(N/f_{t'}) + 1`` and document weights
  ``w_{d,t'} = lg(f_{d,t'} + 1)``, ``lg`` = log10. *Our reading of the guide:* here ``N`` is
  the number of pool sentences and ``f_{t'}`` the number of pool sentences containing
  ``t'`` (its df) — the paper: "N是文档总数, f_t′是包含项t′的文档数目" — not the N of the
  N-best list; ``f_{d,t'}`` is the frequency of ``t'`` in ``d``. The query vector has one
  dimension per distinct term of ``t`` that occurs in the pool (the weight has no query tf;
  a term in no pool sentence has no defined weight and is left out of the norm); the
  document vector has one per distinct term of ``d``.
  ``E(t, d) = 1 − lev(t, d)/max(|t|, |d|)``, the Levenshtein similarity, by default over the
  **characters** of the token sequences joined by single spaces (``levenshtein_unit="char"``);
  ``levenshtein_unit="word"`` is the TR paper's word-level distance (a word error rate).
  ``levenshtein=False`` sets ``λ2 = 0``.
* Candidates ``D(t)``: the pool sentences that share at least one term with ``t``.
* Algorithm 1: ``Pr(d|t)`` is normalised over the candidates of each ``t`` — the paper's
  line 9 accumulates the normaliser in a variable it also calls N, distinct from both Ns
  above — and ``score(d) = Σ_t Pr(t|s)·Pr(d|t)/Z_t``. Algorithm 2 (N = 1): the
  unnormalised ``Pr(d|t)`` of the single best translation (same ranking, cheaper).

**Why E is over characters (issue 40).** With the TR paper's word-level E, re-weighting the
5-best barely helped, and on zh-en it hurt: on the first 500 dev sentences of each pair, p@1 /
MRR went from .904/.930 (cosine alone) to .910/.928 with E (de-en, untuned weights), from
.870/.897 to .880/.897 (zh-en, untuned) and from .886/.912 to .886/.904 (zh-en, tuned with
ListMLE-TE; f@5 .316 → .309). A word edit distance counts a moved clause as a run of
substitutions, and the help, written in English and translated into Chinese, comes back from the
decoder in the Chinese clause order ("if you want to overwrite the existing libraries …, please
check the replace existing libraries box" for "check the replace existing libraries box if you
want existing libraries … to be overwritten"): the reference gets E = .19 and a wrong sentence
that opens the same way ("if you want to view the calculation results …") .43, which outweighs
the cosine; E = 0 — ``Pr(d|t) = 0``, the reference gone from the list — for 4–6 of 503 zh-en
references, and for 2.6 % of the top 100 candidates by cosine. It also counts another form of
the right word — "use"/"using", "delete"/"deleting", "error"/"errors",
"expression"/"expression1" — as much as another word, and on the short headings and UI strings
of the pool one such edit costs a quarter or a third of E. Over the characters of the joined
tokens an inflection costs two or three characters, and a moved clause costs less because the
two strings still share characters where their words differ (.34 against .40 in the example;
E = 0 for 131 of 4.8 million candidates against 199,000 over words), while a different word and a
different order (the TR paper's reason for E: "katakana … to hiragana" against the reverse)
still count. On the same sentences and translations character-level E gives .924/.940 (de-en;
p = .045 for p@1 against cosine alone, p = .004 for MRR against word-level E), .888/.908 (zh-en,
untuned; MRR p = .045 against word-level E) and .902/.922 (zh-en, tuned; MRR p = .0008 against
word-level E), and .922/.941 with de-en's tuned weights (word-level .912/.931). What did not
gain: dropping punctuation or stopwords from E (at or below word-level E; the pool and the
translations are lowercased already); a smaller depth M (10–300 over characters: .000 to −.010
p@1 against M = 1000); other λ (λ2 ∈ {.5, 2, 4}, λ1 ∈ {1, 2} over characters: at most +.004 p@1
against λ1 = λ2 = 1, p ≥ .2, and λ2 = 4 lost .016 on tuned zh-en; over words, λ2 ∈ {.25, .5} or
λ1 ∈ {2, 4} moved p@1 by −.004 to +.012, λ2 = 4 lost .036 on zh-en); a linear interpolation
``(1−a)·cos + a·E`` (over characters, a = .5: +.002 to +.006 p@1 against the product, p ≥ .37);
E on the 1-best translation only (at or below E on all N); dropping Algorithm 1's normalisation
(−.002 to +.006). The figures are in ``bench/results/tr_levenshtein.json``
(``bench/exp_tr_levenshtein.py``).

**Approximation (speed on the 450k-sentence pool).** For every translation the cosine of all
candidates is computed exactly and at once from the postings (numerator accumulated per query
term, document norms precomputed once per index); only the ``max_candidates`` (M, default
1000) best by cosine get the Levenshtein factor, and ``Z_t`` sums over those M. A candidate
outside the cosine top M is dropped even if its Levenshtein similarity would have lifted it;
with M at least the number of candidates the result is exact (the tests check this against a
direct implementation of the formulas). E is computed by rapidfuzz;
:func:`levenshtein_distance_reference` is the textbook dynamic programme the tests hold it to.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, get_args

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError, InvalidInputError
from service.forest.kbest import UNIQUE_KBEST_TIME_BUDGET_S, unique_kbest
from service.index.analysis import is_word
from service.index.bm25 import RsjPolicy
from service.index.inverted import InvertedIndex
from service.retrieval.base import DecodedQuery, Hit, Scorer, register
from service.retrieval.explain import Candidate, Explanation, FoundByTranslation, TrExplanation
from service.retrieval.partials import Method, Partial, SegmentPart, SegmentTask
from service.retrieval.psq import posteriors

FloatArray = npt.NDArray[np.float64]

LevenshteinUnit = Literal["char", "word"]
LEVENSHTEIN_UNITS: tuple[str, ...] = get_args(LevenshteinUnit)

_NORMS: weakref.WeakKeyDictionary[InvertedIndex, FloatArray] = weakref.WeakKeyDictionary()


def document_norms(index: InvertedIndex) -> FloatArray:
    """``sqrt(Σ_{t'∈d} lg(f_{d,t'} + 1)²)`` for every pool sentence (cached per index)."""
    norms = _NORMS.get(index)
    if norms is None:
        if index.rsj_policy is RsjPolicy.DROP:
            raise ConfigurationError(
                f"{index.path}: translation retrieval needs every posting, but this index "
                "dropped the postings of frequent terms (rsj policy 'drop'); rebuild the pool "
                "index with --rsj floor"
            )
        sq = np.zeros(index.n_docs, dtype=np.float64)
        for t in range(index.n_terms):
            post = index.postings(t)
            if len(post.docs):
                sq[post.docs] += np.log10(post.tfs.astype(np.float64) + 1.0) ** 2
        norms = np.sqrt(sq)
        _NORMS[index] = norms
    return norms


def levenshtein_distance_reference(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The edit distance of two sequences (insertions, deletions, substitutions, each 1) by the
    textbook dynamic programme (Wagner & Fischer 1974), one row at a time: the slow reference
    for rapidfuzz's."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def levenshtein_form(tokens: Sequence[str], unit: LevenshteinUnit) -> Sequence[str]:
    """What E compares: the tokens (``word``) or their characters joined by single spaces
    (``char``)."""
    if unit == "char":
        return " ".join(tokens)
    if unit == "word":
        return list(tokens)
    raise InvalidInputError(
        f"the Levenshtein unit must be one of {LEVENSHTEIN_UNITS}, got {unit!r}"
    )


def _similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """``1 − dist/max(|a|, |b|)`` of two forms of :func:`levenshtein_form` (rapidfuzz)."""
    from rapidfuzz.distance import Levenshtein

    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - Levenshtein.distance(a, b) / longest


def levenshtein_similarity(
    a: Sequence[str], b: Sequence[str], unit: LevenshteinUnit = "word"
) -> float:
    """``E = 1 − dist/max(|a|, |b|)`` of two token sequences (1.0 for two empties): over their
    words (``unit="word"``, the TR paper's) or over the characters of each joined by single
    spaces (``unit="char"``, the scorer's default)."""
    return _similarity(levenshtein_form(a, unit), levenshtein_form(b, unit))


def levenshtein_similarity_reference(
    a: Sequence[str], b: Sequence[str], unit: LevenshteinUnit = "word"
) -> float:
    """:func:`levenshtein_similarity` by :func:`levenshtein_distance_reference`."""
    x, y = (" ".join(a), " ".join(b)) if unit == "char" else (list(a), list(b))
    longest = max(len(x), len(y))
    if longest == 0:
        return 1.0
    return 1.0 - levenshtein_distance_reference(x, y) / longest


def query_vector(
    index: InvertedIndex, tokens: Sequence[str]
) -> tuple[list[int], list[float], float]:
    """Distinct pool terms of ``t`` in this index with their weights ``lg(N/f_{t'}) + 1``, and
    the norm of the query vector over every term of ``t`` the collection holds (a segment of
    a collection may lack some: they still count in the norm, as in one index)."""
    ids: list[int] = []
    weights: list[float] = []
    seen: set[str] = set()
    norm2 = 0.0
    for tok in tokens:
        term = index.analyzer.term(tok)
        if term is None or term in seen:
            continue
        seen.add(term)
        df = index.collection_df(tok)
        if df <= 0:
            continue
        w = math.log10(index.collection_docs / df) + 1.0
        norm2 += w * w
        tid = index.term_id(tok)
        if tid is not None:
            ids.append(tid)
            weights.append(w)
    return ids, weights, math.sqrt(norm2)


def cosine_candidates(
    index: InvertedIndex, tokens: Sequence[str]
) -> tuple[npt.NDArray[np.int32], FloatArray]:
    """Every pool sentence sharing a *word* with ``t`` and its cosine with ``t`` (TR paper,
    eq. 2). The pool keeps punctuation as terms (they count in the cosine), but a sentence that
    shares only punctuation with the translation ("?" with a question) is no suggestion."""
    ids, weights, qnorm = query_vector(index, tokens)
    if not ids:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float64)
    num = np.zeros(index.n_docs, dtype=np.float64)
    reached = np.zeros(index.n_docs, dtype=np.bool_)
    for tid, w in zip(ids, weights, strict=True):
        post = index.postings(tid)
        num[post.docs] += w * np.log10(post.tfs.astype(np.float64) + 1.0)
        if is_word(index.term(tid)):
            reached[post.docs] = True
    docs = np.flatnonzero(reached).astype(np.int32)
    dnorm = document_norms(index)[docs]
    return docs, num[docs] / (qnorm * dnorm)


def top_by_score(docs: npt.NDArray[np.int32], scores: FloatArray, m: int) -> list[int]:
    """Positions of the ``m`` best scores (ties: smaller document number first)."""
    if len(docs) > m:
        part = np.argpartition(-scores, m - 1)
        threshold = scores[part[m - 1]]
        keep = np.flatnonzero(scores >= threshold)
    else:
        keep = np.arange(len(docs))
    order = np.lexsort((docs[keep], -scores[keep]))
    return [int(i) for i in keep[order][:m]]


Keep = Callable[[int, float], bool]  # (docno, cosine): whether a candidate can still count


@dataclass
class TRResult:
    """Scores by document, and per document the translations that found it."""

    scores: dict[int, float] = field(default_factory=dict)
    found_by: dict[int, list[FoundByTranslation]] = field(default_factory=dict)


def combine_candidates(
    translations: Sequence[tuple[Sequence[str], float]], lists: Sequence[Sequence[Candidate]]
) -> TRResult:
    """Algorithm 1 (TR paper): ``Pr(d|s) = Σ_t Pr(t|s)·Pr(d|t)`` with ``Pr(d|t)`` normalised
    over each translation's candidates ``lists[i]`` (best first); Algorithm 2 for one."""
    result = TRResult()
    single = len(translations) == 1
    for rank, ((tokens, pr_t), cands) in enumerate(zip(translations, lists, strict=True)):
        z = sum(c.prob for c in cands)
        if z <= 0:
            continue
        text = " ".join(tokens)
        for c in cands:
            if c.prob <= 0:
                continue
            pr_d = c.prob if single else c.prob / z
            result.scores[c.docno] = result.scores.get(c.docno, 0.0) + pr_t * pr_d
            result.found_by.setdefault(c.docno, []).append(
                FoundByTranslation(
                    rank=rank + 1,
                    translation=text,
                    pr_t=round(pr_t, 6),
                    cosine=round(c.cosine, 6),
                    levenshtein=round(c.levenshtein, 6),
                    pr_d_given_t=round(pr_d, 6),
                )
            )
    return result


def _tr_keep(before: Sequence[Candidate], m: int, seq: npt.NDArray[np.int64]) -> Keep | None:
    """Whether a segment's candidate (its docno, cosine) can enter the top ``m`` that
    :meth:`TrMethod.merge` keeps, given the candidates ``before`` it of the segments searched
    already: only if it sorts before their ``m``-th (cosine down, sequence number up). None
    when fewer than ``m`` came before (anything can enter)."""
    if len(before) < m:
        return None
    last = sorted(before, key=lambda c: (-c.cosine, c.docno))[m - 1]
    floor = (-last.cosine, last.docno)
    return lambda docno, cosine: (-cosine, int(seq[docno])) < floor


class TrMethod(Method["TranslationRetrieval"]):
    """Translation retrieval (TR paper, Algorithm 1): each translation's top-M candidates by
    cosine are merged to the collection's top M, then combined once."""

    def plan(self, scorer: TranslationRetrieval, query: DecodedQuery) -> Any:
        return tuple((tuple(t), p) for t, p in scorer.translations(query))

    def partial(self, scorer: TranslationRetrieval, task: SegmentTask) -> tuple[Partial, Any]:
        keep, bound, seq, plan = None, task.bound, task.view.seq, task.plan
        if bound is not None and bound.candidates:
            keep = [_tr_keep(cands, scorer.max_candidates, seq) for cands in bound.candidates]
        lists = scorer.candidate_lists(plan, keep)
        by_seq = tuple(
            tuple(Candidate(int(seq[c.docno]), c.cosine, c.levenshtein, c.prob) for c in cands)
            for cands in lists
        )
        info = {"max_candidates": scorer.max_candidates}
        empty = np.zeros(0, np.int64)
        part = Partial(empty, np.zeros(0), (), 0, "eq", info, depth=task.depth, translations=plan,
                       candidates=by_seq)  # fmt: skip
        return part, None

    def merge(self, parts: Sequence[Partial]) -> Partial:
        m = int(parts[0].info["max_candidates"])
        lists = []
        for i in range(len(parts[0].candidates)):
            cands = sorted((c for p in parts for c in p.candidates[i]),
                           key=lambda c: (-c.cosine, c.docno))  # fmt: skip
            lists.append(tuple(cands[:m]))
        return replace(parts[0], candidates=tuple(lists), depth=max(p.depth for p in parts))

    def finish(self, part: Partial, k: int) -> Partial:
        result = combine_candidates(part.translations, part.candidates)
        ranked = sorted(result.scores.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
        info = {
            "translations": [{"text": " ".join(t), "pr_t": p} for t, p in part.translations],
            "candidates": len(result.scores),
        }
        return replace(
            part,
            seqs=np.asarray([d for d, _ in ranked], dtype=np.int64),
            scores=np.asarray([s for _, s in ranked], dtype=np.float64),
            retrieved=len(ranked),
            relation="eq" if len(ranked) < k else "gte",
            info=info,
            explanations=tuple(TrExplanation(tuple(result.found_by[d])) for d, _ in ranked),
        )

    def explain(
        self, scorer: TranslationRetrieval, kept: Any, docno: int, final: Partial, view: SegmentPart
    ) -> Explanation | None:
        seqs: list[int] = final.seqs.tolist()
        return final.explanations[seqs.index(int(view.seq[docno]))]


@register("tr")
class TranslationRetrieval(Scorer):
    """Ranks pool sentences by ``Σ_t Pr(t|s)·Pr(d|t)`` (TR paper, Algorithms 1 and 2)."""

    segments = TrMethod()  # how it runs over a collection's segments

    ranks_documents = False
    configured: ClassVar[Mapping[str, str]] = {"time_budget": "kbest_time_budget_s"}

    def __init__(
        self,
        index: InvertedIndex,
        *,
        nbest: int = 5,
        levenshtein: bool = True,
        lambda1: float = 1.0,
        lambda2: float = 1.0,
        max_candidates: int = 1000,
        levenshtein_unit: LevenshteinUnit = "char",
        time_budget: float = UNIQUE_KBEST_TIME_BUDGET_S,
        **params: Any,
    ) -> None:
        """``levenshtein_unit``: E over characters (``"char"``, the default: the best on the
        dev sentences of both pairs, see the module's docstring) or over words (``"word"``,
        the TR paper's). ``time_budget``: seconds per sentence that the N-best list may spend
        looking for distinct strings (:func:`~service.forest.kbest.unique_kbest`; the service
        passes its setting ``kbest_time_budget_s``). A bound on time, not on the model: no
        part of the signature."""
        if nbest < 1:
            raise InvalidInputError(f"the N-best size must be at least 1, got {nbest}")
        if max_candidates < 1:
            raise InvalidInputError(f"max_candidates must be at least 1, got {max_candidates}")
        if lambda1 < 0 or lambda2 < 0:
            raise InvalidInputError(f"λ1 and λ2 must be >= 0, got {lambda1}, {lambda2}")
        levenshtein_form((), levenshtein_unit)  # refuses an unknown unit
        super().__init__(index, **params)
        self.nbest = nbest
        self.lambda1 = lambda1
        self.lambda2 = lambda2 if levenshtein else 0.0
        self.max_candidates = max_candidates
        self.levenshtein_unit: LevenshteinUnit = levenshtein_unit
        self.time_budget = time_budget

    def signature_parts(self) -> dict[str, Any]:
        return {
            "N": self.nbest,
            "lambda1": self.lambda1,
            "lambda2": self.lambda2,
            "M": self.max_candidates,
            "E": self.levenshtein_unit,
        }

    # --- translations -------------------------------------------------------------------------

    def translations(self, query: DecodedQuery) -> list[tuple[tuple[str, ...], float]]:
        """The N best distinct translations of the query with ``Pr(t|s)``, best first."""
        beam: list[tuple[tuple[str, ...], float]] = [((), 0.0)]
        for forest in query.forests:
            options = [
                (d.tokens, d.score)
                for d in unique_kbest(
                    forest.hypergraph, query.weights, self.nbest, time_budget=self.time_budget
                )
            ]
            merged: dict[tuple[str, ...], float] = {}
            for prefix, s0 in beam:
                for tokens, s1 in options:
                    key = prefix + tokens
                    if key not in merged or s0 + s1 > merged[key]:
                        merged[key] = s0 + s1
            beam = sorted(merged.items(), key=lambda ts: (-ts[1], ts[0]))[: self.nbest]
        probs = posteriors([s for _, s in beam])
        return [(t, p) for (t, _), p in zip(beam, probs, strict=True)]

    # --- retrieval ------------------------------------------------------------------------------

    def candidates(
        self,
        tokens: Sequence[str],
        token_cache: dict[int, Sequence[str]] | None = None,
        keep: Keep | None = None,
    ) -> list[Candidate]:
        """The top-M candidates of one translation by cosine, with ``Pr(d|t)``.

        ``token_cache`` keeps pool sentences' forms for E (:func:`levenshtein_form`) between
        the translations of one query. ``keep(docno, cosine)``: whether a candidate can still
        count (a collection's segment: whether it can enter the top M of the segments searched
        before); one that cannot is left out before its E is computed.
        """
        cache = token_cache if token_cache is not None else {}
        unit = self.levenshtein_unit
        docs, cos = cosine_candidates(self.index, tokens)
        form = levenshtein_form(tokens, unit)
        out: list[Candidate] = []
        for i in top_by_score(docs, cos, self.max_candidates):
            d, c = int(docs[i]), float(cos[i])
            if keep is not None and not keep(d, c):
                continue
            e = 1.0
            if self.lambda2:
                if d not in cache:
                    cache[d] = levenshtein_form(self.index.doc_tokens(d), unit)
                e = _similarity(form, cache[d])
            prob = (c**self.lambda1) * (e**self.lambda2 if self.lambda2 else 1.0)
            out.append(Candidate(d, c, e, prob))
        return out

    def candidate_lists(
        self,
        translations: Sequence[tuple[Sequence[str], float]],
        keep: Sequence[Keep | None] | None = None,
    ) -> list[list[Candidate]]:
        """Each translation's top-M candidates (pool sentences' tokens read once);
        ``keep``: per translation, see :meth:`candidates`."""
        cache: dict[int, Sequence[str]] = {}
        keeps = keep if keep is not None else [None] * len(translations)
        return [
            self.candidates(tokens, cache, k)
            for (tokens, _), k in zip(translations, keeps, strict=True)
        ]

    def score_translations(self, translations: Sequence[tuple[Sequence[str], float]]) -> TRResult:
        """Algorithm 1 over ``(t, Pr(t|s))`` pairs; Algorithm 2 when there is one."""
        return combine_candidates(translations, self.candidate_lists(translations))

    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        translations = self.translations(query)
        result = self.score_translations(translations)
        ranked = sorted(result.scores.items(), key=lambda ds: (-ds[1], ds[0]))[:k]
        hits = [
            Hit(
                d,
                self.index.doc_id(d),
                s,
                TrExplanation(tuple(result.found_by[d])) if explain else None,
            )
            for d, s in ranked
        ]
        info = {
            "translations": [{"text": " ".join(t), "pr_t": p} for t, p in translations],
            "candidates": len(result.scores),
        }
        return hits, info

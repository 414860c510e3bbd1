"""The scorer family: one base class, small result records, a registry by name.

Every retrieval method is a :class:`Scorer` with ``rank(query, k)``. A query arrives already
decoded (:class:`DecodedQuery`: one +LM translation forest per sentence, built once by
:func:`service.retrieval.query.decode_query` and cacheable), so methods that read the same
forest — direct translation (DT), probabilistic structured queries (PSQ), bag-of-words forced
decoding (BOW-FD), translation retrieval (TR) — never decode twice. ``signature()`` lists every
parameter that changes the numbers (as sacrebleu's signatures do) and is returned with every
result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError, InvalidInputError
from service.forest.inference import fast_viterbi
from service.index.inverted import InvertedIndex
from service.mt.decoder import Forest
from service.retrieval.explain import Explanation

if TYPE_CHECKING:
    from service.mt.bundle import ModelBundle
    from service.retrieval.feedback import Expansion, FeedbackParams


@dataclass(frozen=True)
class DecodedQuery:
    """A source query split into sentences, each with its +LM forest.

    ``weights`` is the SMT weight vector the forests were pruned with and that the scorers use
    as ``w_smt``; ``weights_version`` names it.
    """

    qid: str
    text: str
    lang: str
    sentences: tuple[tuple[str, ...], ...]
    forests: tuple[Forest, ...]
    weights: Mapping[str, float]
    weights_version: str
    degraded: str | None = None  # why the decode was cut short (time budget), if it was

    def target_words(self) -> set[str]:
        """Every English word the query's forests can produce."""
        return {w for f in self.forests for w in f.hypergraph.arrays().vocabulary}


def one_best(query: DecodedQuery) -> list[tuple[str, ...]]:
    """The Viterbi translation of each sentence of ``query`` (DT's query, the translation a
    search answers with, feedback's starting point)."""
    return [fast_viterbi(f.hypergraph, query.weights).tokens for f in query.forests]


Relation = Literal["eq", "gte"]  # a count that is exact, or a lower bound


@dataclass(frozen=True)
class Hit:
    """One ranked document (``docno`` indexes the index; ``doc_id`` is the external id)."""

    docno: int
    doc_id: str
    score: float
    explanation: Explanation | None = None  # with rank(..., explain=True)


@dataclass(frozen=True)
class Ranking:
    """A ranked list for one query, with the scorer's signature and diagnostics."""

    qid: str
    hits: list[Hit]
    signature: str
    info: dict[str, Any] = field(default_factory=dict)


class Scorer(ABC):
    """A retrieval method over one index. Subclasses set ``name`` and implement ``_rank``."""

    name: ClassVar[str]
    ranks_documents: ClassVar[bool] = True  # False: it ranks a sentence pool (TR), not documents
    # constructor parameters that a service configures, with the setting each comes from
    # (:func:`configured_params`; the web layer names no method): PSQ {"nbest": "nbest_psq"}
    configured: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self, index: InvertedIndex, *, bundle: ModelBundle | None = None, **params: Any
    ) -> None:
        """Every scorer is built this way (:func:`get_scorer`): the index, the model bundle
        (methods take from it what they need: PSQ its grammar and lexical table, BOW-FD its
        grammar for LEX features; DT and TR read only the query's forests) and the method's
        parameters, which make its signature."""
        self.index = index
        self.bundle = bundle
        self.params = dict(params)

    def rank(
        self,
        query: DecodedQuery,
        k: int,
        *,
        explain: bool = False,
        feedback: FeedbackParams | None = None,
    ) -> Ranking:
        """The ``k`` best documents for ``query``, best first (ties by document number).

        With ``feedback``, the method's own top ``feedback.docs`` documents expand the 1-best
        translation by RM3 and the expanded query ranks the index by BM25
        (:mod:`service.retrieval.feedback`); ``info["expansion"]`` holds it. A method that
        retrieves nothing has no feedback documents: its (empty) ranking stands, unexpanded."""
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        if not query.forests:
            raise InvalidInputError("the query has no sentence to search with")
        if feedback is not None and self.ranks_documents:
            return self._rank_with_feedback(query, k, explain, feedback)
        hits, info = self._rank(query, k, explain)
        return Ranking(query.qid, hits, self.signature(query), info)

    def _rank_with_feedback(
        self, query: DecodedQuery, k: int, explain: bool, feedback: FeedbackParams
    ) -> Ranking:
        from service.retrieval.feedback import IndexFeedback, feedback_stage

        feedback = feedback.for_method(self.reranks)
        depth = feedback.first_depth(k)
        first, info, explainer, kept = self._first_ranking(query, depth, explain)
        if not first:  # no feedback document: no relevance model, the ranking stands
            return Ranking(query.qid, first, self.signature(query), info)
        retrieved = self._retrieved(Ranking(query.qid, first, "", info), depth, query)

        def again(
            expansion: Expansion, params: FeedbackParams, own: Sequence[tuple[int, float]]
        ) -> tuple[list[tuple[int, float]], Callable[[int], Explanation | None] | None]:
            """The method again, over its own documents, with the relevance model."""
            restrict = np.unique(np.asarray([d for d, _ in own], dtype=np.int32))
            hits, explains = self._rerank(query, kept, expansion, params, restrict, depth, explain)
            return [(h.docno, h.score) for h in hits], explains

        stage = feedback_stage(
            IndexFeedback(self.index), [t for sentence in one_best(query) for t in sentence],
            query.target_words(), [(h.docno, h.score) for h in first], k, feedback,
            own_retrieved=retrieved, own_candidates=info.get("candidates"), explain=explain,
            own_explanation=explainer, rerank=again if feedback.reranks else None,
        )  # fmt: skip
        hits = [Hit(d, self.index.doc_id(d), s, e) for d, s, e in stage.hits]
        rest = {key: v for key, v in info.items() if key not in ("candidates", "reached")}
        signature = f"{self.signature(query)}|fb:{feedback.signature()}"
        return Ranking(query.qid, hits, signature, {**rest, **stage.info})

    #: Whether the method can rank again with a relevance model's term weights (the rerank
    #: feedback forms, :mod:`service.retrieval.feedback`); one that cannot keeps its ranking.
    reranks: ClassVar[bool] = False

    def _first_ranking(
        self, query: DecodedQuery, k: int, explain: bool
    ) -> tuple[list[Hit], dict[str, Any], Callable[[int], Explanation | None] | None, Any]:
        """The method's own ranking for the feedback stage: its hits, diagnostics, the
        explainer of any hit when ``explain`` (only the page's hits are explained, not the
        whole first ranking), and what :meth:`_rerank` may reuse (by default nothing)."""
        if explain:
            hits, info, explainer = self._rank_explainable(query, k)
            return hits, info, explainer, None
        hits, info = self._rank(query, k, False)
        return hits, info, None, None

    def _rerank(
        self,
        query: DecodedQuery,
        kept: Any,
        expansion: Expansion,
        params: FeedbackParams,
        restrict: npt.NDArray[np.int32],
        k: int,
        explain: bool,
    ) -> tuple[list[Hit], Callable[[int], Explanation | None] | None]:
        """The top ``k`` of the documents ``restrict`` (sorted) ranked again with the relevance
        model of ``expansion`` as extra term weight, and (``explain``) their explainer;
        ``kept``: what :meth:`_first_ranking` kept. Only for methods whose :attr:`reranks` is
        true."""
        raise ConfigurationError(f"{self.name} cannot rank again with feedback")

    @abstractmethod
    def _rank(self, query: DecodedQuery, k: int, explain: bool) -> tuple[list[Hit], dict[str, Any]]:
        """Hits best first, and diagnostics (candidate counts, timings)."""

    def _rank_explainable(
        self, query: DecodedQuery, k: int
    ) -> tuple[list[Hit], dict[str, Any], Callable[[int], Explanation | None]]:
        """:meth:`_rank` without explanations, and a function that explains any of its hits
        on demand (a stage that keeps a few of many hits explains only those). By default the
        hits are explained as they are ranked; a method whose explanations cost (BOW-FD's
        best derivation per document) overrides this."""
        hits, info = self._rank(query, k, True)
        explained = {h.docno: h.explanation for h in hits}
        bare = [replace(h, explanation=None) for h in hits]
        return bare, info, explained.get

    # --- what a ranking says, read by the method that made it (the web layer never sniffs
    # method names; a hit's explanation reads itself, service.retrieval.explain)

    def query_terms(self, query: DecodedQuery, ranking: Ranking) -> set[str]:
        """The English terms this method searched ``query`` with, for its ``ranking``: the
        expanded query's with feedback, else the method's own (:meth:`_query_terms`)."""
        expansion = ranking.info.get("expansion")
        if expansion is not None:
            return {t["term"] for t in expansion["terms"]}
        return self._query_terms(query, ranking)

    def _query_terms(self, query: DecodedQuery, ranking: Ranking) -> set[str]:
        """By default every target word of the query's forests (BOW-FD, PSQ)."""
        return query.target_words()

    def retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """How many documents the method retrieved for ``query`` (what it would rank with no
        limit), given its ``ranking`` cut at ``depth``, and whether that count is exact
        (``"eq"``) or a lower bound (``"gte"``, as Elasticsearch's ``hits.total.relation``).
        With feedback: the documents holding an expansion term, counted by its ranking."""
        if "expansion" in ranking.info:
            relation: Relation = "gte" if ranking.info.get("reached_relation") == "gte" else "eq"
            return int(ranking.info["reached"]), relation
        return self._retrieved(ranking, depth, query)

    def _retrieved(self, ranking: Ranking, depth: int, query: DecodedQuery) -> tuple[int, Relation]:
        """:meth:`retrieved` of the method's own ranking: a ranking shorter than ``depth``
        holds them all; by default a full one is a lower bound (methods that score every
        candidate override this)."""
        n = len(ranking.hits)
        return (n, "eq") if n < depth else (n, "gte")

    def signature_parts(self) -> dict[str, Any]:
        """Parameters of this method that change its numbers (subclasses extend)."""
        return dict(self.params)

    def signature(self, query: DecodedQuery | None = None) -> str:
        parts: dict[str, Any] = {"method": self.name}
        parts.update(self.signature_parts())
        idx = self.index.signature()
        parts.update({k: idx.get(k) for k in ("k1", "b", "rsj", "analysis")})
        parts["title"] = idx.get("title_weight", 1)  # how many times a title counts
        if query is not None:
            parts["weights"] = query.weights_version
            parts["lm"] = "yes" if all(f.use_lm for f in query.forests) else "no"
        return "|".join(f"{k}:{v}" for k, v in parts.items())


ScorerFactory = Callable[..., Scorer]
# the one registry of retrieval methods: each one's scorer class, which declares how the method
# runs over a collection's segments (``segments``: :func:`service.retrieval.partials.get_method`)
SCORERS: dict[str, ScorerFactory] = {}


def register(name: str) -> Callable[[type[Scorer]], type[Scorer]]:
    """Class decorator adding a scorer to :data:`SCORERS` under ``name``."""

    def deco(cls: type[Scorer]) -> type[Scorer]:
        cls.name = name
        SCORERS[name] = cls
        return cls

    return deco


def scorer_class(name: str) -> ScorerFactory:
    """The scorer registered as ``name``; an unknown name lists the valid ones."""
    _load_builtin_scorers()
    factory = SCORERS.get(name)
    if factory is None:
        valid = ", ".join(sorted(SCORERS))
        raise ConfigurationError(f"unknown retrieval method {name!r}; choose one of: {valid}")
    return factory


def get_scorer(name: str, index: InvertedIndex, **params: Any) -> Scorer:
    """Instantiate the scorer ``name``; an unknown name lists the valid ones."""
    return scorer_class(name)(index, **params)


def configured_params(name: str, setting: Callable[[str], Any]) -> dict[str, Any]:
    """The parameters of the scorer ``name`` that a configuration sets: for each one its
    class names (:attr:`Scorer.configured`), the value ``setting`` gives that setting's name,
    unless it is None (then the method's own default stays)."""
    named: Mapping[str, str] = getattr(scorer_class(name), "configured", {})
    values = {param: setting(key) for param, key in named.items()}
    return {param: value for param, value in values.items() if value is not None}


def document_methods() -> tuple[str, ...]:
    """The names of the registered scorers that rank documents, sorted: the ``method`` of
    search, evaluation and runs (CLI and API)."""
    _load_builtin_scorers()
    return tuple(
        sorted(name for name, cls in SCORERS.items() if getattr(cls, "ranks_documents", True))
    )


def _load_builtin_scorers() -> None:
    """Import the built-in scorer modules lazily (they register themselves)."""
    import importlib

    for module in ("dt", "psq", "bowfd", "tr"):
        try:
            importlib.import_module(f"service.retrieval.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"service.retrieval.{module}":
                raise

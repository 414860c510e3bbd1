"""One search path under every caller: decode → first ranking → feedback → dense reading and
fusion → page.

The API's ``POST /v1/search``, ``clir search``, ``clir run`` and ``clir eval``, the service's
warm-up and the benchmarks all rank through :meth:`SearchPipeline.search`, so a rule (what an
empty result says, how the total is counted, when the dense reader joins) exists once.

* **The first ranking** runs where the store is searched — a :class:`FirstStage`, chosen
  once when the pipeline is built: the store's segments (an index built whole is one)
  searched in this process or on Ray shard workers, merged. A method's ranking is Hieber &
  Riezler 2015, §3 (BOW-FD), §5 (DT, PSQ).
* **Feedback** is the next stage, whatever the store (a cascade of rankers, as Anserini's
  reranker cascade runs RM3 after the first ranking): RM3 (Lavrenko & Croft 2001, §3)
  expands the query from the merged first ranking's top documents and ranks again, in this
  process, over the commit the first ranking read (:meth:`FirstStage.feedback`).
* **The dense reader** (:mod:`service.dense`) embeds the query's 1-best English translation —
  the one the page shows — as an E5 query (on its own thread, while the first ranking runs:
  the two need only the decoded query) and takes the exact top documents by their best
  passage (MaxP, Dai & Callan 2019, §3.2; a page's opening preferred: each later passage
  scores its cosine less ``dense.later``, which lifts questions most); the two rankings are fused
  (:mod:`service.retrieval.fusion`; by default CombSUM of min-max normalised scores, Fox &
  Shaw 1994, chosen on the dev sets over reciprocal rank fusion, Cormack et al. 2009).
  The head of both rankings (each reader's top ``dense.depth``) is fused and the lexical
  ranking goes on below it, so a page's results do not depend on how many results it asks
  for, and an evaluation at depth 1000 ranks the first page as the API does. A store without
  vectors, or a request that says ``dense: false``, is ranked lexically alone, and the
  outcome says why.
* **The page**: the hits ``[offset, offset + k)``, the count of documents retrieved, the
  English terms to mark in snippets, and — when there is nothing to show — why (a query
  that translates to common words only has nothing to search for).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from service.dense.encoders import Encoder, encoder_for
from service.dense.sketch import SketchParams
from service.dense.source import DenseSource
from service.errors import InvalidInputError
from service.index.analysis import LONG_STOPWORDS, is_word
from service.records import Doc
from service.retrieval.base import DecodedQuery, Hit, Ranking, Relation, Scorer, one_best
from service.retrieval.choices import Alternative, Choices, alternatives, apply_choices
from service.retrieval.feedback import FeedbackParams
from service.retrieval.fusion import Fusion, RankedList, get_fusion

if TYPE_CHECKING:
    from service.collection import Collection, Snapshot
    from service.collection.distributed import RaySearcher
    from service.collection.searcher import SnapshotSearcher

READERS = ("lexical", "dense")
VECTOR_CACHE = 256  # query vectors kept per pipeline


@dataclass(frozen=True)
class DenseParams:
    """How the dense reader joins a search: both lists read ``depth`` deep (at least the
    page's depth) and fused by ``fusion`` (``rrf`` with constant ``k``, or ``mix``), the dense
    list weighing ``weight`` against the lexical list's 1; a document read by its best
    passage, each passage after its first less ``later`` (cosine units)."""

    depth: int = 100
    fusion: str = "mix"
    k: float = 60.0
    weight: float = 1.0
    sketch: SketchParams = field(default_factory=SketchParams)
    later: float = 0.005

    def fuser(self) -> Fusion:
        if self.fusion == "rrf":
            return get_fusion("rrf", weights=(1.0, self.weight), k=self.k)
        return get_fusion(self.fusion, weights=(1.0, self.weight))

    def signature(self) -> str:
        return (
            f"dense:{self.fuser().signature()}@{self.depth}|later:{self.later:g}"
            f"|{self.sketch.signature()}"
        )


@dataclass(frozen=True)
class SearchOptions:
    """What one search asks for (the request, in library terms)."""

    method: str
    k: int = 10
    offset: int = 0
    explain: bool = False
    feedback: FeedbackParams | None = None
    dense: DenseParams | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    choices: Choices = field(default_factory=Choices)  # the searcher's pins and blocks

    @property
    def depth(self) -> int:
        return self.offset + self.k


@dataclass(frozen=True)
class FirstRanking:
    """A store's ranking of a query by a method (feedback applied when asked)."""

    ranking: Ranking
    total: int
    relation: Relation
    scorer: Scorer | None  # says which English terms the method searched with
    failed: tuple[str, ...] = ()  # shards that did not answer
    # what the ranking prepared in this process that the feedback stage reuses (BOW-FD's
    # forests; empty when shard workers ranked)
    prepared: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchOutcome:
    """A search's answer: the page's hits (explanations included when asked), the ranking to
    the page's depth (what runs and evaluation read), the count, the terms to mark and why
    nothing was found."""

    ranking: Ranking
    hits: list[Hit]
    total: int
    relation: Relation
    total_max: int | None
    translation: list[tuple[str, ...]]
    terms: set[str]
    empty_reason: str | None
    failed: tuple[str, ...]
    readers: dict[int, dict[str, int]]  # per docno: its rank (from 1) in each reader's list
    dense: str  # "on", or why the dense reader did not read ("off", "no vectors", ...)
    weighted: Callable[[Iterable[str]], set[str]]
    doc: Callable[[int], Doc]  # a hit's document, from the commit the search ranked
    seconds: dict[str, float] = field(default_factory=dict)
    offer: Callable[[], list[Alternative]] = field(default=list)  # :attr:`alternatives`
    cue: Callable[[str], str | None] = field(default=lambda _english: None)  # FirstStage.cue

    @cached_property
    def alternatives(self) -> list[Alternative]:
        """The source words the forest translates in several ways (before the choices),
        computed when first asked for (a run or an evaluation never does)."""
        return self.offer()


CUE_DEPTH = 8  # a segment's best documents read for a live one


class FirstStage(ABC):
    """Where a store is ranked lexically (one per pipeline, chosen at construction)."""

    @abstractmethod
    def rank(self, query: DecodedQuery, opts: SearchOptions, depth: int) -> FirstRanking:
        """The method's own ranking to ``depth`` (when ``opts.feedback`` asks for the stage
        after it, explained only where that stage reads the explanations)."""

    @abstractmethod
    def feedback(
        self, query: DecodedQuery, opts: SearchOptions, first: FirstRanking, depth: int
    ) -> FirstRanking:
        """RM3 after the ``first`` ranking (``opts.feedback``): the ranking to ``depth`` of
        the expanded query, mixed with or ranking again the first one's documents."""

    @abstractmethod
    def weighted(self, terms: Iterable[str]) -> set[str]:
        """The ``terms`` that are index terms with a positive weight."""

    @abstractmethod
    def doc(self, docno: int) -> Doc:
        """The document a hit's ``docno`` names."""

    @property
    @abstractmethod
    def n_docs(self) -> int: ...

    @abstractmethod
    def dense(self) -> tuple[DenseSource | None, str]:
        """The store's dense vectors, or None and why there are none."""

    @abstractmethod
    def cue(self, english: str) -> str | None:
        """The title of the document the English words weigh most in (BM25): where a
        searcher sees a translation option used (Oard, He & Wang 2008, §3, "cues"); None
        when no document holds them."""

    def pin(self) -> FirstStage:
        """This stage held to the store as it is now, for one search: every step of the
        search (ranking, dense reading, documents, counts) reads the same commit while
        writers commit beside it. An index never changes: itself."""
        return self


class CollectionStage(FirstStage):
    """A collection: ranked by its segments in this process, or by Ray shard workers
    (``ray``), then the collection's feedback stage in this process."""

    def __init__(
        self,
        collection: Collection,
        searcher: SnapshotSearcher,
        ray: Callable[[], RaySearcher] | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """``ray``: the Ray fan-out for the collection as it is, asked at each ranking (a
        rebuild to another shard count gets workers for its shards); ``snapshot``: the commit
        this stage is pinned to (:meth:`pin`); None: the collection's current one, refreshed
        before each ranking."""
        self.collection = collection
        self.searcher = searcher
        self.ray = ray
        self.snapshot = snapshot

    def pin(self) -> CollectionStage:
        self.collection.refresh()  # a commit is visible to the next search
        return CollectionStage(self.collection, self.searcher, self.ray, self.collection.snapshot)

    def _snap(self) -> Snapshot:
        return self.snapshot if self.snapshot is not None else self.collection.snapshot

    def rank(self, query: DecodedQuery, opts: SearchOptions, depth: int) -> FirstRanking:
        if self.snapshot is None:
            self.collection.refresh()  # a commit is visible to the next search
        snap = self._snap()
        searcher, method, params = self.searcher, opts.method, opts.params
        # the rerank forms explain their own ranking: the first one's would go unread
        explain = opts.explain and searcher.explains_first(snap, method, opts.feedback, params)
        failed: list[str] = []
        prepared: dict[str, Any] = {}
        if self.ray is not None:
            ranking, (total, relation), failed = self.ray().rank(
                snap, method, query, depth, explain=explain, params=params
            )
        else:
            ranking, (total, relation) = searcher.rank(
                snap, method, query, depth, explain=explain, params=params, prepared=prepared
            )
        scorer = searcher.any_scorer(snap, method, params)
        return FirstRanking(ranking, total, relation, scorer, tuple(failed), prepared)

    def feedback(
        self, query: DecodedQuery, opts: SearchOptions, first: FirstRanking, depth: int
    ) -> FirstRanking:
        assert opts.feedback is not None
        # the expansion and its ranking read this commit's segments, in this process
        ranking, (total, relation) = self.searcher.feedback(
            self._snap(), opts.method, query, first.ranking, (first.total, first.relation),
            depth, opts.feedback, explain=opts.explain, params=opts.params,
            prepared=first.prepared,
        )  # fmt: skip
        return replace(first, ranking=ranking, total=total, relation=relation)

    def weighted(self, terms: Iterable[str]) -> set[str]:
        snap = self._snap()
        return {t for t in terms if snap.weighted(t)}

    def doc(self, docno: int) -> Doc:
        view, number = self._snap().locate_seq(docno)
        return view.index.doc(number)

    def cue(self, english: str) -> str | None:
        """Each segment's best live document by its own statistics, the best of them (a cue
        needs no global weights)."""
        best: tuple[float, str] | None = None
        for view in self._snap().views():
            hits = view.index.bm25_topk(view.index.tokenize(english), CUE_DEPTH)
            gone = set() if view.deleted is None else set(view.deleted.tolist())
            for doc, score in zip(hits.docs.tolist(), hits.scores.tolist(), strict=True):
                if doc not in gone:
                    if best is None or score > best[0]:
                        best = (score, view.index.doc(doc).title)
                    break
        return None if best is None else best[1]

    @property
    def n_docs(self) -> int:
        return int(self._snap().n_docs)

    def dense(self) -> tuple[DenseSource | None, str]:
        from service.collection.dense import collection_dense

        return collection_dense(self.collection, self.snapshot)


def _says_something(token: str) -> bool:
    """A translated word that can say what a searcher looks for: not punctuation and not a
    common English word (:data:`~service.index.analysis.LONG_STOPWORDS`)."""
    return is_word(token) and token.lower() not in LONG_STOPWORDS


def dense_query_text(translation: list[tuple[str, ...]]) -> str:
    """The text the dense reader embeds: the 1-best English translation, its sentences
    joined."""
    return " ".join(" ".join(s) for s in translation)


@cache
def _embedder() -> ThreadPoolExecutor:
    """The thread that embeds queries while their first ranking runs (the encoder computes
    outside the GIL, one text at a time: one thread is all it can use)."""
    return ThreadPoolExecutor(1, thread_name_prefix="clir-embed")


class SearchPipeline:
    """Ranks decoded queries over one store (see the module docstring)."""

    def __init__(self, stage: FirstStage, *, encoder: Encoder | None = None) -> None:
        """``encoder``: the dense reader's (default: the one that made the store's vectors,
        loaded on first use)."""
        self.stage = stage
        self._encoder = encoder
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def encoder(self, source: DenseSource) -> Encoder:
        if self._encoder is None or self._encoder.signature() != source.encoder_signature:
            self._encoder = encoder_for(source.encoder_signature)
        return self._encoder

    def query_vector(self, source: DenseSource, text: str) -> np.ndarray:
        """The E5 query vector of ``text`` by ``source``'s encoder; the last
        :data:`VECTOR_CACHE` are kept (a page turned, a method switched: the same translation)."""
        key = (source.encoder_signature, text)
        with self._lock:
            found: np.ndarray | None = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                return found
        vector: np.ndarray = self.encoder(source).encode_queries([text])[0]
        with self._lock:
            self._vectors[key] = vector
            while len(self._vectors) > VECTOR_CACHE:
                self._vectors.popitem(last=False)
        return vector

    def dense_status(self) -> dict[str, Any]:
        source, why = self.stage.dense()
        if source is None:
            return {"available": False, "reason": why}
        return {"available": True, **source.status()}

    def search(self, query: DecodedQuery, opts: SearchOptions) -> SearchOutcome:
        """Rank ``query`` (see the module docstring)."""
        if opts.k < 1 or opts.offset < 0:
            raise InvalidInputError(
                f"k must be at least 1 and offset at least 0: {opts.k}, {opts.offset}"
            )
        t0 = time.perf_counter()
        source = query
        query = apply_choices(query, opts.choices)  # before any method reads the forests
        t_first = time.perf_counter()  # the first ranking (and the dense reader's start)
        seconds = {"choices": t_first - t0}
        translation = one_best(query)
        stage = self.stage.pin()  # one commit from the first ranking to the page
        dense_source, dense_state = (None, "off") if opts.dense is None else stage.dense()
        depth = (
            opts.depth
            if dense_source is None or opts.dense is None
            else max(opts.depth, opts.dense.depth)
        )
        embedding = None
        if dense_source is not None:  # the encoder reads while the first ranking runs
            text = dense_query_text(translation)
            embedding = _embedder().submit(self.query_vector, dense_source, text)
        fb = opts.feedback
        try:
            first = stage.rank(query, opts, depth if fb is None else fb.first_depth(depth))
            t_fb = time.perf_counter()
            seconds["first"] = t_fb - t_first
            if fb is not None:  # RM3: one stage after the first ranking, whatever the store
                first = stage.feedback(query, opts, first, depth)
                seconds["feedback"] = time.perf_counter() - t_fb
        except BaseException:
            if embedding is not None:
                embedding.cancel()
            raise
        t1 = time.perf_counter()
        ranking, total, relation = first.ranking, first.total, first.relation
        readers: dict[int, dict[str, int]] = {}
        if embedding is not None and dense_source is not None and opts.dense is not None:
            vector = embedding.result()  # "embed": what the wait adds after the first ranking
            t2 = time.perf_counter()
            dense_hits = dense_source.top(
                vector, opts.dense.depth, opts.dense.sketch, opts.dense.later
            )
            t3 = time.perf_counter()
            ranking, total, relation, readers = fuse_rankings(
                ranking, dense_hits, opts.dense, depth, total, relation, dense_source.signature()
            )
            seconds.update(embed=t2 - t1, dense=t3 - t2, fuse=time.perf_counter() - t3)
        scorer = first.scorer
        terms = stage.weighted(scorer.query_terms(query, first.ranking)) if scorer else set()
        hits = ranking.hits[: opts.depth]
        reason, nothing_asked = _empty_reason(translation, bool(hits), stage.weighted)
        if nothing_asked:  # whatever matched, it was not the query
            hits, total, relation = [], 0, "eq"
        ranking = replace(ranking, hits=hits)
        if opts.choices:
            ranking = replace(ranking, signature=f"{ranking.signature}|{opts.choices.signature()}")
        return SearchOutcome(
            ranking=ranking,
            hits=hits[opts.offset : opts.depth],
            total=total,
            relation=relation,
            total_max=_total_max(first.ranking.info, total, relation, stage.n_docs, len(readers)),
            translation=translation,
            terms=terms,
            empty_reason=reason if not hits[opts.offset : opts.depth] else None,
            failed=first.failed,
            readers=readers,
            dense="on" if dense_source is not None and opts.dense is not None else dense_state,
            weighted=stage.weighted,
            doc=stage.doc,
            seconds=seconds,
            offer=lambda: alternatives(source),
            cue=stage.cue,
        )


def _empty_reason(
    translation: Sequence[Sequence[str]],
    any_hits: bool,
    weighted: Callable[[Iterable[str]], set[str]],
) -> tuple[str | None, bool]:
    """Why a search finds nothing, and whether it asked for nothing: a query that translates
    to common words or punctuation only ("wie" → "as", "?" → "?") has nothing to search for,
    whatever matched; otherwise, with no hits, the translation's words no document holds."""
    words = [w for sentence in translation for w in sentence]
    content = [w for w in words if _says_something(w)]
    if not content:
        what = "common words" if any(is_word(w) for w in words) else "punctuation"
        return (
            f"nothing to search for: the query translates to {what} only "
            f"({' '.join(words)!r}); add a word that says what you are looking for"
        ), True
    if any_hits:
        return None, False
    found = weighted(content)
    missing = [w for w in dict.fromkeys(content) if w not in found]
    reason = "no document matched the query"
    if missing:
        reason += f": no document holds {', '.join(missing)} (the query's translation: "
        reason += f"{' '.join(words)!r})"
    return reason, False


def fuse_rankings(
    lexical: Ranking,
    dense: list[tuple[int, str, float]],
    params: DenseParams,
    depth: int,
    total: int,
    relation: Relation,
    vectors: str = "",
) -> tuple[Ranking, int, Relation, dict[int, dict[str, int]]]:
    """The head of both rankings fused, then the rest of the lexical ranking, to ``depth``.

    The head is each reader's top ``params.depth`` documents, fused: what a page shows does
    not depend on how deep the caller asked (the API's page of 10 and an evaluation at depth
    1000 rank the head alike; the normalisation of ``mix`` reads the head only). Below it the
    lexical ranking goes on, its documents not in the head in their order, each scored below
    the head's last by its rank (``head_min − rank_in_tail``). Also: the count of the union
    (exact when the lexical list held every document it retrieved, else a lower bound) and
    each head document's rank in each list."""
    head = params.depth
    lex = RankedList(
        np.asarray([h.docno for h in lexical.hits[:head]], dtype=np.int64),
        np.asarray([h.score for h in lexical.hits[:head]], dtype=np.float64),
    )
    den = RankedList(
        np.asarray([d for d, _, _ in dense[:head]], dtype=np.int64),
        np.asarray([s for _, _, s in dense[:head]], dtype=np.float64),
    )
    fused = params.fuser().fuse([lex, den], depth)
    by_doc = {h.docno: h for h in lexical.hits}
    ids = {d: i for d, i, _ in dense}
    hits: list[Hit] = []
    readers: dict[int, dict[str, int]] = {}
    for doc, score, ranks in zip(
        fused.docs.tolist(), fused.scores.tolist(), fused.ranks.tolist(), strict=True
    ):
        own = by_doc.get(doc)
        doc_id = own.doc_id if own is not None else ids[doc]
        hits.append(Hit(doc, doc_id, float(score), own.explanation if own is not None else None))
        readers[doc] = {name: r for name, r in zip(READERS, ranks, strict=True) if r}
    floor = min((h.score for h in hits), default=0.0)
    tail = ((r, h) for r, h in enumerate(lexical.hits, 1) if h.docno not in readers)
    for rank, (own_rank, h) in enumerate(tail, 1):
        if len(hits) >= depth:
            break
        hits.append(Hit(h.docno, h.doc_id, floor - rank, h.explanation))
        readers[h.docno] = {"lexical": own_rank}
    lexical_ids = set(by_doc)
    union = len(lexical_ids | set(ids))
    complete = relation == "eq" and len(lexical.hits) >= total
    new_total = union if complete else max(total, union)
    new_relation: Relation = "eq" if complete else "gte"
    signature = f"{lexical.signature}|{params.signature()}" + (f"|{vectors}" if vectors else "")
    info = {**lexical.info, "dense_hits": len(dense)}
    return Ranking(lexical.qid, hits, signature, info), new_total, new_relation, readers


def _total_max(
    info: dict[str, Any], total: int, relation: str, n_docs: int, fused: int = 0
) -> int | None:
    """An upper bound of a lower-bound total: the candidates every sentence had (documents
    sharing a weighted word with its forest; their union is no larger than their sum), plus
    the ``fused`` documents of the dense reader's list, at most the collection."""
    candidates = info.get("candidates")
    if relation != "gte" or not isinstance(candidates, list) or not candidates:
        return None
    return max(total, min(sum(int(c) for c in candidates) + fused, n_docs))


def feedback_from_settings(
    settings: Any, on: bool | None = None, **overrides: Any
) -> FeedbackParams | None:
    """RM3's parameters from the settings (each overridden by a non-None ``overrides`` value),
    or None when feedback is off (``on``, or the setting when ``on`` is None). The one builder
    of the API's and the command line's feedback."""
    if not (settings.feedback if on is None else on):
        return None
    s = {
        k: getattr(settings, f"feedback_{k}")
        for k in ("docs", "terms", "weight", "form", "mix", "pool")
    }
    s.update({k: v for k, v in overrides.items() if v is not None})
    return FeedbackParams(
        s["docs"], s["terms"], s["weight"], form=s["form"], mix=s["mix"], pool=s["pool"]
    )


def dense_from_settings(
    settings: Any, on: bool | None = None, **overrides: Any
) -> DenseParams | None:
    """The dense reader's parameters from the settings, or None when it is off."""
    if not (settings.dense if on is None else on):
        return None
    s = {
        "depth": settings.dense_depth,
        "fusion": settings.dense_fusion,
        "k": settings.dense_rrf_k,
        "weight": settings.dense_weight,
        "later": settings.dense_later_penalty,
    }
    s.update({k: v for k, v in overrides.items() if v is not None})
    sketch = SketchParams(settings.dense_sketch_above, settings.dense_sketch_oversample)
    return DenseParams(
        int(s["depth"]), str(s["fusion"]), float(s["k"]), float(s["weight"]), sketch,
        float(s["later"]),
    )  # fmt: skip

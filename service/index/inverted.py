"""The loaded inverted BM25 index and its scoring API (Hieber & Riezler 2015, §3).

:class:`InvertedIndex` memory-maps an index directory (:mod:`service.index.storage`) and
serves the retrieval methods:

* ``term_ids`` / ``postings`` / ``df`` / ``rsj``: the raw material for PSQ (which computes
  its own rsj from expected df with :func:`service.index.bm25.rsj`) and BOW-FD (which adds
  ``bm25(t, d)`` per derivation term);
* ``bm25_topk``: plain BM25 for a token list — every occurrence of a query token adds its
  weight, as in rank_bm25's ``BM25Okapi.get_scores`` (so a token twice in the query counts
  twice); ``bm25_weighted`` for real-valued term weights;
* ``docs_containing_any``: BOW-FD's candidate pre-filter;
* ``doc``: the stored title and text of a document by number or external id.

Scoring accumulates ``w · bm25(t, ·)`` over the query terms' postings into a dense float32
array of size N and selects the top k with ``argpartition``; ties are broken by ascending
document number (the order of the source file), so results are deterministic. Only
documents reached through a term with a non-zero weight are returned.

An index directory scores with its own statistics (N, average length, df), precomputed into
``post_weight``. A *segment* of a collection (:mod:`service.collection`) is the same directory
opened with :class:`ScoringStats`, the statistics of the whole collection, and the documents
deleted since: N, avdl, df and rsj are then the collection's, a posting's weight is computed
from its stored tf when it is read (as Lucene's BM25 does from norms), and deleted documents
are in no posting. Every method reads weights through :meth:`InvertedIndex.postings` or
:meth:`InvertedIndex.rank`, so a segment ranks its documents exactly as one index over the
whole collection would (the weights are the same float64 expression rounded to float32).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from service.errors import ConfigurationError, DataFormatError, InvalidInputError, NotFoundError
from service.index.analysis import Analyzer, analysis_signature, get_analyzer
from service.index.bm25 import RsjPolicy, length_norm, rsj, tf_bm25
from service.index.kernels import accumulate_topk, gather_postings
from service.index.storage import Manifest, load_arrays, read_manifest
from service.index.tokenizers import (
    TOKENIZERS,
    TokenizeFn,
    get_index_tokenizer,
    tokenizer_signature,
)
from service.index.vocab import Vocabulary
from service.records import Doc, ScoredDoc

Int32Array = npt.NDArray[np.int32]
Float32Array = npt.NDArray[np.float32]

_REQUIRED = (
    "vocab_blob", "vocab_offsets", "df", "post_offsets", "post_docs", "post_tf",
    "doc_len", "doc_source", "id_blob", "id_offsets", "title_blob",
    "title_offsets", "text_blob", "text_offsets",
)  # fmt: skip
_OWN_STATISTICS = ("rsj", "post_weight")  # what an index scoring with its own statistics needs


class ScoringStats(NamedTuple):
    """The statistics a segment scores with: the collection's N and average length, the
    collection's df of each of the segment's terms, and which of its documents are live."""

    n_docs: int
    avdl: float
    df: npt.NDArray[np.integer[Any]]  # by the segment's term id
    live: npt.NDArray[np.bool_] | None = None  # None: no document deleted


class Postings(NamedTuple):
    """One term's postings: document numbers (ascending), term frequencies, bm25 weights."""

    docs: Int32Array
    tfs: npt.NDArray[np.integer[Any]]
    weights: Float32Array


class Hits(NamedTuple):
    """A ranked result: document numbers and scores, best first."""

    docs: Int32Array
    scores: Float32Array


def _analyzer_of(path: Path, build: Mapping[str, Any]) -> Analyzer:
    """The analysis chain recorded in a manifest; a document index built without one, or with
    another version of it, is refused with the command that rebuilds it."""
    kind = str(build.get("kind", "docs"))
    source = (
        "--docs ../shared/data/clir/docs.jsonl.gz"
        if kind == "docs"
        else ("--pool ../shared/data/tr/pool.en.tsv.gz")
    )
    rebuild = f"rebuild it: clir build-index {source} --out {path} --force (or make index)"
    chain, recorded = build.get("analysis"), build.get("analysis_signature")
    if chain is None and recorded is None and kind == "pool":
        # a sentence pool keeps every token, as pools built before analysis chains did
        return get_analyzer("none")
    if chain is None or recorded is None:
        raise DataFormatError(
            path / "manifest.json", None,
            f"the index was built before analysis chains (no 'analysis' in its manifest); "
            f"{rebuild}",
        )  # fmt: skip
    current = analysis_signature(str(chain))
    if recorded != current:
        raise DataFormatError(
            path / "manifest.json", None,
            f"the index was built with analysis chain {recorded}, this version applies "
            f"{current}; {rebuild}",
        )  # fmt: skip
    return get_analyzer(str(chain))


def top_k(scores: Float32Array, candidates: Int32Array, k: int) -> Hits:
    """The ``k`` best of ``candidates`` (ascending document numbers) by ``scores``.

    Ties are broken by ascending document number, also at the cut-off.
    """
    cand_scores = scores[candidates]
    if k < len(candidates):
        kth = np.argpartition(-cand_scores, k - 1)[k - 1]
        threshold = cand_scores[kth]
        above = cand_scores > threshold
        n_above = int(above.sum())
        at = np.flatnonzero(cand_scores == threshold)[: k - n_above]
        keep = np.concatenate([np.flatnonzero(above), at])
        candidates, cand_scores = candidates[keep], cand_scores[keep]
    order = np.lexsort((candidates, -cand_scores))
    return Hits(candidates[order].astype(np.int32), cand_scores[order].astype(np.float32))


def blob_string(arrays: Mapping[str, np.ndarray], name: str, i: int) -> str:
    """String ``i`` of the blob ``arrays[name + "_blob"]`` cut at ``arrays[name +
    "_offsets"]`` (a document's id, a term, a source)."""
    off = arrays[f"{name}_offsets"]
    return bytes(arrays[f"{name}_blob"][int(off[i]) : int(off[i + 1])]).decode("utf-8")


class InvertedIndex:
    """A memory-mapped inverted BM25 index (documents or the sentence pool)."""

    def __init__(
        self,
        path: Path,
        manifest: Manifest,
        arrays: Mapping[str, np.ndarray],
        stats: ScoringStats | None = None,
    ) -> None:
        self.path = path
        self.manifest = manifest
        required = _REQUIRED if stats is not None else _REQUIRED + _OWN_STATISTICS
        missing = [n for n in required if n not in arrays]
        if missing:
            raise DataFormatError(
                path / "manifest.json", None, f"index lacks arrays {missing}; rebuild it"
            )
        # plain ndarray views of the memory maps (numba dispatches faster on them)
        self._a = {name: np.asarray(a) for name, a in arrays.items()}
        arrays = self._a
        try:
            build, counts = manifest["build"], manifest["counts"]
            self.kind: str = str(build["kind"])
            self.k1 = float(build["k1"])
            self.b = float(build["b"])
            self.rsj_policy = RsjPolicy(build["rsj"])
            self.tokenizer_name: str = str(build["tokenizer"])
            self.analyzer = _analyzer_of(path, build)
            self.title_weight = int(build.get("title_weight", 1))  # 1 before title weights
            self.n_docs = int(counts["n_docs"])
            self.avdl = float(counts["avdl"])
            self.sources: list[str] = [str(x) for x in counts["sources"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataFormatError(
                path / "manifest.json", None, f"missing or bad build field ({exc}); rebuild it"
            ) from exc
        self.vocab = Vocabulary(arrays["vocab_blob"], arrays["vocab_offsets"], str(path))
        self.doc_lengths: Int32Array = arrays["doc_len"]
        self._post_offsets: npt.NDArray[np.int64] = arrays["post_offsets"]
        self._post_docs: Int32Array = arrays["post_docs"]
        self._post_tf: npt.NDArray[np.integer[Any]] = arrays["post_tf"]
        # N of the statistics (rsj, idf); ``n_docs`` is the number of documents stored here
        self.collection_docs = self.n_docs
        self.live: npt.NDArray[np.bool_] | None = None
        self._rsj64: npt.NDArray[np.float64] | None = None  # set: weights computed on read
        self._post_weight: Float32Array | None = None
        self._norm64: npt.NDArray[np.float64] | None = None  # with _rsj64
        if stats is None:
            self.df: Int32Array = arrays["df"]
            self.rsj: Float32Array = arrays["rsj"]
            self._post_weight = arrays["post_weight"]
        else:
            self._use_statistics(stats)
        self._check_structure()
        self._tokenize: TokenizeFn | None = None
        self._df_lookup: Callable[[str], int] | None = None

    def _use_statistics(self, stats: ScoringStats) -> None:
        """Score with the collection's statistics (a segment, see the module docstring)."""
        if self.rsj_policy is RsjPolicy.DROP:
            raise ConfigurationError(
                f"{self.path}: a segment cannot use the rsj policy 'drop' (which postings it "
                "drops depends on the whole collection); build the collection with --rsj floor"
            )
        self.collection_docs = int(stats.n_docs)
        self.avdl = float(stats.avdl)
        self.df = np.asarray(stats.df, dtype=np.int32)
        self._rsj64 = rsj(self.df, self.collection_docs, self.rsj_policy)
        self.rsj = self._rsj64.astype(np.float32)
        self._norm64 = np.asarray(
            length_norm(self.doc_lengths, self.avdl, self.k1, self.b), np.float64
        )
        if stats.live is not None:
            if len(stats.live) != self.n_docs:
                raise DataFormatError(
                    self.path, None, f"{len(stats.live)} live flags for {self.n_docs} documents"
                )
            if not bool(np.all(stats.live)):
                self.live = np.asarray(stats.live, dtype=np.bool_)

    @property
    def generation(self) -> int:
        """Which build of its path this index is: one past the store it replaced
        (:func:`service.index.build.replaced_generation`); 0 for the first."""
        return int(self.manifest.get("generation", 0))

    @property
    def arrays(self) -> Mapping[str, np.ndarray]:
        """The index's arrays by name (views of the memory maps)."""
        return self._a

    # --- loading ---------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, verify: bool = False) -> InvertedIndex:
        """Open the index at ``path`` (memory-mapped); ``verify`` also checks SHA-256 sums."""
        path = Path(path)
        manifest = read_manifest(path)
        return cls(path, manifest, load_arrays(path, manifest, verify=verify))

    def _check_structure(self) -> None:
        """Cheap consistency checks, so that a damaged index fails here and not mid-query."""
        n_terms, n = len(self.vocab), self.n_docs

        def fail(name: str, reason: str) -> None:
            raise DataFormatError(self.path / f"{name}.npy", None, f"{reason}; rebuild the index")

        def check_offsets(name: str, count: int, total: int) -> None:
            off = self._a[name]
            if len(off) != count + 1 or off[0] != 0:
                fail(name, f"expected {count + 1} offsets starting at 0")
            if int(off[-1]) != total:
                fail(name, f"last offset {int(off[-1])}, expected {total}")
            if np.any(np.diff(off) < 0):
                fail(name, "offsets decrease")

        check_offsets("vocab_offsets", n_terms, len(self._a["vocab_blob"]))
        check_offsets("post_offsets", n_terms, len(self._post_docs))
        for name in ("id", "title", "text"):
            check_offsets(f"{name}_offsets", n, len(self._a[f"{name}_blob"]))
        if "tokens" in self._a:
            check_offsets("tokens_offsets", n, len(self._a["tokens"]))
        for name, values in (("df", self.df), ("rsj", self.rsj)):
            if len(values) != n_terms:
                fail(name, f"{len(values)} entries for {n_terms} terms")
        for name in ("doc_len", "doc_source"):
            if len(self._a[name]) != n:
                fail(name, f"{len(self._a[name])} entries for {n} documents")
        for name in ("post_tf", "post_weight"):
            if name in self._a and len(self._a[name]) != len(self._post_docs):
                fail(name, f"{len(self._a[name])} entries for {len(self._post_docs)} postings")
        if len(self._post_docs) and (
            int(self._post_docs.min()) < 0 or int(self._post_docs.max()) >= n
        ):
            fail("post_docs", f"document numbers outside [0, {n})")

    # --- vocabulary and postings -------------------------------------------------------------

    @property
    def n_terms(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        """Tokenise query text with the tokenizer this index was built with (tokens, before
        the analysis chain: :meth:`term_id` applies it)."""
        if self._tokenize is None:
            self._tokenize = get_index_tokenizer(self.tokenizer_name)
        return self._tokenize(text)

    def analyze(self, text: str) -> list[str]:
        """The index terms of query text: the tokenizer, then the analysis chain."""
        return self.analyzer.terms(self.tokenize(text))

    def term_ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of the index terms of ``tokens`` that are in the vocabulary, in order, repeats
        kept (each token goes through the analysis chain, as in :meth:`term_id`)."""
        return self.vocab.ids(self.analyzer.terms(tokens))

    def term_id(self, token: str) -> int | None:
        """The id of the index term of an English token — the analysis chain the index was
        built with applied to it —, or ``None`` when the chain drops the token or no document
        has the term. Every method's view of the query goes through here."""
        term = self.analyzer.term(token)
        return None if term is None else self.vocab.id(term)

    def term(self, term_id: int) -> str:
        return self.vocab.term(term_id)

    def weighted_term(self, token: str) -> str | None:
        """The index term of ``token`` if documents here hold it and its rsj is not 0 (what
        BOW-FD weighs a forest's words by), else None."""
        term = self.analyzer.term(token)
        tid = None if term is None else self.vocab.id(term)
        return term if tid is not None and self.rsj[tid] != 0 else None

    def collection_df(self, token: str) -> int:
        """The df of the index term of ``token`` in the whole collection (0 if none): this
        index's df, or for a segment the collection's, which knows terms this segment lacks
        (PSQ's expected df and TR's idf read it)."""
        if self._df_lookup is not None:
            return self._df_lookup(token)
        term_id = self.term_id(token)
        return 0 if term_id is None else int(self.df[term_id])

    def use_collection_df(self, lookup: Callable[[str], int]) -> None:
        """Answer :meth:`collection_df` with ``lookup`` (a segment's collection)."""
        self._df_lookup = lookup

    def postings(self, term_id: int, among: npt.NDArray[np.integer[Any]] | None = None) -> Postings:
        """The postings of ``term_id`` (empty for terms dropped by the rsj policy; without the
        deleted documents of a segment); with ``among`` (ascending document numbers), only
        those documents' postings, found by binary search: a cascade's few documents cost
        their own lookups, not a pass over the term's postings."""
        if not 0 <= term_id < self.n_terms:
            raise InvalidInputError(f"term id {term_id} not in [0, {self.n_terms})")
        start, end = int(self._post_offsets[term_id]), int(self._post_offsets[term_id + 1])
        docs, tfs = self._post_docs[start:end], self._post_tf[start:end]
        sel = None
        if among is not None:
            pos = np.minimum(np.searchsorted(docs, among), max(len(docs) - 1, 0))
            sel = pos[docs[pos] == among] if len(docs) else pos[:0]
            docs, tfs = docs[sel], tfs[sel]
        if self._post_weight is not None:
            weights = self._post_weight[start:end]
            return Postings(docs, tfs, weights if sel is None else weights[sel])
        if self.live is not None:
            keep = self.live[docs]
            docs, tfs = docs[keep], tfs[keep]
        assert self._rsj64 is not None and self._norm64 is not None
        # the expression the builder precomputes (service.index.build), rounded the same way
        weights = (self._rsj64[term_id] * tf_bm25(tfs, self._norm64[docs])).astype(np.float32)
        return Postings(docs, tfs, weights)

    def gather_postings(
        self, term_ids: npt.ArrayLike, among: npt.NDArray[np.integer[Any]] | None = None
    ) -> tuple[npt.NDArray[np.int64], Int32Array, Float32Array]:
        """:meth:`postings` of every id of ``term_ids`` (−1: no postings) at once, as CSR rows
        ``(ptr, docs, weights)``: one compiled pass instead of a call per term (a query's
        terms in each segment of a collection; a cascade's few documents among them)."""
        ids = np.asarray(term_ids, dtype=np.int64).ravel()
        if len(ids) and (int(ids.max()) >= self.n_terms or int(ids.min()) < -1):
            raise InvalidInputError(f"term ids must be in [0, {self.n_terms}) or -1")
        return gather_postings(
            self._post_offsets, self._post_docs, self._post_tf, self._post_weight, self._rsj64,
            self._norm64, self.live, ids, among,
        )  # fmt: skip

    def contains(self, token: str, docno: int) -> bool:
        """Whether document ``docno`` has the index term of ``token`` (:meth:`term_id`): a
        binary search in the term's postings, which are sorted by document."""
        term_id = self.term_id(token)
        if term_id is None:
            return False
        docs = self.postings(term_id).docs
        pos = int(np.searchsorted(docs, docno))
        return pos < len(docs) and int(docs[pos]) == docno

    @cached_property
    def _forward(self) -> tuple[npt.NDArray[np.int64], Int32Array, npt.NDArray[np.integer[Any]]]:
        """The postings transposed, once per process: per document its term ids (ascending)
        and frequencies, as CSR rows ``(ptr, terms, tfs)`` — what feedback reads a document's
        term vector from instead of its raw text (:meth:`doc_vectors`)."""
        counts = np.diff(self._post_offsets)
        term_of = np.repeat(np.arange(self.n_terms, dtype=np.int32), counts)
        order = np.argsort(self._post_docs, kind="stable")  # by document, then term id
        ptr = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(np.bincount(self._post_docs, minlength=self.n_docs), out=ptr[1:])
        return ptr, term_of[order], self._post_tf[order]

    def doc_vectors(
        self, docnos: Sequence[int] | npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], Int32Array, npt.NDArray[np.int64]]:
        """The term vectors of ``docnos`` as CSR rows ``(ptr, term_ids, tfs)``: row ``i`` is
        document ``docnos[i]``'s index terms (ascending ids) and their frequencies, a title's
        counted ``title_weight`` times as indexed."""
        docs = np.asarray(docnos, dtype=np.int64).ravel()
        for d in docs.tolist():
            self._check_docno(int(d))
        ptr, terms, tfs = self._forward
        starts, ends = ptr[docs], ptr[docs + 1]
        out_ptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=out_ptr[1:])
        rows = [np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        at = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        return out_ptr, terms[at].astype(np.int32), tfs[at].astype(np.int64)

    @cached_property
    def length_norms(self) -> npt.NDArray[np.floating[Any]]:
        """k1·((1 − b) + b·dl/avdl) per document, for expected-tf scoring (PSQ)."""
        return length_norm(self.doc_lengths, self.avdl, self.k1, self.b)

    # --- scoring -------------------------------------------------------------------------------

    def _check_k(self, k: int) -> None:
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")

    def accumulate(
        self, term_ids: Sequence[int] | npt.ArrayLike, weights: Sequence[float] | npt.ArrayLike
    ) -> tuple[Float32Array, Int32Array]:
        """Dense scores Σ_t w_t·bm25(t, d) and the sorted documents reached by a term with
        a non-zero weight (w_t ≠ 0 and rsj(t) ≠ 0)."""
        scores = np.zeros(self.n_docs, dtype=np.float32)
        reached = np.zeros(self.n_docs, dtype=np.bool_)
        ids = np.asarray(term_ids, dtype=np.int64).ravel()
        for t, w in zip(ids, np.asarray(weights, dtype=np.float32).ravel(), strict=True):
            if w == 0 or self.rsj[t] == 0:
                continue
            post = self.postings(int(t))
            if not len(post.docs):
                continue
            scores[post.docs] += post.weights if w == 1 else w * post.weights
            reached[post.docs] = True
        return scores, np.flatnonzero(reached).astype(np.int32)

    def bm25_scores(self, query_tokens: Iterable[str]) -> Float32Array:
        """Dense BM25 scores of every document for a token list (rank_bm25 semantics)."""
        ids, counts = self._query_terms(query_tokens)
        return self.accumulate(ids, counts)[0]

    def _query_terms(self, tokens: Iterable[str]) -> tuple[list[int], list[float]]:
        tf = Counter(self.term_ids(tokens))
        ids = sorted(tf)
        return ids, [float(tf[t]) for t in ids]

    def _term_arrays(
        self, term_ids: Sequence[int] | npt.ArrayLike, weights: Sequence[float] | npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], Float32Array]:
        ids = np.asarray(term_ids, dtype=np.int64).ravel()
        ws = np.asarray(weights, dtype=np.float32).ravel()
        if ids.shape != ws.shape:
            raise InvalidInputError(f"{len(ids)} term ids but {len(ws)} weights")
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.n_terms):
            raise InvalidInputError(f"term ids must be in [0, {self.n_terms})")
        return ids, ws

    def rank(
        self,
        term_ids: Sequence[int] | npt.ArrayLike,
        weights: Sequence[float] | npt.ArrayLike,
        k: int,
    ) -> Hits:
        """Top ``k`` documents by Σ_i weights[i]·bm25(term_ids[i], d) (compiled kernel).

        Only documents reached through a term with a non-zero weight (w ≠ 0 and rsj ≠ 0)
        are returned; ties go to the smaller document number. Equal to
        :meth:`rank_reference`.
        """
        return self.rank_counted(term_ids, weights, k)[0]

    def rank_counted(
        self,
        term_ids: Sequence[int] | npt.ArrayLike,
        weights: Sequence[float] | npt.ArrayLike,
        k: int,
    ) -> tuple[Hits, int]:
        """:meth:`rank`, and how many documents the terms reached (those a full ranking
        would hold: :meth:`docs_containing_any` of the terms with a non-zero weight, counted
        in the same pass)."""
        self._check_k(k)
        ids, ws = self._term_arrays(term_ids, weights)
        if self._post_weight is not None:
            offsets, docs, wts, rsj_of, kernel_ids = (
                self._post_offsets, self._post_docs, self._post_weight, self.rsj, ids,
            )  # fmt: skip
        else:  # a segment: the query terms' postings, weighted as they are read
            offsets, docs, wts = self.gather_postings(ids)
            rsj_of, kernel_ids = self.rsj[ids], np.arange(len(ids), dtype=np.int64)
        top_docs, scores, reached = accumulate_topk(
            offsets, docs, wts, rsj_of, kernel_ids, ws, self.n_docs, k
        )  # fmt: skip
        return Hits(top_docs, scores), int(reached)

    def rank_reference(
        self,
        term_ids: Sequence[int] | npt.ArrayLike,
        weights: Sequence[float] | npt.ArrayLike,
        k: int,
    ) -> Hits:
        """:meth:`rank` with plain numpy: the reference the kernel is tested against."""
        self._check_k(k)
        ids, ws = self._term_arrays(term_ids, weights)
        scores, reached = self.accumulate(ids, ws)
        return top_k(scores, reached, k)

    def bm25_topk(self, query_tokens: Iterable[str], k: int) -> Hits:
        """The top ``k`` documents by BM25; each occurrence of a query token adds its weight."""
        return self.bm25_topk_counted(query_tokens, k)[0]

    def bm25_topk_counted(self, query_tokens: Iterable[str], k: int) -> tuple[Hits, int]:
        """:meth:`bm25_topk`, and how many documents hold a weighted query term."""
        ids, counts = self._query_terms(query_tokens)
        return self.rank_counted(ids, counts, k)

    def bm25_weighted(self, term_weights: Mapping[str, float], k: int) -> Hits:
        """The top ``k`` documents by Σ_t w_t·bm25(t, d); unknown terms are ignored."""
        merged: dict[int, float] = {}  # tokens with one index term share its weight
        for t, w in term_weights.items():
            if (i := self.term_id(t)) is not None:
                merged[i] = merged.get(i, 0.0) + float(w)
        ids = sorted(merged)
        return self.rank(ids, [merged[i] for i in ids], k)

    def bm25_weighted_ids(self, term_ids: Sequence[int], weights: Sequence[float], k: int) -> Hits:
        """:meth:`bm25_weighted` for term ids (each id at most once)."""
        if len(set(term_ids)) != len(term_ids):
            raise InvalidInputError("bm25_weighted_ids: a term id occurs more than once")
        return self.rank(term_ids, weights, k)

    def docs_containing_any(
        self, term_ids: Iterable[int], *, nonzero_weight_only: bool = True
    ) -> Int32Array:
        """Sorted document numbers containing at least one of the terms (BOW-FD's
        pre-filter). By default terms whose rsj is 0 (floored) are ignored: they add no
        bonus, so they cannot change a document's score."""
        mask = np.zeros(self.n_docs, dtype=np.bool_)
        for t in set(term_ids):
            if nonzero_weight_only and self.rsj[t] == 0:
                continue
            mask[self.postings(t).docs] = True
        return np.flatnonzero(mask).astype(np.int32)

    # --- documents -------------------------------------------------------------------------------

    def _string(self, name: str, i: int) -> str:
        return blob_string(self._a, name, i)

    @cached_property
    def _docno_of(self) -> dict[str, int]:
        blob = bytes(self._a["id_blob"]).decode("utf-8")
        off = self._a["id_offsets"]
        if blob.isascii():  # byte offsets are character offsets
            starts = off.tolist()
            return {blob[starts[i] : starts[i + 1]]: i for i in range(self.n_docs)}
        return {self._string("id", i): i for i in range(self.n_docs)}

    def doc_id(self, docno: int) -> str:
        """The external id of document number ``docno``."""
        self._check_docno(docno)
        return self._string("id", docno)

    def find(self, doc_id: str) -> int | None:
        """The document number of the external id ``doc_id``, or None."""
        return self._docno_of.get(doc_id)

    def docno(self, doc_id: str) -> int:
        """The document number of the external id ``doc_id``."""
        docno = self.find(doc_id)
        if docno is None:
            raise NotFoundError(f"no document {doc_id!r} in the index {self.path}")
        return docno

    def _check_docno(self, docno: int) -> None:
        if not 0 <= docno < self.n_docs:
            raise NotFoundError(f"no document number {docno} (the index has {self.n_docs})")

    def doc(self, doc: int | str) -> Doc:
        """The stored document (id, title, raw text, source) by number or external id."""
        docno = self.docno(doc) if isinstance(doc, str) else int(doc)
        self._check_docno(docno)
        src = int(self._a["doc_source"][docno])
        return Doc(
            id=self._string("id", docno),
            title=self._string("title", docno),
            text=self._string("text", docno),
            source=self.sources[src] if src < len(self.sources) else "",
        )

    def doc_tokens(self, docno: int) -> list[str]:
        """The indexed token sequence of a document (indexes built with kept tokens)."""
        self._check_docno(docno)
        if "tokens" not in self._a:
            raise InvalidInputError(f"the index {self.path} was built without token sequences")
        off = self._a["tokens_offsets"]
        terms = self.vocab.term_list()
        return [terms[t] for t in self._a["tokens"][off[docno] : off[docno + 1]].tolist()]

    def scored_docs(self, qid: str, hits: Hits) -> list[ScoredDoc]:
        """``hits`` as ScoredDoc records with external ids."""
        return [
            ScoredDoc(qid, self._string("id", int(d)), float(s))
            for d, s in zip(hits.docs, hits.scores, strict=True)
        ]

    def signature(self) -> dict[str, Any]:
        """Every parameter of the index that changes scores (for scorer signatures)."""
        build = self.manifest.get("build", {})
        return {
            "index": self.kind,
            "k1": self.k1,
            "b": self.b,
            "rsj": self.rsj_policy.value,
            "tokenizer": self.tokenizer_name,
            "analysis": self.analyzer.signature,
            "title_weight": self.title_weight,
            "n_docs": self.collection_docs,
            "source_sha256": str(build.get("source_sha256", ""))[:12],
            "limit": build.get("limit"),
        }


def load_index(path: str | Path) -> InvertedIndex:
    """Open an index and refuse one whose tokenizer has changed since it was built."""
    index = InvertedIndex.load(path)
    built = str(index.manifest.get("build", {}).get("tokenizer_signature", ""))
    name = index.tokenizer_name
    if name in TOKENIZERS and built != "custom":
        current = tokenizer_signature(name)
        if built != current:
            raise ConfigurationError(
                f"{path}: the index was built with tokenizer {built!r} but tokenizer {name!r} "
                f"is now {current!r}, so query terms would not match its terms; rebuild it "
                "with clir build-index ... --force"
            )
    return index

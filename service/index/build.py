"""Building the inverted BM25 index (Hieber & Riezler 2015, §3, "Decomposable Retrieval Features").

Documents (title + text) or pool sentences are tokenised, counted, and turned into
term-major CSR postings: for term id ``t`` the slice ``offsets[t]:offsets[t+1]`` of
``post_docs`` (int32 document numbers, ascending), ``post_tf`` (uint16, or int32 when a count
does not fit) and ``post_weight`` (float32 bm25(t, d) = rsj(t)·tf_bm25(t, d), precomputed).
Beside them: ``df``, the applied ``rsj`` per term, document lengths, the sorted vocabulary
(:mod:`service.index.vocab`), external ids, titles, raw texts and sources, so that results,
``GET /v1/documents/{id}`` and snippets work without the original corpus; optionally each
document's token-id sequence (translation retrieval's Levenshtein needs it for the pool).

A document's title counts ``title_weight`` times (BM25F in the simple form of Robertson,
Zaragoza & Taylor 2004, §3: the fields' term frequencies are weighted and summed *before* the
BM25 saturation, and so is the document length): ``tf(t, d) = w·tf_title + tf_text`` and
``|d| = w·|title| + |text|``, exactly as if the title were written ``w`` times. Every method
reads these counts (BOW-FD's per-edge weights, DT's BM25, PSQ's expected counts), so the title
weight needs nothing at query time.

The result is written atomically (:mod:`service.index.storage`). :func:`build_docs_index`
and :func:`build_pool_index` skip the work when the output already holds an index built from
the same source bytes with the same settings, unless ``force``.
"""

from __future__ import annotations

import json
import sys
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from service.core.arraydir import sha256_file
from service.core.csr import ptr_from_counts
from service.data import read_docs, read_pool
from service.errors import (
    ClirError,
    ConflictError,
    DataFormatError,
    InvalidInputError,
    MissingResourceError,
)
from service.index.analysis import Analyzer, analysis_signature, get_analyzer
from service.index.bm25 import K1, B, RsjPolicy, length_norm, rsj, rsj_raw, tf_bm25
from service.index.inverted import InvertedIndex
from service.index.storage import Manifest, read_manifest, write_index_dir
from service.index.tokenizers import (
    TOKENIZERS,
    TokenizeFn,
    get_index_tokenizer,
    tokenize_lines,
    tokenizer_signature,
)
from service.index.vocab import encode_terms
from service.records import Doc

IndexKind = Literal["docs", "pool"]


@dataclass(frozen=True, slots=True)
class BuildParams:
    """Everything that changes the numbers of an index (recorded in its manifest)."""

    kind: IndexKind
    tokenizer: str
    tokenizer_signature: str
    k1: float
    b: float
    rsj: str
    keep_tokens: bool
    analysis: str = "none"
    analysis_signature: str = "none-v1"
    title_weight: int = 1
    limit: int | None = None
    source_sha256: str | None = None
    source_name: str | None = None


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What a build did: the index path, whether it was skipped as current, and counts."""

    path: Path
    skipped: bool
    manifest: Manifest
    seconds: float


class _Blob:
    """An append-only UTF-8 string table: one byte blob plus int64 offsets."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.offsets = array("q", [0])

    def add(self, text: str) -> None:
        self.data += text.encode("utf-8")
        self.offsets.append(len(self.data))

    def arrays(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        return (
            np.frombuffer(bytes(self.data), dtype=np.uint8),
            np.frombuffer(self.offsets, dtype=np.int64).copy(),
        )


def field_terms(
    tokenize: TokenizeFn, doc: Doc, analyzer: Analyzer | None = None
) -> tuple[list[str], list[str]]:
    """The terms of a document's title and of its text (line by line), through the analysis
    chain (default: every non-empty token)."""
    terms = (analyzer or get_analyzer("none")).terms
    title = terms(tokenize_lines(tokenize, doc.title)) if doc.title else []
    return title, terms(tokenize_lines(tokenize, doc.text))


def index_tokens(tokenize: TokenizeFn, doc: Doc, analyzer: Analyzer | None = None) -> list[str]:
    """The terms of a document in order: its title's, then its text's."""
    title, text = field_terms(tokenize, doc, analyzer)
    return title + text


# a collection's manifest (service.collection.manifest, a layer above): an index is not
# written over a collection by accident
COLLECTION_MANIFEST = "collection.json"
MAX_TITLE_WEIGHT = 100  # weighted counts and lengths stay far inside int32
# a new document index's analysis chain and title weight (the settings docs_analysis and
# docs_title_weight default to them; the commands pass the settings)
DOCS_ANALYSIS = "word+min2+stop-long"
DOCS_TITLE_WEIGHT = 5


def check_title_weight(weight: int) -> int:
    """``weight`` if it is a valid title weight (an integer in [1, MAX_TITLE_WEIGHT]), else
    InvalidInputError."""
    valid = isinstance(weight, int) and not isinstance(weight, bool)
    if not valid or not 1 <= weight <= MAX_TITLE_WEIGHT:
        raise InvalidInputError(
            f"the title weight must be an integer from 1 to {MAX_TITLE_WEIGHT}, got {weight!r}"
        )
    return weight


def _title_weight(kind: IndexKind, weight: int | None) -> int:
    """The checked title weight of a new index: ``weight``, or by default
    :data:`DOCS_TITLE_WEIGHT` for documents and 1 for the pool (its sentences have no title)."""
    if weight is None:
        weight = DOCS_TITLE_WEIGHT if kind == "docs" else 1
    return check_title_weight(weight)


class _Read:
    """The documents as read, before the vocabulary is sorted.

    Per document: the first-seen ids of its distinct terms with their counts (CSR by
    ``doc_ptr``), its length, its token ids if ``keep_tokens``, its id, title, text and source.
    """

    def __init__(self, keep_tokens: bool) -> None:
        self.keep_tokens = keep_tokens
        self.term_of: dict[str, int] = {}  # first-seen ids, renumbered to sorted order at the end
        self.doc_ptr = array("q", [0])
        self.term_col = array("i")
        self.tf_col = array("i")
        self.doc_len = array("i")
        self.tokens_ptr = array("q", [0])
        self.tokens_col = array("i")
        self.ids, self.titles, self.texts = _Blob(), _Blob(), _Blob()
        self.sources: dict[str, int] = {}
        self.doc_source = array("H")

    def add(self, doc: Doc, title: list[str], text: list[str], title_weight: int) -> None:
        """Append ``doc``, indexed under its ``title`` terms (each counting ``title_weight``
        times) and its ``text`` terms."""
        term_of = self.term_of
        counts: Counter[str] = Counter()
        for t in title:
            counts[t] += title_weight
        counts.update(text)
        self.term_col.extend([term_of.setdefault(t, len(term_of)) for t in counts])
        self.tf_col.extend(counts.values())
        self.doc_ptr.append(len(self.term_col))
        self.doc_len.append(title_weight * len(title) + len(text))
        if self.keep_tokens:
            self.tokens_col.extend([term_of[t] for t in title + text])
            self.tokens_ptr.append(len(self.tokens_col))
        self.ids.add(doc.id)
        self.titles.add(doc.title)
        self.texts.add(doc.text)
        self.doc_source.append(self.sources.setdefault(doc.source, len(self.sources)))

    def sorted_vocabulary(self) -> tuple[list[str], npt.NDArray[np.int32]]:
        """The terms in sorted order, and the sorted id of each first-seen id."""
        term_of = self.term_of
        n_terms = len(term_of)
        terms_sorted = sorted(term_of)
        new_id = np.empty(n_terms, dtype=np.int32)
        new_id[np.fromiter((term_of[t] for t in terms_sorted), dtype=np.int64, count=n_terms)] = (
            np.arange(n_terms, dtype=np.int32)
        )
        return terms_sorted, new_id


def _read_documents(
    docs: Iterable[Doc],
    tokenize: TokenizeFn,
    analyzer: Analyzer,
    keep_tokens: bool,
    where: str,
    title_weight: int,
) -> _Read:
    """Tokenise and count ``docs`` in turn; DataFormatError on a repeated document id."""
    read = _Read(keep_tokens)
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise DataFormatError(where, None, f"document id {doc.id!r} occurs more than once")
        seen.add(doc.id)
        read.add(doc, *field_terms(tokenize, doc, analyzer), title_weight)
    return read


@dataclass(frozen=True, slots=True)
class _Postings:
    """Term-major postings (CSR by ``offsets``) and the per-term statistics they rest on."""

    df: npt.NDArray[np.int32]
    rsj: npt.NDArray[np.float64]  # as applied under the policy
    dropped: npt.NDArray[np.bool_]  # terms whose postings the ``drop`` policy removed
    offsets: npt.NDArray[np.int64]
    terms: npt.NDArray[np.int32]
    docs: npt.NDArray[np.int32]
    tf: npt.NDArray[np.int32]


def _postings(
    terms: npt.NDArray[np.int32],
    tfs: npt.NDArray[np.int32],
    docnos: npt.NDArray[np.int32],
    n_terms: int,
    n_docs: int,
    policy: RsjPolicy,
) -> _Postings:
    """The postings of the (document-major) ``(terms, tfs, docnos)`` sorted by term."""
    df = np.bincount(terms, minlength=n_terms).astype(np.int32)
    rsj_applied = rsj(df, n_docs, policy)
    if policy is RsjPolicy.DROP:
        dropped = rsj_raw(df, n_docs) < 0
        keep = ~dropped[terms]
        terms, tfs, docnos = terms[keep], tfs[keep], docnos[keep]
    else:
        dropped = np.zeros(n_terms, dtype=bool)

    order = np.argsort(terms, kind="stable")  # document order is kept within each term
    post_terms = terms[order]
    return _Postings(
        df=df,
        rsj=rsj_applied,
        dropped=dropped,
        offsets=ptr_from_counts(np.bincount(post_terms, minlength=n_terms)),
        terms=post_terms,
        docs=docnos[order],
        tf=tfs[order],
    )


def build_arrays(
    docs: Iterable[Doc],
    tokenize: TokenizeFn,
    *,
    k1: float,
    b: float,
    rsj_policy: RsjPolicy | str = RsjPolicy.FLOOR,
    keep_tokens: bool = False,
    analysis: str = "none",
    where: str = "<documents>",
    title_weight: int = 1,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The index arrays of ``docs`` and the counts for the manifest (no I/O); documents are
    indexed under the terms of the analysis chain ``analysis``, their titles counting
    ``title_weight`` times."""
    analyzer = get_analyzer(analysis)
    policy = RsjPolicy(rsj_policy)
    read = _read_documents(
        docs, tokenize, analyzer, keep_tokens, where, check_title_weight(title_weight)
    )

    n_docs = len(read.doc_len)
    if n_docs == 0:
        raise InvalidInputError(f"{where}: no documents to index")
    n_terms = len(read.term_of)
    terms_sorted, new_id = read.sorted_vocabulary()
    vocab_blob, vocab_offsets = encode_terms(terms_sorted)

    terms = new_id[np.frombuffer(read.term_col, dtype=np.int32)]
    tfs = np.frombuffer(read.tf_col, dtype=np.int32)
    lengths = np.frombuffer(read.doc_len, dtype=np.int32).copy()
    per_doc = np.diff(np.frombuffer(read.doc_ptr, dtype=np.int64)).astype(np.int64)
    docnos = np.repeat(np.arange(n_docs, dtype=np.int32), per_doc)
    post = _postings(terms, tfs, docnos, n_terms, n_docs, policy)

    avdl = float(lengths.sum()) / n_docs
    norm = length_norm(lengths, avdl, k1, b)
    weights = (post.rsj[post.terms] * tf_bm25(post.tf, norm[post.docs])).astype(np.float32)
    tf_dtype = np.uint16 if post.tf.size == 0 or post.tf.max() <= 0xFFFF else np.int32

    arrays: dict[str, np.ndarray] = {
        "vocab_blob": vocab_blob,
        "vocab_offsets": vocab_offsets,
        "df": post.df,
        "rsj": post.rsj.astype(np.float32),
        "post_offsets": post.offsets,
        "post_docs": post.docs.astype(np.int32),
        "post_tf": post.tf.astype(tf_dtype),
        "post_weight": weights,
        "doc_len": lengths,
        "doc_source": np.frombuffer(read.doc_source, dtype=np.uint16).copy(),
    }
    for name, blob in (("id", read.ids), ("title", read.titles), ("text", read.texts)):
        arrays[f"{name}_blob"], arrays[f"{name}_offsets"] = blob.arrays()
    if keep_tokens:
        arrays["tokens_offsets"] = np.frombuffer(read.tokens_ptr, dtype=np.int64).copy()
        arrays["tokens"] = new_id[np.frombuffer(read.tokens_col, dtype=np.int32)]
    return arrays, _build_stats(post, lengths, avdl, list(read.sources))


def _build_stats(
    post: _Postings, lengths: npt.NDArray[np.int32], avdl: float, sources: list[str]
) -> dict[str, Any]:
    """The counts a built index records in its manifest."""
    n_docs = int(lengths.size)
    raw = rsj_raw(post.df, n_docs)
    return {
        "n_docs": n_docs,
        "n_terms": int(post.df.size),
        "n_postings": int(post.docs.size),
        "n_tokens": int(lengths.sum()),
        "avdl": avdl,
        "sources": sources,
        "negative_rsj_terms": int((raw < 0).sum()),
        "zero_rsj_terms": int((raw == 0).sum()),
        "negative_rsj_postings": int(post.df[raw < 0].sum()),
        "dropped_terms": int(post.dropped.sum()),
    }


def build_in_memory(
    docs: Iterable[Doc],
    tokenize: TokenizeFn,
    *,
    k1: float = K1,
    b: float = B,
    rsj_policy: RsjPolicy | str = RsjPolicy.FLOOR,
    analysis: str = "none",
    kind: IndexKind = "docs",
    title_weight: int | None = None,
) -> InvertedIndex:
    """An index of ``docs`` held in memory, with the manifest a built one would have (kernel
    warm-up and tests; nothing is written). The title weight defaults as in a built one."""
    chain = Analyzer.from_spec(analysis).name
    title_weight = _title_weight(kind, title_weight)
    params = BuildParams(
        kind=kind, tokenizer="custom", tokenizer_signature="custom", k1=float(k1), b=float(b),
        rsj=RsjPolicy(rsj_policy).value, keep_tokens=False, analysis=chain,
        analysis_signature=analysis_signature(chain), title_weight=title_weight,
    )  # fmt: skip
    arrays, counts = build_arrays(
        docs, tokenize, k1=params.k1, b=params.b, rsj_policy=params.rsj, analysis=chain,
        title_weight=title_weight,
    )  # fmt: skip
    manifest: Manifest = {"build": asdict(params), "counts": counts}
    return InvertedIndex(Path("<in-memory>"), manifest, arrays)


def replaced_generation(out: str | Path) -> int | None:
    """The generation of the store an index built at ``out`` replaces: the index's there (0
    for one built before indexes counted them) or the collection's current commit; None when
    ``out`` holds neither. An index built over a store is the generation after it, so that a
    service searching the path, and its shard workers, tell the two apart."""
    collection = Path(out) / COLLECTION_MANIFEST
    if collection.is_file():
        try:
            return int(json.loads(collection.read_text(encoding="utf-8"))["generation"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # damaged: what replaces it starts afresh
    try:
        return int(read_manifest(out).get("generation", 0))
    except ClirError:
        return None


def write_index(
    out: str | Path,
    docs: Iterable[Doc],
    tokenize: TokenizeFn,
    params: BuildParams,
) -> Manifest:
    """Build the index of ``docs`` and write it atomically to ``out``; returns the manifest.
    Its ``generation`` is one past the store it replaces (:func:`replaced_generation`), else
    0."""
    before = replaced_generation(out)
    arrays, counts = build_arrays(
        docs,
        tokenize,
        k1=params.k1,
        b=params.b,
        rsj_policy=params.rsj,
        keep_tokens=params.keep_tokens,
        analysis=params.analysis,
        where=params.source_name or "<documents>",
        title_weight=params.title_weight,
    )
    generation = 0 if before is None else before + 1
    manifest: Manifest = {"build": asdict(params), "counts": counts, "generation": generation}
    write_index_dir(out, arrays, manifest)
    return read_manifest(out)


def is_current(out: str | Path, params: BuildParams) -> bool:
    """Whether ``out`` holds a readable index built with exactly ``params``."""
    try:
        manifest = read_manifest(out)
    except ClirError:  # a missing or unreadable index is simply not current
        return False
    return bool(manifest.get("build") == asdict(params))


def build_params(
    kind: IndexKind,
    *,
    tokenizer: str = "en",
    custom_tokenizer: bool = False,
    k1: float | None = None,
    b: float | None = None,
    rsj_policy: RsjPolicy | str = RsjPolicy.FLOOR,
    keep_tokens: bool = False,
    analysis: str | None = None,
    title_weight: int | None = None,
    limit: int | None = None,
    source_sha256: str | None = None,
    source_name: str | None = None,
) -> BuildParams:
    """The checked parameters of a new index (or collection): k1, b, the analysis chain and
    the title weight default to :data:`~service.index.bm25.K1`, :data:`~service.index.bm25.B`,
    :data:`DOCS_ANALYSIS` and :data:`DOCS_TITLE_WEIGHT` (the pool: no analysis, title weight
    1); ``clir build-index`` passes its settings."""
    if not custom_tokenizer and tokenizer not in TOKENIZERS:
        get_index_tokenizer(tokenizer)  # raises, listing the valid names
    if analysis is None:
        analysis = DOCS_ANALYSIS if kind == "docs" else "none"
    chain = Analyzer.from_spec(analysis).name  # canonical form; unknown steps raise here
    return BuildParams(
        kind=kind,
        tokenizer=tokenizer,
        tokenizer_signature="custom" if custom_tokenizer else tokenizer_signature(tokenizer),
        k1=K1 if k1 is None else float(k1),
        b=B if b is None else float(b),
        rsj=RsjPolicy(rsj_policy).value,
        keep_tokens=keep_tokens,
        analysis=chain,
        analysis_signature=analysis_signature(chain),
        title_weight=_title_weight(kind, title_weight),
        limit=limit,
        source_sha256=source_sha256,
        source_name=source_name,
    )


def _progress(items: Iterable[Doc], enabled: bool, desc: str, total: int | None) -> Iterator[Doc]:
    yield from tqdm(
        items, desc=desc, unit=" docs", disable=not enabled, file=sys.stderr, total=total
    )


def _build_from_file(
    kind: IndexKind,
    source: str | Path,
    out: str | Path,
    records: Iterable[Doc],
    *,
    tokenizer: str,
    tokenize: TokenizeFn | None,
    k1: float | None,
    b: float | None,
    rsj_policy: RsjPolicy | str,
    keep_tokens: bool,
    analysis: str | None,
    title_weight: int | None,
    limit: int | None,
    force: bool,
    progress: bool,
) -> BuildResult:
    start = time.perf_counter()
    if limit is not None and limit < 1:
        raise InvalidInputError(f"--limit must be at least 1, got {limit}")
    if not Path(source).is_file():
        raise MissingResourceError(f"{source}: no such file")
    if not force and (Path(out) / COLLECTION_MANIFEST).is_file():
        raise ConflictError(
            f"{out} is a collection (documents may have been added to it since it was built); "
            "--shards S rebuilds it as a collection in a new generation (with --force), "
            "--force replaces it with one index"
        )
    params = build_params(
        kind, tokenizer=tokenizer, custom_tokenizer=tokenize is not None, k1=k1, b=b,
        rsj_policy=rsj_policy, keep_tokens=keep_tokens, analysis=analysis,
        title_weight=title_weight, limit=limit, source_sha256=sha256_file(source),
        source_name=Path(source).name,
    )  # fmt: skip
    if not force and is_current(out, params):
        return BuildResult(Path(out), True, read_manifest(out), time.perf_counter() - start)
    fn = tokenize if tokenize is not None else get_index_tokenizer(tokenizer)
    docs = records if limit is None else islice(records, limit)
    manifest = write_index(out, _progress(docs, progress, f"index {kind}", limit), fn, params)
    return BuildResult(Path(out), False, manifest, time.perf_counter() - start)


def build_docs_index(
    source: str | Path,
    out: str | Path,
    *,
    tokenizer: str = "en",
    tokenize: TokenizeFn | None = None,
    k1: float | None = None,
    b: float | None = None,
    rsj_policy: RsjPolicy | str = RsjPolicy.FLOOR,
    keep_tokens: bool = False,
    analysis: str | None = None,
    title_weight: int | None = None,
    limit: int | None = None,
    force: bool = False,
    progress: bool = False,
    max_doc_bytes: int | None = None,
) -> BuildResult:
    """Index ``docs.jsonl(.gz)`` (title + text) into ``out``; a document over
    ``max_doc_bytes`` stops the build with its line and id (nothing is written).

    ``tokenizer`` names the tokenizer (recorded in the manifest and used for queries);
    ``tokenize`` overrides the function itself (tests). k1, b, the analysis chain
    (:mod:`service.index.analysis`) and the title weight default as in :func:`build_params`.
    """
    return _build_from_file(
        "docs", source, out, read_docs(source, max_doc_bytes=max_doc_bytes),
        tokenizer=tokenizer, tokenize=tokenize, k1=k1, b=b, rsj_policy=rsj_policy,
        keep_tokens=keep_tokens, analysis=analysis, title_weight=title_weight, limit=limit,
        force=force,
        progress=progress,
    )  # fmt: skip


def build_pool_index(
    source: str | Path,
    out: str | Path,
    *,
    tokenizer: str = "en",
    tokenize: TokenizeFn | None = None,
    k1: float | None = None,
    b: float | None = None,
    rsj_policy: RsjPolicy | str = RsjPolicy.FLOOR,
    keep_tokens: bool = True,
    analysis: str | None = None,
    limit: int | None = None,
    force: bool = False,
    progress: bool = False,
) -> BuildResult:
    """Index the translation-retrieval sentence pool ``id<TAB>english`` into ``out``.

    Each sentence is a document with an empty title; its token ids are kept by default
    (translation retrieval compares token sequences, so the analysis chain defaults to
    ``"none"``: every token is a term).
    """
    records = (Doc(s.id, "", s.text, "") for s in read_pool(source))
    return _build_from_file(
        "pool", source, out, records,
        tokenizer=tokenizer, tokenize=tokenize, k1=k1, b=b, rsj_policy=rsj_policy,
        keep_tokens=keep_tokens, analysis=analysis, title_weight=1, limit=limit, force=force,
        progress=progress,
    )  # fmt: skip

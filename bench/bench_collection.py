"""Collections at scale: build, add and search a collection of up to 1.2 M documents.

The collection is ``../shared/data``'s 16,455 documents plus *perturbed replicas*: copy ``r`` of
a document keeps each of its lines with probability 0.7 (seeded by the id and ``r``) and gets
the id ``<id>~r<r>``. Why replicas and not distractors cut from the LM text or the sentence
pool: those texts would make 1.2 M documents of one or two sentences (the LM text has 1.4 M
lines in all), far shorter than the collection's (man pages run to thousands of words), and
BOW-FD's cost is driven by how many candidates share a word with the forest and how long they
are. Perturbed replicas keep the collection's vocabulary and length distribution (at about 70 %
of the length), differ from each other (no exact score ties, unlike plain copies, whose ties make
the bound-pruned search stop early), and put near-duplicates of every relevant page beside it:
a harder candidate set than WikiCLIR's more varied articles, so the timings are pessimistic.

Benchmarks (``python -m bench collection-<verb>``; each adds its figures, stamped, to
``bench/results/collection.json`` under a key):

* ``collection-build --copies C --shards S [--workers W] --out DIR``: stream the collection
  into a new collection (segments flushed as the buffer fills, each shard merged at the end),
  with wall and CPU time, peak RSS of the writer and of its workers, and the size on disk.
* ``collection-quality [--model M --index I]``: what the cascade costs in MAP and recall on the
  German dev sets (paragraph, short, question) against exhaustive BOW-FD, with p-values.
* ``collection-add --collection DIR --n N``: add N new documents (copies with a new suffix),
  commit, and time until a search in another ``Collection`` finds them.
* ``collection-search --collection DIR --model M``: rank time p50/p95 of DT, PSQ, BOW-FD
  (exhaustive and cascades) for paragraph, short and question queries (German dev sets; queries
  decoded once, outside the timing), in one process over the S shards in turn (``local``) and at
  once in threads (``threads``), and fanned out to S Ray workers (``ray``), alternating per
  query.
* ``collection-e2e --collection DIR``: a fresh query end to end (decoded, then ranked).

``python -m bench.bench_collection <verb> ...`` (``build``, ``add``, ``search``, ``e2e``,
``quality``) still runs them.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import resource
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, percentile, write_result

RESULTS = RESULTS_DIR / "collection.json"
DOCS = DATA / "clir" / "docs.jsonl.gz"
SETS = {
    "paragraph": DATA / "clir" / "lohelp-de" / "queries.dev.tsv",
    "short": ROOT / "bench" / "querysets" / "lohelp-de" / "queries.short.dev.tsv",
    "question": ROOT / "bench" / "querysets" / "lohelp-de" / "questions.dev.tsv",
}


def documents(copies: int, suffix: str = "r", start: int = 0) -> Iterator[Any]:
    """The collection, then perturbed replicas ``start+1 .. copies-1`` (ids
    ``<id>~<suffix><r>``), read from the file again for each copy (nothing is kept)."""
    from service.records import Doc

    for r in range(start, copies):
        with gzip.open(DOCS, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                o = json.loads(line)
                if r == 0:
                    yield Doc(o["id"], o.get("title", ""), o["text"], o.get("source", ""))
                    continue
                new_id = f"{o['id']}~{suffix}{r}"
                rng = random.Random(new_id)
                lines = o["text"].split("\n")
                kept = [x for x in lines if rng.random() < 0.7] or lines[:1]
                yield Doc(new_id, o.get("title", ""), "\n".join(kept), o.get("source", ""))


def record(
    key: str, figures: dict[str, Any], params: Any, signatures: dict[str, Any] | None = None
) -> None:
    """``figures`` under ``key`` of the results file (the other keys kept), stamped."""
    write_result(RESULTS, figures, params, signatures=signatures, key=key, sort_keys=True)
    print(json.dumps({key: figures}, indent=1))


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def _status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                out[key] = int(value.split()[0])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass  # a child that just ended
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(x) for x in (task / "children").read_text().split()]
        except (FileNotFoundError, ValueError):
            continue
    return kids


class MemorySampler:
    """Peak resident memory of this process and of its children (worker processes), split
    into anonymous pages (what the writer holds) and file-backed pages (mapped segments the
    kernel may drop at will; ru_maxrss counts both), sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.2) -> None:
        self.every = every
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            mine = _status_kb(me)
            kids = [_status_kb(k) for k in _children(me)]
            now = {
                "writer_anon_mb": mine.get("RssAnon", 0) / 1024,
                "writer_file_mb": mine.get("RssFile", 0) / 1024,
                "workers_anon_mb": sum(k.get("RssAnon", 0) for k in kids) / 1024,
                "total_anon_mb": (mine.get("RssAnon", 0) + sum(k.get("RssAnon", 0)
                                                              for k in kids)) / 1024,
            }  # fmt: skip
            for key, value in now.items():
                self.peak[key] = max(self.peak.get(key, 0.0), value)
            self._stop.wait(self.every)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict[str, int]:
        return {f"peak_{k}": round(v) for k, v in sorted(self.peak.items())}


@dataclass(frozen=True)
class BuildParams:
    copies: Annotated[int, Help("the collection and C-1 perturbed replicas")] = 1
    shards: Annotated[int, Help("shards")] = 1
    workers: Annotated[int, Help("worker processes")] = 1
    buffer_mb: Annotated[float, Help("segment buffer")] = 32.0
    out: Annotated[Path, Help("the new collection's directory")] = Path("collections/x1-S1")


def build(args: BuildParams) -> None:
    from service.collection import build_collection
    from service.index.build import build_params

    t0, c0 = time.perf_counter(), time.process_time()
    params = build_params("docs", source_name=DOCS.name)
    with MemorySampler() as memory:
        summary = build_collection(
            documents(args.copies), args.out, params, shards=args.shards,
            buffer_mb=args.buffer_mb, workers=args.workers,
        )  # fmt: skip
    record(
        f"build/x{args.copies}/S{args.shards}/w{args.workers}",
        {
            "documents": summary.n_docs,
            "seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds_writer": round(time.process_time() - c0, 1),
            "peak_rss_writer_mb": round(_peak_mb(resource.RUSAGE_SELF)),
            "peak_rss_worker_mb": round(_peak_mb(resource.RUSAGE_CHILDREN)),
            "buffer_mb": args.buffer_mb,
            "disk_mb": round(_du(Path(args.out)) / 1e6),
            **memory.figures(),
        },
        args,
    )


@dataclass(frozen=True)
class AddParams:
    collection: Annotated[Path, Help("the collection")] = Path("collections/x1-S1")
    n: Annotated[int, Help("documents to add")] = 10_000
    workers: Annotated[int, Help("worker processes")] = 1


def add(args: AddParams) -> None:
    from service.collection import Collection, CollectionWriter

    reader = Collection(args.collection)
    before = reader.snapshot.n_docs
    docs = []
    for d in documents(2, suffix=f"add{int(time.time())}-", start=1):
        docs.append(d)
        if len(docs) == args.n:
            break
    t0 = time.perf_counter()
    with MemorySampler() as memory, CollectionWriter(args.collection, workers=args.workers) as w:
        w.add(docs)
        s = w.commit()
    committed = time.perf_counter() - t0
    reader.refresh()
    visible = time.perf_counter() - t0
    found = reader.doc(docs[-1].id).id == docs[-1].id
    t1 = time.perf_counter()
    with CollectionWriter(args.collection) as w:
        merged = w.merge()
    record(
        f"add/{args.n}/to{before}",
        {
            "added": s.added, "commit_seconds": round(committed, 2),
            "visible_seconds": round(visible, 2), "found_by_next_reader": found,
            "merge_seconds": round(time.perf_counter() - t1, 1), "merged_segments": len(merged),
            "peak_rss_mb": round(_peak_mb(resource.RUSAGE_SELF)), **memory.figures(),
        },
        args,
    )  # fmt: skip


@dataclass(frozen=True)
class SearchParams:
    collection: Annotated[tuple[Path, ...], Help("collections to rank over")] = (
        Path("collections/x1-S1"),
    )
    model: Annotated[Path, Help("bundle")] = ROOT / "models" / "de-en"
    sets: Annotated[str, Help("German dev sets, comma-separated")] = "paragraph,short,question"
    limit: Annotated[int, Help("the first N queries of each set")] = 30
    k: Annotated[int, Help("ranking depth")] = 10
    ray: Annotated[bool, Help("also fan out to Ray workers")] = False
    psq: Annotated[bool, Help("time PSQ too")] = False
    tag: Annotated[str, Help("recorded under search/N/MODEL/TAG")] = ""


def search(args: SearchParams) -> None:
    """Every collection and backend ranks each decoded query in turn (alternating, so that
    load on the shared machine hits them alike); p50/p95 per set, method and configuration."""
    from service.collection import Collection, SnapshotSearcher
    from service.data import read_queries
    from service.mt.bundle import load_bundle
    from service.retrieval.query import decode_query

    bundle = load_bundle(args.model)
    decoder = bundle.decoder()
    colls = [Collection(c) for c in args.collection]
    configs: list[tuple[str, Any, Any]] = []  # (label, collection, searcher)
    for c in colls:
        label = f"S{c.snapshot.commit.shards}"
        if c.snapshot.commit.shards == 1:
            configs.append((f"{label}/local", c, SnapshotSearcher(bundle, threads=1)))
        else:  # in process: one shard after another, or at once in threads
            configs.append((f"{label}/local", c, SnapshotSearcher(bundle, threads=1)))
            configs.append((f"{label}/threads", c, SnapshotSearcher(bundle, threads=0)))
        if args.ray and c.snapshot.commit.shards > 1:
            from service.collection.distributed import RaySearcher

            configs.append((f"{label}/ray", c, RaySearcher(c, bundle, timeout_s=600)))
    runs: list[tuple[str, dict[str, Any]]] = [
        ("dt", {}), ("bowfd", {}), ("bowfd", {"cascade": 1000}), ("bowfd", {"cascade": 100}),
    ]  # fmt: skip
    if args.psq:  # PSQ's 1000-best list costs seconds a paragraph query, sharded or not
        runs.insert(1, ("psq", {"nbest": 1000}))
    out: dict[str, Any] = {
        "documents": colls[0].snapshot.n_docs,
        "model": Path(args.model).name,
        "k": args.k,
        "collections": {
            f"S{c.snapshot.commit.shards}": [len(s) for s in c.snapshot.shards] for c in colls
        },
    }
    # warm-up (compiled kernels, memory maps, Ray workers): one query through everything
    warm = decode_query(decoder, "Tabelle einfügen", "de", qid="warm-up")
    for method, params in runs:
        for _label, coll, searcher in configs:
            searcher.rank(coll.snapshot, method, warm, args.k, params=params)
    for set_name in args.sets.split(","):
        queries = list(read_queries(SETS[set_name]))[: args.limit]
        times: dict[str, list[float]] = {}
        end_to_end: dict[str, list[float]] = {}
        decode: list[float] = []
        for q in queries:
            t = time.perf_counter()
            dq = decode_query(decoder, q.text, "de", qid=q.qid)
            decode.append(time.perf_counter() - t)
            for method, params in runs:
                name = method + "".join(f"-{k}{v}" for k, v in params.items() if k != "nbest")
                for label, coll, searcher in configs:
                    t = time.perf_counter()
                    result = searcher.rank(coll.snapshot, method, dq, args.k, params=params)
                    rank_s = time.perf_counter() - t
                    times.setdefault(f"{name}/{label}", []).append(rank_s)
                    # a fresh query end to end: its decoding, then this ranking
                    end_to_end.setdefault(f"{name}/{label}", []).append(decode[-1] + rank_s)
                    if len(result) == 3:
                        assert not result[2], result[2]
        out[set_name] = {
            "queries": len(queries),
            "decode_ms_p50": round(percentile(decode, 50) * 1000, 1),
            **{name: {"p50_ms": round(percentile(xs, 50) * 1000, 1),
                      "p95_ms": round(percentile(xs, 95) * 1000, 1),
                      "end_to_end_p50_ms": round(percentile(end_to_end[name], 50) * 1000, 1)}
               for name, xs in times.items()},
        }  # fmt: skip
        for name, xs in times.items():  # per query, against one shard in the same run
            method, label = name.split("/", 1)
            one = times.get(f"{method}/S1/local")
            if one is not None and label != "S1/local":
                ratios = [x / y for x, y in zip(xs, one, strict=True)]
                out[set_name][name]["vs_S1_p50"] = round(percentile(ratios, 50), 3)
        print(json.dumps({set_name: out[set_name]}), file=sys.stderr)
    tag = f"/{args.tag}" if args.tag else ""
    record(f"search/{colls[0].snapshot.n_docs}/{Path(args.model).name}{tag}", out, args,
           {"bundle": bundle_signature(bundle)})  # fmt: skip


CASCADES: dict[str, dict[str, Any]] = {
    "dt": {},
    "bowfd": {},
    "bowfd cascade 1000": {"cascade": 1000},
    "bowfd cascade 100": {"cascade": 100},
}
QUALITY_METRICS = ("map", "recall@100", "recall@1000", "ndcg@10", "mrr")


@dataclass(frozen=True)
class QualityParams:
    model: Annotated[Path, Help("bundle")] = ROOT / "models" / "de-en"
    index: Annotated[Path, Help("the dev index the judgments belong to")] = (
        ROOT / "indexes" / "docs"
    )
    sets: Annotated[str, Help("dev sets, comma-separated")] = "paragraph,short,question"
    limit: Annotated[int | None, Help("the first N queries of each set (default: all)")] = None


def quality(args: QualityParams) -> None:
    """What the cascade costs in MAP and recall on the dev sets: every query decoded once and
    ranked at depth 1000 by DT, exhaustive BOW-FD and BOW-FD over DT's top 1000 and top 100
    (the cascade returns at most N documents), on the dev index the judgments belong to."""
    from bench.bench_querysets import load_set
    from service.evaluation import evaluate, randomization_test
    from service.index.inverted import load_index
    from service.mt.bundle import load_bundle
    from service.retrieval.query import decode_query
    from service.retrieval.runner import decoder_for, make_scorer

    bundle = load_bundle(args.model)
    version = bundle.active_weights().version
    index = load_index(args.index)
    decoder = decoder_for(bundle)
    scorers = {name: make_scorer(name.split()[0], index, bundle, **params)
               for name, params in CASCADES.items()}  # fmt: skip
    for set_name in args.sets.split(","):
        queries, qrels = load_set(set_name, bundle.src)
        queries = {q: t for q, t in list(queries.items())[: args.limit] if q in qrels}
        runs: dict[str, dict[str, dict[str, float]]] = {name: {} for name in scorers}
        seconds = dict.fromkeys(scorers, 0.0)
        for qid, text in queries.items():
            q = decode_query(decoder, text, bundle.src, qid=qid, weights_version=version)
            for name, scorer in scorers.items():
                t0 = time.perf_counter()
                ranking = scorer.rank(q, 1000)
                seconds[name] += time.perf_counter() - t0
                runs[name][qid] = {h.doc_id: h.score for h in ranking.hits}
        n = max(1, len(queries))
        figures: dict[str, Any] = {"queries": len(queries), "weights": version}
        per_query = {}
        for name, run in runs.items():
            ev = evaluate(run, qrels, QUALITY_METRICS)
            per_query[name] = ev.per_query["map"]
            figures[name] = {**{m: round(v, 4) for m, v in ev.as_json().items()
                                if m in QUALITY_METRICS},
                             "rank_ms_p_query": round(1000 * seconds[name] / n, 1)}  # fmt: skip
        for name in ("bowfd cascade 1000", "bowfd cascade 100"):
            figures[name]["p_map_vs_exhaustive"] = round(
                randomization_test(per_query[name], per_query["bowfd"], 10_000, 0), 4
            )
        signatures = {"bundle": bundle_signature(bundle), "index": index.signature(),
                      "scorers": {n: sc.signature() for n, sc in scorers.items()}}  # fmt: skip
        record(f"quality/{bundle.src}/{set_name}/{Path(args.index).name}", figures, args,
               signatures)  # fmt: skip


@dataclass(frozen=True)
class EndToEndParams:
    collection: Annotated[Path, Help("the collection")] = Path("collections/x1-S1")
    model: Annotated[Path, Help("bundle")] = ROOT / "models" / "de-en"
    sets: Annotated[str, Help("German dev sets, comma-separated")] = "paragraph"
    limit: Annotated[int, Help("the first N queries of each set")] = 80
    k: Annotated[int, Help("ranking depth")] = 10
    cascade: Annotated[int, Help("BOW-FD over DT's top N (0: exhaustive BOW-FD)")] = 100


def end_to_end(args: EndToEndParams) -> None:
    """A fresh query as a searcher sends it: decoded, then ranked over the collection (shards
    in threads), one query after another; p50/p95 of decode + rank per query."""
    from service.collection import Collection, SnapshotSearcher
    from service.data import read_queries
    from service.mt.bundle import load_bundle
    from service.retrieval.query import decode_query

    bundle = load_bundle(args.model)
    decoder = bundle.decoder()
    coll = Collection(args.collection)
    searcher = SnapshotSearcher(bundle, threads=0)
    params = {"cascade": args.cascade} if args.cascade else {}
    warm = decode_query(decoder, "Tabelle einfügen", "de", qid="warm-up")
    searcher.rank(coll.snapshot, "bowfd", warm, args.k, params=params)
    out: dict[str, Any] = {
        "documents": coll.snapshot.n_docs,
        "model": Path(args.model).name,
        "shards": coll.snapshot.commit.shards,
        "cascade": args.cascade,
    }
    for set_name in args.sets.split(","):
        decode, rank, total = [], [], []
        for q in list(read_queries(SETS[set_name]))[: args.limit]:
            t0 = time.perf_counter()
            dq = decode_query(decoder, q.text, "de", qid=q.qid)
            t1 = time.perf_counter()
            searcher.rank(coll.snapshot, "bowfd", dq, args.k, params=params)
            t2 = time.perf_counter()
            decode.append(t1 - t0)
            rank.append(t2 - t1)
            total.append(t2 - t0)
        out[set_name] = {
            "queries": len(total),
            **{f"{name}_ms_{p}": round(percentile(xs, p) * 1000, 1)
               for name, xs in (("decode", decode), ("rank", rank), ("end_to_end", total))
               for p in (50, 95)},
        }  # fmt: skip
        print(json.dumps({set_name: out[set_name]}), file=sys.stderr)
    tag = f"cascade{args.cascade}" if args.cascade else "exhaustive"
    key = f"end-to-end/{coll.snapshot.n_docs}/{Path(args.model).name}/S{out['shards']}/{tag}"
    record(key, out, args, {"bundle": bundle_signature(bundle)})


VERBS = {"build": "collection-build", "add": "collection-add", "search": "collection-search",
         "e2e": "collection-e2e", "quality": "collection-quality"}  # fmt: skip


if __name__ == "__main__":  # python -m bench.bench_collection VERB ...: python -m bench NAME ...
    from bench.cli import run as run_benchmark
    from bench.registry import get

    if len(sys.argv) < 2 or sys.argv[1] not in VERBS:
        raise SystemExit(f"usage: python -m bench.bench_collection {{{','.join(VERBS)}}} ...")
    run_benchmark(get(VERBS[sys.argv[1]]), sys.argv[2:])

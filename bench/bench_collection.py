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

Verbs (each appends its figures to ``bench/results/collection.json`` under a key):

* ``build --copies C --shards S [--workers W] --out DIR``: stream the collection into a new
  collection (segments flushed as the buffer fills, each shard merged at the end), with wall
  and CPU time, peak RSS of the writer and of its workers, and the size on disk.
* ``add --collection DIR --n N``: add N new documents (copies with a new suffix), commit, and
  time until a search in another ``Collection`` finds them.
* ``search --collection DIR --model M``: rank time p50/p95 of DT, PSQ, BOW-FD (exhaustive and
  cascades) for paragraph, short and question queries (German dev sets; queries decoded once,
  outside the timing), in one process over the S shards in turn and fanned out to S Ray
  workers, alternating per query.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import DATA, RESULTS_DIR, ROOT, percentile

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


def record(key: str, figures: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = {**figures, "machine": os.uname().nodename, "cpus": os.cpu_count(),
                 "revision": _revision(), "time": time.strftime("%Y-%m-%dT%H:%M:%S")}  # fmt: skip
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(json.dumps({key: data[key]}, indent=1))


def _revision() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
    return out.stdout.decode().strip()


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def build(args: argparse.Namespace) -> None:
    from service.collection import build_collection
    from service.index.build import build_params

    t0, c0 = time.perf_counter(), time.process_time()
    params = build_params("docs", source_name=DOCS.name)
    summary = build_collection(
        documents(args.copies), args.out, params, shards=args.shards, buffer_mb=args.buffer_mb,
        workers=args.workers,
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
        },
    )


def add(args: argparse.Namespace) -> None:
    from service.collection import Collection, CollectionWriter

    reader = Collection(args.collection)
    before = reader.snapshot.n_docs
    docs = []
    for d in documents(2, suffix=f"add{int(time.time())}-", start=1):
        docs.append(d)
        if len(docs) == args.n:
            break
    t0 = time.perf_counter()
    with CollectionWriter(args.collection, workers=args.workers) as w:
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
            "peak_rss_mb": round(_peak_mb(resource.RUSAGE_SELF)),
        },
    )  # fmt: skip


def search(args: argparse.Namespace) -> None:
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
        configs.append((f"{label}/local", c, SnapshotSearcher(bundle)))
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
                    times.setdefault(f"{name}/{label}", []).append(time.perf_counter() - t)
                    if len(result) == 3:
                        assert not result[2], result[2]
        out[set_name] = {
            "queries": len(queries),
            "decode_ms_p50": round(percentile(decode, 50) * 1000, 1),
            **{name: {"p50_ms": round(percentile(xs, 50) * 1000, 1),
                      "p95_ms": round(percentile(xs, 95) * 1000, 1)}
               for name, xs in times.items()},
        }  # fmt: skip
        print(json.dumps({set_name: out[set_name]}), file=sys.stderr)
    record(f"search/{colls[0].snapshot.n_docs}/{Path(args.model).name}", out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("build")
    p.add_argument("--copies", type=int, default=1)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--buffer-mb", type=float, default=32.0)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("add")
    p.add_argument("--collection", type=Path, required=True)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=1)
    p = sub.add_parser("search")
    p.add_argument("--collection", type=Path, nargs="+", required=True)
    p.add_argument("--model", type=Path, default=ROOT / "models" / "de-en")
    p.add_argument("--sets", default="paragraph,short,question")
    p.add_argument("--limit", type=int, default=30)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--ray", action="store_true")
    p.add_argument("--psq", action="store_true", help="time PSQ too")
    args = parser.parse_args(argv)
    {"build": build, "add": add, "search": search}[args.verb](args)


if __name__ == "__main__":
    main()

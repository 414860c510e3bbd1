"""Shard workers as Ray actors or as Ray Serve deployments: the choice the scale-out design
leaves to measurement.

Both run the same :class:`~service.collection.distributed.ShardWorker` over the same collection
on this machine, one per shard: as an actor (what ``CLIR_SEARCH_BACKEND=ray`` runs, through
:class:`~service.collection.distributed.RaySearcher`) and as a Serve deployment of one replica,
called through its ``DeploymentHandle`` with the same plan and the same exact merge. Per
configuration, alternating per query: the round trip of a call that does nothing but read the
shard's status, and DT, BOW-FD with a cascade of 100 and exhaustive BOW-FD fanned out to every
shard (German dev queries, decoded once outside the timing), p50/p95 ms.

Ray Serve is not a dependency of the service; this needs it beside it::

    python -m venv /tmp/sv && echo "$PWD/.venv/lib/python3.11/site-packages" > \\
        /tmp/sv/lib/python3.11/site-packages/main.pth && echo "$PWD" >> \\
        /tmp/sv/lib/python3.11/site-packages/main.pth
    RAY=$(.venv/bin/python -c 'import ray; print(ray.__version__)')
    /tmp/sv/bin/pip install "ray[serve]==$RAY"
    /tmp/sv/bin/python -m bench serve --collection DIR --model models/de-en --limit 20
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import RESULTS_DIR, ROOT, Help, bundle_signature, percentile, write_result

RESULTS = RESULTS_DIR / "serve.json"
RUNS: list[tuple[str, str, dict[str, Any]]] = [
    ("dt", "dt", {}),
    ("bowfd cascade 100", "bowfd", {"cascade": 100}),
    ("bowfd exhaustive", "bowfd", {}),
]


class ServeSearcher:
    """The fan-out of :class:`RaySearcher`, with one Serve deployment per shard."""

    def __init__(self, collection: Any, bundle: Any, concurrency: int) -> None:
        from ray import serve

        from service.collection.distributed import ShardWorker
        from service.collection.searcher import SnapshotSearcher

        serve.start(http_options={"location": "NoServer"})
        deployment = serve.deployment(max_ongoing_requests=concurrency)(ShardWorker)
        self.local = SnapshotSearcher(bundle, threads=1)
        self.handles = [
            serve.run(
                deployment.options(name=f"shard{s}").bind(
                    str(collection.path), s, str(bundle.path), None
                ),
                name=f"shard{s}",
                route_prefix=None,
            )
            for s in range(collection.snapshot.commit.shards)
        ]

    def status(self) -> list[Any]:
        return [r.result() for r in [h.status.remote() for h in self.handles]]

    def rank(self, snapshot: Any, method: str, query: Any, k: int, params: dict[str, Any]) -> Any:
        from service.retrieval.partials import final_ranking, get_method

        m = get_method(method)
        lead = self.local.any_scorer(snapshot, method, params)

        def first_stage(name: str, depth: int) -> Any:
            return self.rank(snapshot, name, query, depth, {})

        plan = None if lead is None else m.search_plan(lead, query, first_stage)
        plan = m.remote_plan(plan, len(self.handles))
        calls = [h.partial.remote(method, query, k, params, plan, None, True) for h in self.handles]
        parts = [p for _, p, _ in (c.result() for c in calls) if p is not None]
        final = m.finish(m.merge(parts), k)
        assert lead is not None
        return final_ranking(snapshot, query, final, lead.signature(query), {}, {})


@dataclass(frozen=True)
class Params:
    collection: Annotated[Path, Help("the collection")] = Path("collections/x10-S2")
    model: Annotated[Path, Help("bundle")] = ROOT / "models" / "de-en"
    sets: Annotated[str, Help("German dev sets, comma-separated")] = "paragraph,short"
    limit: Annotated[int, Help("the first N queries of each set")] = 20
    k: Annotated[int, Help("ranking depth")] = 10
    concurrency: Annotated[int, Help("concurrent calls per shard worker")] = 8


def run(args: Params) -> None:

    import ray

    from bench.bench_collection import SETS
    from service.collection import Collection
    from service.collection.distributed import RaySearcher
    from service.data import read_queries
    from service.mt.bundle import load_bundle
    from service.retrieval.query import decode_query

    bundle = load_bundle(args.model)
    decoder = bundle.decoder()
    coll = Collection(args.collection)
    ray.init(include_dashboard=False, log_to_driver=False)
    actors = RaySearcher(coll, bundle, timeout_s=600, concurrency=args.concurrency)
    served = ServeSearcher(coll, bundle, args.concurrency)
    configs = {"actors": actors, "serve": served}
    snap = coll.snapshot

    def rank(name: str, method: str, q: Any, params: dict[str, Any]) -> Any:
        if name == "actors":
            ranking, _, failed = actors.rank(snap, method, q, args.k, params=params)
            assert not failed, failed
            return ranking
        return served.rank(snap, method, q, args.k, params)

    warm = decode_query(decoder, "Tabelle einfügen", "de", qid="warm-up")
    for name in configs:
        for _, method, params in RUNS:
            rank(name, method, warm, params)
    out: dict[str, Any] = {"documents": snap.n_docs, "shards": snap.commit.shards}
    trips: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(50):  # the round trip of a call that does no search
        for name, searcher in configs.items():
            t = time.perf_counter()
            searcher.status()
            trips[name].append(time.perf_counter() - t)
    out["status_round_trip_ms"] = {
        name: {
            "p50": round(percentile(xs, 50) * 1000, 2),
            "p95": round(percentile(xs, 95) * 1000, 2),
        }
        for name, xs in trips.items()
    }
    print(json.dumps(out["status_round_trip_ms"]), file=sys.stderr)
    for set_name in args.sets.split(","):
        queries = list(read_queries(SETS[set_name]))[: args.limit]
        times: dict[str, list[float]] = {}
        for q in queries:
            dq = decode_query(decoder, q.text, "de", qid=q.qid)
            for label, method, params in RUNS:
                hits = []
                for name in configs:
                    t = time.perf_counter()
                    ranking = rank(name, method, dq, params)
                    times.setdefault(f"{label}/{name}", []).append(time.perf_counter() - t)
                    hits.append([(h.doc_id, h.score) for h in ranking.hits])
                assert hits[0] == hits[1], (label, q.qid)  # the same merge, the same answer
        out[set_name] = {
            "queries": len(queries),
            **{k: {"p50_ms": round(percentile(xs, 50) * 1000, 1),
                   "p95_ms": round(percentile(xs, 95) * 1000, 1)} for k, xs in times.items()},
        }  # fmt: skip
        print(json.dumps({set_name: out[set_name]}), file=sys.stderr)
    signatures = {"bundle": bundle_signature(bundle)}
    write_result(RESULTS, out, args, signatures=signatures, sort_keys=True)
    actors.close()
    ray.shutdown()


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("serve")

"""Experiment: what the default feedback costs a page on one index and on a sharded collection.

Feedback is on by default (RM3, Lavrenko & Croft 2001; BOW-FD's rerank form, Hieber & Riezler
2015, §3 weights). On one index the rerank pass reuses the first pass's prepared forests; on a
collection (``service.collection.feedback``) the rerank searches the first ranking's documents
again through the collection's searcher, which prepares the forests anew. This measures the
page the service answers — ``POST /v1/search``, BOW-FD, k = 10, ``explain`` as the page asks —
through the real app (FastAPI's TestClient, local backend), on the same German dev queries,
each decoded once (a warm-up request) and then asked without and with feedback alternately;
``rank_ms`` from the response (decoding not counted). Both the index and the collection answer
the same results with feedback (checked per query).

Run: ``PYTHONPATH=. .venv/bin/python bench/exp_collection_feedback.py COLLECTION [N]`` with a
collection of the same documents (``clir build-index --docs … --out COLLECTION --shards 2``);
writes ``bench/results/collection_feedback.json``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, percentile, write_result
from service.api.app import create_app
from service.core.settings import Settings

ROUNDS = 2


def client(index: Path, jobs: Path) -> TestClient:
    settings = Settings.model_validate(
        {
            "model_bundles": [ROOT / "models" / "de-en"],
            "doc_indexes": [index],
            "pool_indexes": [],
            "job_store": jobs / f"{index.name}.sqlite3",
            "embedded_worker": False,
        }
    )
    return TestClient(create_app(settings))


def search(c: TestClient, query: str, feedback: bool) -> dict[str, Any]:
    body = {"query": query, "lang": "de", "method": "bowfd", "k": 10, "explain": True,
            "feedback": feedback}  # fmt: skip
    r = c.post("/v1/search", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def quantiles(xs: list[float]) -> dict[str, float]:
    return {"p50": percentile(xs, 50), "p90": percentile(xs, 90)}


def main(collection: Path, n: int) -> None:
    result: dict[str, Any] = {"collection": str(collection), "queries_per_set": n, "sets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        clients = {
            "index": client(ROOT / "indexes" / "docs", Path(tmp)),
            "collection": client(collection, Path(tmp)),
        }
        for c in clients.values():
            c.__enter__()
        try:
            for set_name in ("short", "paragraph"):
                queries, _ = load_set(set_name, "de")
                texts = list(queries.values())[:n]
                entry: dict[str, Any] = {}
                for name, c in clients.items():
                    plain: list[float] = []
                    added: list[float] = []
                    for text in texts:
                        search(c, text, False)  # decode once
                        for _ in range(ROUNDS):
                            a = search(c, text, False)["timings"]["rank_ms"]
                            b = search(c, text, True)["timings"]["rank_ms"]
                            plain.append(a)
                            added.append(b - a)
                    entry[name] = {"page_ms": quantiles(plain), "added_ms": quantiles(added)}
                same = sum(
                    [h["id"] for h in search(clients["index"], t, True)["results"]]
                    == [h["id"] for h in search(clients["collection"], t, True)["results"]]
                    for t in texts
                )
                entry["same_results_with_feedback"] = f"{same}/{len(texts)}"
                result["sets"][set_name] = entry
                print(set_name, entry, file=sys.stderr)
        finally:
            for c in clients.values():
                c.__exit__(None, None, None)
    write_result(RESULTS_DIR / "collection_feedback.json", result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40)

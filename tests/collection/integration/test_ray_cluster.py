"""A real two-node Ray cluster on this machine (``ray start --head`` and a second ``ray start
--address``, both with the same auth token, as Ray 2.60 requires; clusters.py): the shard
workers spread over both nodes and the fanned-out search ranks as in one process. The driver
runs in its own process, as the API does, with the token in its environment from the start
(Ray reads it once per process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collection.integration.clusters import two_nodes

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    with two_nodes(tmp_path) as (address, env, _):
        yield address, env


DRIVER = """
import json, sys, time
from pathlib import Path
import ray
from service.collection import Collection, SnapshotSearcher, build_collection
from service.collection.distributed import RaySearcher
from service.index.build import build_params
from service.mt.bundle import load_bundle
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES, corpus

address, out, bundle_path, state_root = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
build_collection(corpus(200, 21), out, build_params("docs"), shards=2)
coll = Collection(out)
bundle = load_bundle(bundle_path, state_root=state_root)
decoder = bundle.decoder()
ray.init(address=address, log_to_driver=False)
# a node that `ray start` launched may register, and its resources reach the scheduler, late
deadline = time.monotonic() + 120
while time.monotonic() < deadline and (
    sum(1 for n in ray.nodes() if n.get("Alive")) < 2
    or ray.cluster_resources().get("CPU", 0) < 2
):
    time.sleep(0.5)
searcher = RaySearcher(coll, bundle, address=address, timeout_s=120)
status = searcher.status()
local = SnapshotSearcher(bundle)
same = []
for method in ("dt", "bowfd"):
    for i, text in enumerate(QUERIES):
        q = decode_query(decoder, text, "de", qid=f"q{i}")
        want, _ = local.rank(coll.snapshot, method, q, 10)
        got, _, failed = searcher.rank(coll.snapshot, method, q, 10)
        same.append(not failed and [(h.doc_id, h.score) for h in got.hits]
                    == [(h.doc_id, h.score) for h in want.hits])
print(json.dumps({"nodes": len(ray.nodes()), "status": status, "same": same}))
searcher.close()
"""


def test_two_node_cluster_spreads_shards_and_ranks_as_one_process(
    cluster: tuple[str, dict[str, str]], tmp_path: Path, toy_bundle: object, weights_root: Path
) -> None:
    address, env = cluster
    bundle_path = str(toy_bundle.path)  # type: ignore[attr-defined]
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRIVER), address, str(tmp_path / "c"),
         bundle_path, str(weights_root)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["nodes"] == 2
    assert [s["up"] for s in report["status"]] == [True, True]
    assert len({s["node"] for s in report["status"]}) == 2  # one shard worker on each node
    assert report["same"] and all(report["same"])

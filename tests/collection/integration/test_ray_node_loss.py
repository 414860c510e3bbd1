"""A node lost under load (its raylet killed with SIGKILL) on a real two-node Ray cluster on
this machine, two copies of every shard, one on each node: no answer is degraded — the copy
on the other node answers within the same request — and the lost copies are started again on
the node alive — by the spare workers waiting there, which adopt their shards — so every
shard is whole again (a copy pinned to a dead node once stayed unschedulable for good). The
driver runs in its own process, as in test_ray_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collection.integration import clusters
from tests.collection.integration.clusters import Node

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Node]]:
    with clusters.two_nodes(tmp_path) as cluster:
        yield cluster


DRIVER = """
import json, os, signal, sys, time
from pathlib import Path
import ray
from service.collection import Collection, SnapshotSearcher, build_collection
from service.collection.distributed import RaySearcher
from service.index.build import build_params
from service.mt.bundle import load_bundle
from service.retrieval.query import decode_query
from tests.collection.test_live import QUERIES
from tests.collection.test_live import toy_corpus

address, out, bundle_path, state_root = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
node_pid = int(sys.argv[5])
build_collection(toy_corpus(), out, build_params("docs"), shards=2)
coll = Collection(out)
bundle = load_bundle(bundle_path, state_root=state_root)
ray.init(address=address, log_to_driver=False)
deadline = time.monotonic() + 120
while time.monotonic() < deadline and sum(1 for n in ray.nodes() if n.get("Alive")) < 2:
    time.sleep(0.5)
events = []
searcher = RaySearcher(coll, bundle, address=address, timeout_s=30, isolate=False,
                       on_event=lambda kind, shard, n: events.append((kind, shard)))
router = searcher.driver.router

head_node = ray.get_runtime_context().get_node_id()  # the driver's: the node that stays
killed = False

def whole():
    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    if killed:  # the cluster may not know yet that the node is gone: the head is what is left
        alive = {head_node}
    return all(c.state == "up" and c.node in alive for cs in router.copies for c in cs)

while not whole() and time.monotonic() < deadline:
    searcher.status(5)
    time.sleep(0.2)
# the spares the node that stays keeps to adopt lost copies (started once the copies are up)
while (sum(c.state == "up" for c in router.spares.get(head_node, [])) < router.spares_per_node
       and time.monotonic() < deadline):
    time.sleep(0.2)
spares = sum(c.state == "up" for c in router.spares.get(head_node, []))
before = [[c.node for c in cs] for cs in router.copies]
local = SnapshotSearcher(bundle)
qs = [decode_query(bundle.decoder(), t, "de", qid=f"q{i}") for i, t in enumerate(QUERIES)]
want = [[(h.doc_id, h.score) for h in local.rank(coll.snapshot, "bowfd", q, 10)[0].hits]
        for q in qs]

def ask(i):
    t0 = time.perf_counter()
    got, _, failed = searcher.rank(coll.snapshot, "bowfd", qs[i % len(qs)], 10)
    same = [(h.doc_id, h.score) for h in got.hits] == want[i % len(qs)]
    return failed, same, time.perf_counter() - t0

for i in range(8):
    ask(i)
raylets = [int(p) for p in os.listdir("/proc") if p.isdigit()
           and Path(f"/proc/{p}/stat").exists()
           and Path(f"/proc/{p}/stat").read_text().split(") ")[-1].split()[1] == str(node_pid)
           and "raylet" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
os.kill(raylets[0], signal.SIGKILL)
t_kill = time.monotonic()
killed = True
answers, whole_at = [], None
while time.monotonic() - t_kill < 90:
    failed, same, seconds = ask(len(answers))
    answers.append({"failed": failed, "same": same, "seconds": seconds})
    if whole_at is None and whole():
        whole_at = time.monotonic() - t_kill
    if whole_at is not None and len(answers) >= 20:
        break
after = [[c.node for c in cs] for cs in router.copies]
adopted = [c.name for cs in router.copies for c in cs if "-spare-" in c.name]
report = {"before": before, "after": after, "answers": answers, "whole_at": whole_at,
          "spares": spares, "adopted": adopted,
          "events": events, "alive": len([n for n in ray.nodes() if n.get("Alive")])}
print("REPORT " + json.dumps(report))
searcher.close()
"""


def test_a_lost_node_costs_no_answer_and_its_copies_come_back(
    two_nodes: tuple[str, dict[str, str], Node], tmp_path: Path, toy_bundle: object,
    weights_root: Path,
) -> None:  # fmt: skip
    address, env, node = two_nodes
    assert node.proc is not None
    bundle_path = str(toy_bundle.path)  # type: ignore[attr-defined]
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRIVER), address, str(tmp_path / "c"),
         bundle_path, str(weights_root), str(node.proc.pid)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    assert all(len(set(nodes)) == 2 for nodes in report["before"])  # a copy on each node
    answers = report["answers"]
    degraded = [a for a in answers if a["failed"]]
    assert all(a["same"] for a in answers)  # in process or not, the same ranking
    assert len(degraded) <= 1, degraded  # at most the request in flight at the kill
    assert report["whole_at"] is not None, report  # every copy up on the node alive
    assert all(len(set(nodes)) == 1 for nodes in report["after"]), {
        k: report[k] for k in ("before", "after", "events", "whole_at", "alive")
    }
    # the two lost copies, each once; at most one more per shard: a copy on the node alive
    # whose call failed in the turmoil gets a standby, which may answer before it does
    assert 2 <= sum(kind == "replacement" for kind, _ in report["events"]) <= 4
    # both lost copies adopted by the spares waiting on the node alive (no bundle loaded)
    assert report["spares"] == 2 and len(report["adopted"]) >= 2, report["adopted"]
    slowest = max(a["seconds"] for a in answers)
    print(
        f"\nnode lost: {len(answers)} answers, {len(degraded)} degraded, slowest "
        f"{slowest:.2f} s; whole again {report['whole_at']:.1f} s after the kill"
    )

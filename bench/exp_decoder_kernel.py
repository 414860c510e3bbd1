"""Experiment: the cube-pruning kernel before and after its rewrite with named tuples and
inlined helpers (issue "A structure that is checked, not remembered", item 4), timed in one
process, with identical forests asserted.

The old kernel is the file ``service/mt/cube_kernel.py`` of an export of the revision before
the rewrite (``--before``, default ``/tmp/before``; ``git archive 74cf2e4``), loaded under
another module name with :func:`importlib.util.spec_from_file_location` — its own imports
(the LM kernels) resolve to this checkout, which did not change them. The new one is
:func:`service.mt.decoder.kernel.decode_chart`. Both get the same inputs, prepared once per
sentence by :meth:`service.mt.decoder.compiled.CompiledDecoder.prepare` (the old kernel takes
them as its 30 positional arguments), for the sentences of the first ``--queries`` dev queries
of ``clir/lohelp-<src>/queries.dev.tsv`` (split as a search reads them,
:func:`service.retrieval.query.decoder_sentences`), at the bundle's active weights and the
default search (pop limit 200).

1. **Identity**: every sentence's kernel outputs are compared array by array (dtypes included;
   the best score bit for bit), and the forests :meth:`CompiledDecoder.finish` makes of them
   with :func:`tests.mt.test_compiled_decoder.arrays_difference` and ``forest_difference``
   (node and edge objects, every feature value). Any difference stops the run.
2. **Speed**: ``--rounds`` rounds, each timing all sentences with one kernel then the other,
   the order alternating between rounds (A/B, B/A, …) so that drift of a shared machine falls
   on both; the time of a round is the sum of its kernel calls (``perf_counter`` around each
   call; the collector is run before each pass). Reported: the median, the minimum and every
   round's total per kernel, the ratio new/old of the medians and of the minima, and each
   round's own ratio (the two passes of a round ran back to back) with their median.

Numba's cache goes to ``--numba-cache`` (default ``/tmp/numba-cache-exp-decoder-kernel``) so
that nothing is written into the export. Writes ``bench/results/kernel_refactor_decoder.json``.
Run (from a checkout with the full models, e.g. the main one)::

    PYTHONPATH=<this checkout> .venv/bin/python <this checkout>/bench/exp_decoder_kernel.py \\
        --model models/de-en
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

OUT_NAME = "kernel_refactor_decoder.json"


def load_old_kernel(before: Path) -> ModuleType:
    """The old kernel, ``before/service/mt/cube_kernel.py``, as module ``cube_kernel_before``."""
    path = before / "service" / "mt" / "cube_kernel.py"
    spec = importlib.util.spec_from_file_location("cube_kernel_before", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot load the old kernel")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def old_arguments(inputs: Any) -> tuple[Any, ...]:
    """The new kernel's named-tuple inputs as the old kernel's 30 positional arguments."""
    search, m, o, t, p, w, lm = inputs
    return (
        search.n, search.max_span, search.pop_limit, lm.use,
        m.start, m.end, m.gaps, m.optlo, m.nopt,
        o.rule, o.score, o.oov,
        t.symbols, t.offsets, t.rule_target,
        p.word, p.oov,
        w.pass_through, w.glue, w.lm, w.oov,
        lm.h, lm.bos, lm.eos, lm.base, lm.extra, lm.ngrams, lm.structure, lm.minimise,
        search.all_rules,
    )  # fmt: skip


def as_chart(out: tuple[Any, ...]) -> Any:
    """The old kernel's 17 outputs as the new kernel's :class:`~service.mt.decoder.kernel.Chart`."""
    from service.mt.decoder import kernel as K

    return K.Chart(K.ChartNodes(*out[:6]), K.ChartEdges(*out[6:14]), *out[14:])


def chart_difference(old: Any, new: Any) -> str | None:
    """The first difference between two kernel outputs, or None."""
    import numpy as np

    for part in ("nodes", "edges"):
        a, b = getattr(old, part), getattr(new, part)
        for name in a._fields:
            u, v = getattr(a, name), getattr(b, name)
            if u.dtype != v.dtype or not np.array_equal(u, v):
                return f"{part}.{name} differ ({u.dtype}, {v.dtype})"
    if float(old.best).hex() != float(new.best).hex():
        return f"best {float(old.best).hex()} vs {float(new.best).hex()}"
    if (int(old.pops), int(old.minus_lm_nodes)) != (int(new.pops), int(new.minus_lm_nodes)):
        return "pops or -LM node counts differ"
    return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, default=Path("/tmp/before"))
    ap.add_argument("--model", default="models/de-en")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--numba-cache", default="/tmp/numba-cache-exp-decoder-kernel")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    os.environ["NUMBA_CACHE_DIR"] = args.numba_cache  # before numba is imported

    from bench.common import DATA, RESULTS_DIR, bundle_signature, write_result
    from service.data import load_queries
    from service.mt.bundle import load_bundle
    from service.mt.decoder import DecoderConfig
    from service.mt.decoder import kernel as new
    from service.mt.decoder.compiled import CompiledDecoder
    from service.retrieval.query import decoder_sentences
    from tests.mt.test_compiled_decoder import arrays_difference, forest_difference

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    old = load_old_kernel(args.before)
    bundle = load_bundle(args.model)
    dec = bundle.decoder(DecoderConfig())
    assert isinstance(dec, CompiledDecoder)
    queries = load_queries(DATA / "clir" / f"lohelp-{bundle.src}" / "queries.dev.tsv")
    qids = sorted(queries)[: args.queries]
    sentences = [s for q in qids for s in decoder_sentences(dec, queries[q], bundle.src)]
    log(f"{len(qids)} queries, {len(sentences)} sentences, {sum(map(len, sentences))} tokens")
    inputs = [dec.prepare(s).inputs for s in sentences]
    flat = [old_arguments(x) for x in inputs]

    # 1. identity (compiles or loads both kernels first)
    t0 = time.perf_counter()
    old.decode_chart(*flat[0])
    log(f"old kernel ready in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    new.decode_chart(*inputs[0])
    log(f"new kernel ready in {time.perf_counter() - t0:.1f} s")
    nodes = edges = 0
    for s, x, f in zip(sentences, inputs, flat, strict=True):
        a, b = as_chart(old.decode_chart(*f)), new.decode_chart(*x)
        diff = chart_difference(a, b)
        fa, fb = dec.finish(dec.prepare(s), a), dec.finish(dec.prepare(s), b)
        diff = diff or arrays_difference(fa, fb) or forest_difference(fa, fb)
        if diff is not None:
            raise SystemExit(f"{' '.join(s)}: {diff}")
        nodes += fa.hypergraph.num_nodes
        edges += fa.hypergraph.num_edges
    log(f"identical: {len(sentences)} forests, {nodes} nodes, {edges} edges (pruned)")

    # 2. speed, A/B in alternating order
    def one_pass(kernel: Any, args_list: list[tuple[Any, ...]]) -> float:
        gc.collect()
        total = 0.0
        for a in args_list:
            t = time.perf_counter()
            kernel.decode_chart(*a)
            total += time.perf_counter() - t
        return total

    times: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for name in order:
            kernel, arg = (old, flat) if name == "old" else (new, inputs)
            times[name].append(one_pass(kernel, arg))
        log(f"round {r + 1}: old {times['old'][-1]:.3f} s, new {times['new'][-1]:.3f} s")
    med = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    paired = [b / a for a, b in zip(times["old"], times["new"], strict=True)]
    result = {
        "what": "decode_chart before (30 positional arguments, one 523-line body) and after "
        "(named tuples, helpers per cell): the same inputs, identical outputs and forests",
        "model": bundle.name,
        "before": str(args.before / "service" / "mt" / "cube_kernel.py"),
        "queries": len(qids),
        "sentences": len(sentences),
        "tokens": sum(map(len, sentences)),
        "forest_nodes": nodes,
        "forest_edges": edges,
        "identical": True,
        "rounds": args.rounds,
        "median_s": {k: round(v, 4) for k, v in med.items()},
        "min_s": {k: round(v, 4) for k, v in low.items()},
        "ratio_new_over_old_median": round(med["new"] / med["old"], 3),
        "ratio_new_over_old_min": round(low["new"] / low["old"], 3),
        "ratio_new_over_old_per_round": [round(r, 3) for r in paired],
        "ratio_new_over_old_per_round_median": round(statistics.median(paired), 3),
        "rounds_new_slower": sum(r > 1 for r in paired),
        "rounds_s": {k: [round(x, 4) for x in v] for k, v in times.items()},
        "ms_per_sentence_median": {k: round(1000 * v / len(sentences), 3) for k, v in med.items()},
    }
    out = args.out or RESULTS_DIR / OUT_NAME
    write_result(out, result, vars(args), signatures={"model": bundle_signature(bundle)})
    log(
        f"median old {med['old']:.3f} s, new {med['new']:.3f} s, "
        f"new/old {result['ratio_new_over_old_median']} (min: {result['ratio_new_over_old_min']}"
        f", per round: {result['ratio_new_over_old_per_round_median']}) -> {out}"
    )


if __name__ == "__main__":
    main()

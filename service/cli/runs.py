"""``clir eval-run`` and ``compare-runs``: evaluate TREC run files against TREC qrels, and
compare two with paired significance tests (:mod:`service.evaluation`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from service.cli.common import VerbAdder


def register(verb: VerbAdder) -> None:
    """The run-file verbs, in the order ``clir --help`` lists them."""
    _add_eval_run(verb)
    _add_compare_runs(verb)


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, default=1000, help="ranking depth (default 1000)")
    p.add_argument("--metrics", help="comma-separated metric names (default: the CLIR set)")
    p.add_argument(
        "--on-error",
        choices=["fail", "skip"],
        default="fail",
        help="malformed input lines: fail, or skip and report the count on stderr",
    )


def _add_eval_run(verb: VerbAdder) -> None:
    p = verb("eval-run", "Evaluate a TREC run file against TREC qrels.", _cmd_eval_run)
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_eval_flags(p)


def _cmd_eval_run(args: argparse.Namespace) -> int:
    from service.data import load_qrels, load_run
    from service.evaluation import CLIR_METRICS, evaluate

    start = time.perf_counter()
    qrels = load_qrels(args.qrels, on_error=args.on_error)
    run = load_run(args.run, on_error=args.on_error)
    metrics = args.metrics.split(",") if args.metrics else CLIR_METRICS
    result = evaluate(run, qrels, metrics=metrics, depth=args.depth)
    if result.unjudged_run_queries:
        print(
            f"note: {len(result.unjudged_run_queries)} run queries have no judgments and "
            "were ignored",
            file=sys.stderr,
        )
    payload = result.as_json()
    payload["seconds"] = round(time.perf_counter() - start, 3)
    if args.json:
        print(json.dumps(payload, sort_keys=True))
    else:
        for name, value in payload.items():
            print(f"{name:<14}{value}")
    return 0


def _add_compare_runs(verb: VerbAdder) -> None:
    p = verb(
        "compare-runs",
        "Compare two runs: per-metric deltas (B - A) with paired p-values.",
        _cmd_compare_runs,
    )
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("run_a", type=Path, metavar="A.run")
    p.add_argument("run_b", type=Path, metavar="B.run")
    p.add_argument("--permutations", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    _add_eval_flags(p)


def _cmd_compare_runs(args: argparse.Namespace) -> int:
    from service.data import load_qrels, load_run
    from service.evaluation import CLIR_METRICS, bootstrap_test, evaluate, randomization_test

    qrels = load_qrels(args.qrels, on_error=args.on_error)
    metrics = args.metrics.split(",") if args.metrics else list(CLIR_METRICS)
    a = evaluate(load_run(args.run_a, on_error=args.on_error), qrels, metrics, depth=args.depth)
    b = evaluate(load_run(args.run_b, on_error=args.on_error), qrels, metrics, depth=args.depth)
    rows = []
    for m in metrics:
        pa, pb = a.per_query[m], b.per_query[m]
        rows.append(
            {
                "metric": m,
                "a": round(a.means[m], 6),
                "b": round(b.means[m], 6),
                "delta": round(b.means[m] - a.means[m], 6),
                "p_randomization": randomization_test(pb, pa, args.permutations, args.seed),
                "p_bootstrap": bootstrap_test(pb, pa, args.permutations, args.seed),
            }
        )
    if args.json:
        print(json.dumps({"queries": a.queries, "metrics": rows}))
    else:
        print(f"A = {args.run_a}\nB = {args.run_b}\nqueries = {a.queries}")
        print(f"{'metric':<13}{'A':>9}{'B':>9}{'B-A':>9}{'p(rand)':>10}{'p(boot)':>10}")
        for r in rows:
            print(
                f"{r['metric']:<13}{r['a']:>9.4f}{r['b']:>9.4f}{r['delta']:>+9.4f}"
                f"{r['p_randomization']:>10.4f}{r['p_bootstrap']:>10.4f}"
            )
    return 0

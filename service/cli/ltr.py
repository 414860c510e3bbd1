"""``clir train-ltr``: learn BOW-FD ranking weights from relevance judgments
(:mod:`service.ltr`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from service.cli.common import Registry, VerbAdder


def register(verb: VerbAdder) -> None:
    """The learning-to-rank verb."""
    _add_train_ltr(verb)


def _ltr_objectives() -> Iterable[str]:
    from service.ltr.objectives import OBJECTIVES

    return OBJECTIVES


def _ltr_backends() -> Iterable[str]:
    from service.ltr.backends import BACKENDS

    return BACKENDS


_OBJECTIVES = Registry(_ltr_objectives)
_BACKENDS = Registry(_ltr_backends)


def _add_train_ltr(verb: VerbAdder) -> None:
    p = verb("train-ltr", "Learn ranking weights from relevance judgments.", _cmd_train_ltr)
    for flag in ("--model", "--index", "--queries", "--qrels", "--dev-queries", "--dev-qrels"):
        p.add_argument(flag, type=Path, required=True)
    p.add_argument("--objective", choices=_OBJECTIVES, help="default: listmle-te")
    p.add_argument("--shards", type=int, default=1, help="shards for parameter mixing")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--patience", type=int, default=3, help="epochs without a better dev MAP")
    p.add_argument(
        "--backend", choices=_BACKENDS, help="default: inline for 1 shard, "
        "else the ltr_backend setting"
    )  # fmt: skip
    p.add_argument(
        "--freeze-smt",
        action=argparse.BooleanOptionalAction,
        help="learn only the IR (and LEX) weights (default: on)",
    )
    p.add_argument(
        "--lex",
        action=argparse.BooleanOptionalAction,
        help="add and learn sparse LEX features (default: on)",
    )
    p.add_argument(
        "--no-ir-terms", action="store_true", help="learn only v, no per-term IR weights"
    )
    p.add_argument("--v", type=float, default=1.0, help="starting IR weight (if none is set)")
    p.add_argument("--candidates", type=int, default=100, help="top BOW-FD documents per query")
    p.add_argument("--limit", type=int, help="use only the first N training queries")
    p.add_argument("--dev-limit", type=int, help="use only the first N dev queries")
    p.add_argument("--pop-limit", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--holdout",
        type=float,
        help="share of the training queries held out (whole pages or groups) to measure the "
        "learned weights on; 0: none (default 0.2)",
    )
    p.add_argument("--groups", type=Path, help="qid<TAB>group file for the hold-out")
    p.add_argument(
        "--activate",
        action="store_true",
        help="activate the new weights version if it gains on the held-out queries",
    )
    p.add_argument("--rho", type=float, help="Adadelta decay (default 0.95)")
    p.add_argument("--eps", type=float, help="Adadelta epsilon (default 1e-6)")
    p.add_argument("--rate", type=float, help="perceptron step, relative (default 0.01)")
    p.add_argument("--tau", type=float, help="perceptron margin (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _cmd_train_ltr(args: argparse.Namespace) -> int:
    from service.core.progress import ConsoleContext
    from service.core.settings import get_settings
    from service.jobs.tasks import ltr_setup
    from service.ltr.task import train_ltr

    params = dict(
        model=args.model, index=args.index, queries=args.queries, qrels=args.qrels,
        dev_queries=args.dev_queries, dev_qrels=args.dev_qrels,
        shards=args.shards, epochs=args.epochs, patience=args.patience, backend=args.backend,
        ir_terms=not args.no_ir_terms, v=args.v,
        candidates=args.candidates,
        limit=args.limit, dev_limit=args.dev_limit, pop_limit=args.pop_limit, seed=args.seed,
        groups=args.groups, activate=args.activate,
    )  # fmt: skip
    # learning settings: only those given, so that LtrParams holds the one set of defaults
    learning = {
        k: getattr(args, k)
        for k in ("objective", "freeze_smt", "lex", "holdout", "rho", "eps", "rate", "tau")
    }
    params.update({k: v for k, v in learning.items() if v is not None})
    ctx = ConsoleContext(enabled=not args.quiet)
    try:
        result = train_ltr(params, ctx, setup=ltr_setup(get_settings()))
    finally:
        ctx.close()
    print(json.dumps(result.to_json(), sort_keys=True))
    return 0

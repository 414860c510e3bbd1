"""``clir train-model``, ``build-demo`` and ``tune``: build a translation model bundle and tune
its log-linear weights (:mod:`service.mt.training`, :mod:`service.mt.tuning`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from service.cli.common import Registry, VerbAdder


def register(verb: VerbAdder) -> None:
    """The model verbs, in the order ``clir --help`` lists them."""
    _add_train_model(verb)
    _add_build_demo(verb)
    _add_tune(verb)


def _add_train_model(verb: VerbAdder) -> None:
    p = verb("train-model", "Train a Hiero model bundle (grammar + LM).", _cmd_train_model)
    p.add_argument("--parallel", type=Path, required=True, help="origin<TAB>foreign<TAB>english")
    p.add_argument("--lm-text", type=Path, required=True, help="English text, one line each")
    p.add_argument("--src", required=True, choices=["de", "zh"])
    p.add_argument("--tgt", default="en", choices=["en"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--limit", type=int, help="use only the first N sentence pairs")
    p.add_argument("--lm-limit", type=int, help="use only the first N LM text lines")
    p.add_argument(
        "--in-domain",
        action="append",
        default=[],
        metavar="PREFIX",
        help="pairs whose origin (first column) starts with PREFIX are in-domain: their own "
        "translation probabilities become two more rule features (repeatable)",
    )
    p.add_argument(
        "--domain-prior",
        type=float,
        default=1.0,
        help="weight, in sentence pairs, of the whole corpus's probabilities in the in-domain "
        "estimate",
    )
    p.add_argument(
        "--tight-target",
        action="store_true",
        help="extract no rule with an unaligned English word at an edge of its phrase",
    )
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")


def _cmd_train_model(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings
    from service.mt.training.train import TrainConfig, train_model

    config = TrainConfig(
        src=args.src,
        tgt=args.tgt,
        rule_table_limit=get_settings().rule_table_limit,
        limit=args.limit,
        lm_limit=args.lm_limit,
        in_domain=tuple(args.in_domain),
        domain_prior=args.domain_prior,
        tight_target=args.tight_target,
    )
    manifest = train_model(args.parallel, args.lm_text, args.out, config, force=args.force)
    print(json.dumps({"bundle": str(args.out), "counts": manifest["counts"]["grammar"]}))
    return 0


def _add_build_demo(verb: VerbAdder) -> None:
    p = verb("build-demo", "Build the small demo bundle from a data subset.", _cmd_build_demo)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--out", type=Path, default=Path("models/demo-de-en"))


def _cmd_build_demo(args: argparse.Namespace) -> int:
    from service.mt.training.demo import build_demo

    manifest = build_demo(args.data, args.out)
    print(json.dumps({"bundle": str(args.out), "counts": manifest["counts"]["grammar"]}))
    return 0


def _tuning_methods() -> Iterable[str]:
    from service.mt.tuning.optimizers import OPTIMIZERS

    return OPTIMIZERS


_TUNING_METHODS = Registry(_tuning_methods)


def _add_tune(verb: VerbAdder) -> None:
    p = verb("tune", "Tune the model's log-linear weights on dev data.", _cmd_tune)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--dev", type=Path, required=True, help="tr/<src>-en directory")
    p.add_argument("--pool", type=Path, help="sentence pool (default: beside --dev)")
    p.add_argument(
        "--method",
        choices=_TUNING_METHODS,
        default="listmle-te",
    )
    p.add_argument("--k", type=int, default=20, help="k-best size (20; 100 as an option)")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--patience", type=int, help="stop after N decodes without improvement")
    p.add_argument("--merge", choices=["aggregate", "merge"])
    p.add_argument("--dev-size", type=int, default=500, help="tuning sentences")
    p.add_argument("--heldout-size", type=int, default=300, help="held-out test sentences")
    p.add_argument("--max-words", type=int, default=40)
    p.add_argument("--pop-limit", type=int)
    p.add_argument("--version", help="name of the new weights version")
    p.add_argument("--start", help="weights version to start from (default: the active one)")
    p.add_argument("--activate", action="store_true", help="activate if held-out BLEU improves")


def _cmd_tune(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings
    from service.mt.bundle import load_bundle
    from service.mt.decoder import DecoderConfig
    from service.mt.tuning.data import load_dev_pairs
    from service.mt.tuning.run import default_pool, tune_bundle

    settings = get_settings()
    bundle = load_bundle(args.model, state_root=settings.weights_state_dir)
    pool = args.pool or default_pool(args.dev)
    split = load_dev_pairs(args.dev, pool, bundle.src, max_words=args.max_words)
    tune_pairs = split.tune[: args.dev_size]
    heldout = split.heldout[: args.heldout_size]
    print(f"tuning on {len(tune_pairs)} sentences, {len(heldout)} held out", file=sys.stderr)
    config = DecoderConfig(
        pop_limit=args.pop_limit or settings.pop_limit, engine=settings.decoder_engine
    )
    outcome = tune_bundle(
        bundle, tune_pairs, heldout, args.method, k=args.k, iterations=args.iterations,
        patience=args.patience, merge=args.merge, config=config, activate=args.activate,
        version=args.version, start_version=args.start,
    )  # fmt: skip
    print(
        json.dumps(
            {
                "version": outcome.version.version,
                "dev_bleu": round(outcome.result.bleu, 2),
                "heldout_bleu": round(outcome.heldout_bleu, 2),
                "activated": outcome.activated,
                "seconds": round(outcome.seconds, 1),
            }
        )
    )
    return 0

"""Learning to rank for BOW-FD (Hieber & Riezler 2015, §4, and the BOW-FD+LTR rows of their Table 1,
on our data).

Dev MAP / NDCG@1000 / PRES of BOW-FD with the bundle's active weights (IR weight v = 1
unless they carry one) and after learning to rank with each objective — SMT weights learned
("smt"), frozen ("frozen", the better choice for MAP/NDCG in Hieber & Riezler 2015, §4) and frozen
with the sparse LEX features added ("lex") — with the epoch of the best dev MAP and the paired
randomization test (:func:`service.evaluation.randomization_test`, per-query AP) against the
starting weights, and ``map_detectable``: the smallest MAP gain the dev queries could show at p <
0.05 with power 0.8, given how much that run's per-query AP differences vary
(:func:`service.evaluation.detectable_difference`).
The training queries are decoded once (with LEX columns, which stay at 0 when LEX is off) and
every configuration trains on the same examples, in one process.

Wall time of the whole training (building the examples in the workers included) for hinge with
frozen SMT weights on 1 and 2 local worker processes and 2 actors of a local Ray instance, with
the dev MAP each reaches (the goal: 2 shards within 0.005 of 1).

Early stopping must not pick the epoch on the queries it is scored on: it watches the MAP of
``--stop`` further training queries that are not trained on (the ones after the first
``--train``; ``"stop"`` holds their numbers), and every figure and p-value under ``"dev"`` is
measured on all ``--dev`` dev queries, which neither training nor stopping sees.

The training queries' pages are in the translation model's parallel data (data README §3:
95 % of the training queries contain a verbatim parallel paragraph, 3 % of the dev queries), so
the serving model translates them from memory and weights learned on their forests do not
carry over to unseen queries. Two ways around it: ``--train-model`` decodes the training and
stopping queries with a bundle built without their pages' paragraphs (the dev queries keep the
serving model), ``--jackknife DIR`` decodes each of them with the :mod:`bench.jackknife` bundle
built without its page (so no training query is lost), and ``--cv K`` cross-validates on the
dev queries themselves.

Nothing is written to the bundle. Writes ``bench/results/ltr_<lang>.json`` (or ``--out``). Run:
``nice -n 10 .venv/bin/python -m bench ltr de --train 500 --stop 150 --epochs 8``.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.common import DATA, RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from bench.jackknife import fold_of_query
from service.evaluation import detectable_difference, evaluate, randomization_test
from service.index.inverted import load_index
from service.ltr.backends import Backend, InlineBackend, make_backend
from service.ltr.examples import (
    DEV_DEPTH,
    DEV_METRICS,
    Decoding,
    DevSet,
    Selection,
    select_queries,
)
from service.ltr.shard import Shard, ShardSpec, shard_specs
from service.ltr.space import FeatureSpace
from service.ltr.task import LtrParams, start_weights
from service.ltr.trainer import Reporter, TrainOutcome, train
from service.mt.bundle import load_bundle
from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature

OBJECTIVES = ("hinge", "listnet", "listmle", "listmle-te", "perceptron")
# variant: (freeze_smt, lex, ir_terms)
VARIANTS = {
    "smt": (False, False, True),  # everything learned
    "frozen": (True, False, True),  # SMT frozen, v fixed: the per-term IR weights
    "lex": (True, True, True),  # frozen plus the LEX features
    "v": (True, False, False),  # SMT frozen, only v (no per-term IR weights)
    "dense": (False, False, False),  # SMT and v learned; no per-term IR, no LEX weights
}


def _bar(desc: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, unit=" q")


def _round(d: dict[str, float]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in d.items()}


def _load_cache(path: Path | None, key: dict[str, Any]) -> dict[str, Any] | None:
    """The decoded examples saved by an earlier run with the same queries and start."""
    if path is None or not path.exists():
        return None
    with path.open("rb") as f:
        saved = pickle.load(f)
    if saved.get("key") != key:
        print(f"{path}: built for other queries or weights; decoding again", file=sys.stderr)
        return None
    data: dict[str, Any] = saved["data"]
    return data


def _save_cache(path: Path | None, key: dict[str, Any], data: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump({"key": key, "data": data}, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def _options(args: Params, objective: str) -> dict[str, float]:
    """The objective's learning settings from ``--rho``/``--eps`` (LtrParams' rule)."""
    return LtrParams(objective=objective, rho=args.rho, eps=args.eps).objective_options()


def _jackknife_build(
    folds_dir: Path,
    shard: Shard,
    stop_sel: Selection,
    index: Any,
    start: dict[str, float],
    pop_limit: int,
) -> tuple[dict[str, Any], DevSet]:
    """Decode every training and stopping query with the jackknife bundle that never saw its
    page (:mod:`bench.jackknife`), into ``shard`` (one feature space, the spec's cyclic order)
    and one stopping set; returns the shard's stats and the stopping set."""
    k = json.loads((folds_dir / "fold-0.json").read_text())["folds"]
    dirs = [folds_dir / f"fold-{i}" for i in range(k)]
    if not all((d / "manifest.json").is_file() for d in dirs):
        raise SystemExit(f"{folds_dir}: expected the bundles fold-0..fold-{k - 1}")
    spec = shard.spec
    stop_space = FeatureSpace()
    stop_queries: list[Any] = []
    stop_failed: dict[str, str] = {}
    parts: list[dict[str, Any]] = []
    for i, d in enumerate(dirs):
        fold_bundle = load_bundle(d)
        sub = Shard(
            replace(
                spec,
                model=str(d),
                queries=tuple(q for q in spec.queries if fold_of_query(q[0], k) == i),
            ),
            fold_bundle,
            index,
        )
        sub.space = shard.space  # one feature space for all folds
        bar = _bar(f"decode train (fold {i})", len(sub.spec.queries))
        parts.append(sub.build(lambda n, _t, bar=bar: bar.update(n - bar.n)))
        bar.close()
        shard.examples.extend(sub.examples)
        fold_stop = replace(stop_sel, queries={
            q: t for q, t in stop_sel.queries.items() if fold_of_query(q, k) == i})  # fmt: skip
        dec = Decoding(fold_bundle, index, start, pop_limit=pop_limit, lex=True)
        bar = _bar(f"decode stop (fold {i})", len(fold_stop.queries))
        built = DevSet.build(dec, fold_stop, space=stop_space,
                             progress=lambda n, _t, bar=bar: bar.update(n - bar.n))  # fmt: skip
        bar.close()
        stop_queries.extend(built.queries)
        stop_failed.update(built.failed)
        del fold_bundle, dec, sub
    order = {q: n for n, (q, _) in enumerate(spec.queries)}
    shard.examples.sort(key=lambda e: order[e.qid])
    stop_order = {q: n for n, q in enumerate(stop_sel.queries)}
    stop_queries.sort(key=lambda qs: stop_order[qs[0]])
    failed = {q: m for p in parts for q, m in p["failed"].items()}
    stats = shard.summary(
        failed, sum(p["skipped"] for p in parts), sum(p["seconds"] for p in parts)
    )
    stats["folds"] = [{"queries": p["queries"], "seconds": round(p["seconds"], 1)} for p in parts]
    stop_dev = DevSet(index, stop_sel.qrels, stop_queries, stop_space, stop_failed)
    return stats, stop_dev


def cross_validate(
    args: Params,
    result: dict[str, Any],
    shard: Shard,
    spec: ShardSpec,
    dev: DevSet,
    dev_sel: Any,
    start: dict[str, float],
    base_ap: dict[str, float],
    bundle: Any,
    index: Any,
    save: Any,
) -> dict[str, Any]:
    """K-fold cross-validation of learning to rank on the dev queries.

    The translation model was trained on the parallel paragraphs of the *training* pages
    (data README §3), so it has memorised the training queries: their forests hold near-perfect
    translations, and weights learned on them do not carry over to unseen queries. The dev
    queries are unseen, like a user's. Fold ``k`` is scored by weights trained on the other
    folds but one, which stops early (patience) on that one (``k+1``); the out-of-fold rankings
    of all dev queries are pooled, evaluated together and tested against the default weights
    (paired randomization test). ``+train`` variants add the training-query examples to each
    fold's training set.
    """
    k = args.cv
    cache = args.cache.with_suffix(".cv.pkl") if args.cache else None
    key = {"dev": sorted(dev_sel.queries), "start": sorted(start.items()),
           "candidates": args.candidates, "space": len(shard.space)}  # fmt: skip
    cached = _load_cache(cache, key)
    if cached is not None:
        shard.space, dev_examples = cached["space"], cached["examples"]
    else:
        dev_spec = replace(spec, queries=tuple(dev_sel.queries.items()), qrels=dev_sel.qrels)
        builder = Shard(dev_spec, bundle, index)
        builder.space = shard.space  # one numbering for training and dev examples
        bar = _bar("decode dev examples", len(dev_spec.queries))
        builder.build(lambda d, _t: bar.update(d - bar.n))
        bar.close()
        dev_examples = builder.examples
        _save_cache(cache, key, {"space": shard.space, "examples": dev_examples})
    qids = sorted(q for q, _ in dev.queries)
    order = np.random.default_rng(0).permutation(len(qids))
    folds = [{qids[i] for i in order[j::k].tolist()} for j in range(k)]
    train_examples = list(shard.examples)
    out: dict[str, Any] = {"folds": k, "dev_examples": len(dev_examples), "runs": []}
    for run_name in args.cv_runs.split(","):
        objective, _, variant = run_name.partition(":")
        with_train = variant.endswith("+train")
        freeze, lex, ir_terms = VARIANTS[variant.removesuffix("+train")]
        options = _options(args, objective)
        pooled: dict[str, dict[str, float]] = {}
        per_fold = []
        t = time.perf_counter()
        for j in range(k):
            stop_q, test_q = folds[(j + 1) % k], folds[j]
            fit = [e for e in dev_examples if e.qid not in stop_q | test_q]
            shard.examples = fit + (train_examples if with_train else [])
            shard.configure(objective, options, freeze_smt=freeze, lex=lex, ir_terms=ir_terms)
            stop_set = dev.subset(stop_q)

            def use_stop(_rep: Reporter, stop_set: DevSet = stop_set) -> DevSet:
                return stop_set

            backend = InlineBackend(shards=[shard])
            with backend:
                outcome = train(backend, [spec], start, build_dev=use_stop, epochs=args.epochs,
                                patience=args.patience)  # fmt: skip
            pooled.update(dev.subset(test_q).run(outcome.weights))
            per_fold.append({"train": len(fit), "best_epoch": outcome.best_epoch,
                             "stop_map": round(outcome.best_metrics["map"], 4),
                             "stop_map_start": round(outcome.baseline["map"], 4)})  # fmt: skip
        shard.examples = train_examples
        ev = evaluate(pooled, dev.qrels, DEV_METRICS, depth=DEV_DEPTH)
        p = randomization_test(ev.per_query["map"], base_ap, permutations=10_000, seed=0)
        row = {
            "objective": objective,
            "variant": variant,
            "options": options,
            "dev": _round(dict(ev.means)),
            "p_value_map_vs_default": round(p, 5),
            "map_detectable": round(detectable_difference(ev.per_query["map"], base_ap), 4),
            "folds": per_fold,
            "seconds": round(time.perf_counter() - t, 1),
        }
        print(json.dumps(row), file=sys.stderr)
        out["runs"].append(row)
        result["cv"] = out
        save()
    return out


_LTR = LtrParams()  # the product's learning settings


@dataclass(frozen=True)
class Params:
    lang: Annotated[Literal["de", "zh"], Help("query language", positional=True)] = "de"
    train: Annotated[int, Help("training queries (first N)")] = 300
    stop: Annotated[
        int, Help("held-out training queries for early stopping (after the first N)")
    ] = 150
    dev: Annotated[int | None, Help("dev queries (first M; default all)")] = None
    epochs: Annotated[int, Help("epochs")] = 10
    patience: Annotated[int, Help("epochs without a better stopping MAP")] = 3
    candidates: Annotated[int, Help("candidates per query")] = 100
    objectives: Annotated[str, Help("objectives, comma-separated")] = ",".join(OBJECTIVES)
    variants: Annotated[str, Help("variants, comma-separated")] = ",".join(VARIANTS)
    runs: Annotated[
        str | None,
        Help(
            "objective:variant pairs to train (instead of objectives x variants); "
            "'none' for the backend timing only"
        ),
    ] = None
    timing: Annotated[bool, Help("the backend wall times")] = True
    out: Annotated[Path | None, Help("result file (default: results/ltr_<lang>.json)")] = None
    train_model: Annotated[
        Path | None,
        Help(
            "decode the training and stopping queries with this bundle (one built without "
            "their pages' parallel paragraphs); dev queries use the serving model"
        ),
    ] = None
    jackknife: Annotated[
        Path | None,
        Help(
            "decode each training and stopping query with the bench.jackknife bundle "
            "(DIR/fold-K) that never saw its page; dev queries use the serving model"
        ),
    ] = None
    dev_from: Annotated[Path | None, Help("take the decoded dev queries from this cache")] = None
    cv: Annotated[int, Help("K-fold cross-validation on dev (0: off)")] = 0
    cv_runs: Annotated[
        str,
        Help(
            "objective:variant pairs for --cv; a variant ending in +train also trains on the "
            "training queries"
        ),
    ] = "hinge:frozen,hinge:lex,hinge:v,perceptron:lex"
    rho: Annotated[float, Help("Adadelta decay")] = _LTR.rho
    eps: Annotated[float, Help("Adadelta epsilon")] = _LTR.eps
    cache: Annotated[
        Path | None,
        Help(
            "pickle of the decoded training, stopping and dev examples: written after "
            "decoding, reused by a later run with the same queries and starting weights"
        ),
    ] = None


def run(args: Params) -> None:
    if args.jackknife and args.train_model:
        raise SystemExit("--jackknife and --train-model exclude each other")

    lang = args.lang
    out_path = args.out or RESULTS_DIR / f"ltr_{lang}.json"
    data = DATA / "clir" / f"lohelp-{lang}"
    model = ROOT / "models" / f"{lang}-en"
    index_path = ROOT / "indexes" / "docs"
    bundle = load_bundle(model)
    index = load_index(index_path)
    signatures = {"bundle": bundle_signature(bundle), "index": index.signature()}
    active = bundle.active_weights()
    start = start_weights(active.weights, 1.0)
    pop_limit = 200
    t0 = time.perf_counter()
    all_sel = select_queries(data / "queries.train.tsv", data / "qrels.train.txt", index,
                             args.train + args.stop)  # fmt: skip
    train_sel, stop_sel = all_sel.split(args.train)
    dev_sel = select_queries(data / "queries.dev.tsv", data / "qrels.dev.txt", index, args.dev,
                             require_relevant=False)  # fmt: skip
    train_model = args.train_model or model
    train_bundle = load_bundle(train_model) if args.train_model else bundle
    (spec,) = shard_specs(train_sel, 1, model=str(train_model), index=str(index_path),
                          start=start, candidates=args.candidates, pop_limit=pop_limit,
                          lex=True)  # fmt: skip
    shard = Shard(spec, train_bundle, index)
    key = {"model": str(model), "start": active.version, "train": sorted(train_sel.queries),
           "stop": sorted(stop_sel.queries), "dev": sorted(dev_sel.queries),
           "candidates": args.candidates, "pop_limit": pop_limit}  # fmt: skip
    if args.train_model:
        key["train_model"] = str(args.train_model)
    if args.jackknife:
        key["train_model"] = f"jackknife:{args.jackknife}"
    cached = _load_cache(args.cache, key)
    if cached is not None:
        shard.space, shard.examples, stats = cached["space"], cached["examples"], cached["stats"]
        stop_dev = DevSet(index, stop_sel.qrels, *cached["stop"])
        dev = DevSet(index, dev_sel.qrels, *cached["dev"])
        dev_decode_s = cached["dev_decode_seconds"]
    else:
        if args.jackknife:
            stats, stop_dev = _jackknife_build(args.jackknife, shard, stop_sel, index, start,
                                               pop_limit)  # fmt: skip
        else:
            bar = _bar("decode train", len(spec.queries))
            stats = shard.build(lambda d, _t: bar.update(d - bar.n))
            bar.close()
            dec = Decoding(train_bundle, index, start, pop_limit=pop_limit, lex=True)
            bar = _bar("decode stop", len(stop_sel.queries))
            stop_dev = DevSet.build(dec, stop_sel, progress=lambda d, _t: bar.update(d - bar.n))
            bar.close()
        if args.dev_from:  # the dev queries decoded by the serving model, read only now
            with args.dev_from.open("rb") as f:  # (another run may still have been writing it)
                earlier = pickle.load(f)
            if any(earlier["key"][k] != key[k] for k in ("dev", "model", "start")):
                raise SystemExit(f"{args.dev_from}: other dev queries, model or weights")
            dev = DevSet(index, dev_sel.qrels, *earlier["data"]["dev"])
            dev_decode_s = earlier["data"]["dev_decode_seconds"]
            del earlier
        else:
            dec = Decoding(bundle, index, start, pop_limit=pop_limit, lex=True)
            bar = _bar("decode dev", len(dev_sel.queries))
            t_dev = time.perf_counter()
            dev = DevSet.build(dec, dev_sel, progress=lambda d, _t: bar.update(d - bar.n))
            bar.close()
            dev_decode_s = time.perf_counter() - t_dev
        _save_cache(args.cache, key, {
            "space": shard.space, "examples": shard.examples, "stats": stats,
            "stop": (stop_dev.queries, stop_dev.space, stop_dev.failed),
            "dev": (dev.queries, dev.space, dev.failed), "dev_decode_seconds": dev_decode_s,
        })  # fmt: skip
    base, base_result = dev.evaluate(start)
    stop_base, _ = stop_dev.evaluate(start)
    base_ap = base_result.per_query["map"]
    result: dict[str, Any] = {
        "lang": lang,
        "model": f"{lang}-en",
        "train_model": key.get("train_model"),
        "start_version": active.version,
        "train_queries": stats["queries"],
        "train_skipped_no_relevant_in_index": train_sel.no_relevant_in_index,
        "stop_queries": len(stop_dev.queries),
        "dev_queries": len(dev.queries),
        "dev_failed": len(dev.failed),
        "epochs": args.epochs,
        "patience": args.patience,
        "candidates_per_query": round(stats["candidates_mean"], 1),
        "features": stats["features"],
        "build": {
            "train_seconds_per_query": round(stats["seconds"] / max(1, stats["queries"]), 3),
            "dev_decode_seconds_per_query": round(dev_decode_s / max(1, len(dev.queries)), 3),
            "example_megabytes_per_query": round(stats["megabytes"] / max(1, stats["queries"]), 3),
            "dev_eval_seconds_per_query": round(base["seconds"] / max(1, len(dev.queries)), 3),
        },
        "default": _round({k: v for k, v in base.items() if k != "seconds"}),
        "stop_default": _round({k: v for k, v in stop_base.items() if k != "seconds"}),
        "runs": [],
        "timing": [],
    }

    def save() -> None:
        result["seconds"] = round(time.perf_counter() - t0, 1)
        write_result(out_path, result, args, signatures=signatures)

    def record(outcome: TrainOutcome, seconds: float, **keys: Any) -> dict[str, Any]:
        _, best = dev.evaluate(outcome.weights)
        p = randomization_test(best.per_query["map"], base_ap, permutations=10_000, seed=0)
        epochs = outcome.history
        w = outcome.weights
        delta = np.array([x for n, x in w.items() if is_ir_term_feature(n) and x != 0.0])
        return {
            **keys,
            "v": round(w[IR_FEATURE], 4),
            "ir_terms_learned": len(delta),
            "ir_delta_abs_mean": round(float(np.abs(delta).mean()), 4) if len(delta) else 0.0,
            "dev": _round({k: v for k, v in best.means.items() if k != "seconds"}),
            "stop": _round({k: v for k, v in outcome.best_metrics.items() if k != "seconds"}),
            "best_epoch": outcome.best_epoch,
            "epochs_run": len(epochs),
            "p_value_map_vs_default": round(p, 5),
            "map_detectable": round(detectable_difference(best.per_query["map"], base_ap), 4),
            "stop_map_by_epoch": [round(e.metrics["map"], 4) for e in epochs],
            "train_seconds_per_query_epoch": round(
                sum(e.seconds - e.metrics["seconds"] for e in epochs)
                / max(1, len(epochs) * stats["queries"]),
                4,
            ),
            "seconds": round(seconds, 1),
        }

    def run(backend: Backend, specs: list[ShardSpec]) -> tuple[TrainOutcome, float]:
        t = time.perf_counter()

        def use_dev(_rep: Reporter) -> DevSet:
            return stop_dev

        with backend:
            outcome = train(backend, specs, start, build_dev=use_dev, epochs=args.epochs,
                            patience=args.patience)  # fmt: skip
        return outcome, time.perf_counter() - t

    if args.runs is None:
        pairs = [(o, v) for o in args.objectives.split(",") for v in args.variants.split(",")]
    elif args.runs == "none":
        pairs = []
    else:
        pairs = [(o, v) for o, _, v in (r.partition(":") for r in args.runs.split(","))]
    for objective, variant in pairs:
        freeze, lex, ir_terms = VARIANTS[variant]
        options = _options(args, objective)
        shard.configure(objective, options, freeze_smt=freeze, lex=lex, ir_terms=ir_terms)
        outcome, seconds = run(InlineBackend(shards=[shard]), [spec])
        row = record(outcome, seconds, objective=objective, variant=variant, options=options)
        print(json.dumps(row), file=sys.stderr)
        result["runs"].append(row)
        save()

    if args.cv:  # writes result["cv"] after every run
        cross_validate(args, result, shard, spec, dev, dev_sel, start, base_ap, bundle, index,
                       save)  # fmt: skip

    if args.timing:
        for backend_name, shards in (("local", 1), ("local", 2), ("ray", 2)):
            specs = shard_specs(
                train_sel, shards, model=str(model), index=str(index_path), start=start,
                objective="hinge", candidates=args.candidates, pop_limit=pop_limit, lex=False,
                freeze_smt=True,
            )  # fmt: skip
            outcome, seconds = run(make_backend(backend_name), specs)
            row = record(outcome, seconds, objective="hinge", variant="frozen",
                         backend=backend_name, shards=shards)  # fmt: skip
            row["build_seconds"] = round(max(s["seconds"] for s in outcome.shard_stats), 1)
            row["epoch_seconds"] = [round(e.seconds, 1) for e in outcome.history]
            print(json.dumps(row), file=sys.stderr)
            result["timing"].append(row)
            save()
    save()
    print(json.dumps({"out": str(out_path), "seconds": result["seconds"]}))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("ltr")

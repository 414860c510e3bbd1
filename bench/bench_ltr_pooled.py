"""Learning to rank measured on thousands of unseen queries: K-fold cross-validation over the
judged training queries, each decoded by the jackknifed bundle that never saw its page
(Hieber & Riezler 2015, §4 for the learning, §5 for the test; :mod:`service.ltr.protocol`).

Input: the examples written by :mod:`bench.ltr_examples` (one file per language and form).
Folds group the queries by page (``--groups page``) or by linked pages (``linked``: pages
whose queries judge each other 2, transitively). Round ``j`` trains on ``K − 2`` folds, stops
early on fold ``j + 1`` and ranks fold ``j`` by BOW-FD at depth 1000; the ranked folds are
pooled and compared with the starting weights' rankings of the same queries: MAP, NDCG@1000,
PRES, the paired randomization test (10,000 permutations) and the smallest MAP difference the
queries could show (power .8, α = .05 and .01). The dev check: one more run trained on all
folds but one (which it stops on), scored on the dev queries decoded by the serving bundle.

Early stopping watches the MAP of the stopping fold's *candidate lists* (the top 100 under the
starting weights plus the judged documents, reranked by the current weights): the same
candidates training sees, 20× cheaper than a depth-1000 ranking per epoch. ``--stop-by
ranking`` stops on the depth-1000 BOW-FD MAP instead (the admin job's criterion).

A run is ``objective:variant`` with optional ``:option=value`` parts, e.g. ``hinge:lex``,
``hinge:frozen:pairs=grades``, ``hinge:lex:l2=0.001``, ``hinge:smt:start=untuned`` (SMT
weights start from the bundle's untuned ``default`` version instead of the tuned ones; the
comparison stays against the tuned weights, which the product serves). Variants as in
``bench_ltr``: ``smt`` (everything learned), ``frozen`` (SMT frozen; per-term IR weights),
``lex`` (frozen + LEX), ``v`` (only the IR weight v).

Writes (merging, under a lock, so batches in several processes can share it)
``bench/results/ltr_pooled_<lang>.json``: ``forms.<form>.runs`` / ``in_sample``; ``--merge
FILES`` folds result files of batches written elsewhere (``--out``) into it; ``--default RUN``
sets the top-level keys (``queries``, ``objective``, ``map_default``, ``map_learned``,
``p_map``, ``detectable``, ``dev_map_default``, ``dev_map_learned``; the short form's under
``short``) from that run's rows. ``--table FILES`` prints bench/README.md's table. Run::

    nice -n 10 .venv/bin/python -m bench ltr-pooled de --examples var/ltr/de-short.pkl \\
        --runs hinge:lex,listmle-te:lex --folds 5
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.bench_ltr import VARIANTS
from bench.common import RESULTS_DIR, ROOT, Help, stamp, write_result
from bench.ltr_examples import FORMS, load
from service.evaluation import evaluate
from service.index.inverted import load_index
from service.ltr.backends import InlineBackend
from service.ltr.examples import DevSet, QueryExample
from service.ltr.protocol import (
    DEPTH,
    METRICS,
    compare_runs,
    cv_rounds,
    grouped_folds,
    linked_groups,
    page_groups,
)
from service.ltr.shard import Shard, ShardSpec
from service.ltr.space import FeatureSpace
from service.ltr.task import LtrParams
from service.ltr.trainer import Reporter, train
from service.mt.bundle import WEIGHTS_DIR
from service.mt.weights import WeightsStore
from service.records import RunDict
from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature
from service.retrieval.lex import is_lex_feature


@dataclass
class CandidateSet:
    """Stopping queries scored on their candidate lists: ``evaluate`` reranks each query's
    candidates by ``Φ · w`` (the features training computes) and returns MAP, NDCG and PRES
    over them, as :meth:`DevSet.evaluate` does over the depth-1000 ranking."""

    examples: list[QueryExample]
    space: FeatureSpace
    qrels: dict[str, dict[str, int]]
    doc_id: Any  # docno -> document id

    def evaluate(
        self, weights: dict[str, float], check: Any = None
    ) -> tuple[dict[str, float], Any]:
        t0 = time.perf_counter()
        w = self.space.vector(weights)
        run: RunDict = {}
        for ex in self.examples:
            scores = ex.features(w, len(w)) @ w
            pairs = zip(ex.docnos.tolist(), scores.tolist(), strict=True)
            run[ex.qid] = {self.doc_id(int(d)): float(s) for d, s in pairs}
        sub = {q: self.qrels[q] for q in run}
        result = evaluate(run, sub, METRICS, depth=DEPTH)
        metrics = dict(result.means)
        metrics["seconds"] = time.perf_counter() - t0
        return metrics, result


def parse_run(text: str) -> tuple[str, str, dict[str, str]]:
    objective, variant, *rest = text.split(":")
    opts = dict(part.split("=", 1) for part in rest)
    if variant not in VARIANTS:
        raise SystemExit(f"{text}: unknown variant {variant!r} ({', '.join(VARIANTS)})")
    return objective, variant, opts


def objective_options(objective: str, opts: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = dict(LtrParams(objective=objective).objective_options())
    for name in ("l2", "rate", "tau", "rho", "eps"):
        if name in opts:
            out[name] = float(opts[name])
    if "pairs" in opts:
        out["pairs"] = opts["pairs"]
    return out


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 5)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


class Runner:
    def __init__(self, args: Params) -> None:
        self.args = args
        assert args.examples is not None, "--examples is required"
        data = load(args.examples)
        self.key = data["key"]
        self.lang, self.form = self.key["lang"], self.key["form"]
        self.index = load_index(ROOT / "indexes" / "docs")
        self.space: FeatureSpace = data["space"]
        self.start: dict[str, float] = data["start"]
        self.examples: list[QueryExample] = data["examples"]
        self.by_qid = {e.qid: e for e in self.examples}
        self.qrels = {q: data["train_qrels"][q] for q in self.by_qid}
        self.stats = data["stats"]
        self.texts: dict[str, str] = data["train_queries"]
        self._cols: dict[str, Any] = {}
        dev_queries, dev_qrels, _ = data["dev"]
        self.dev = DevSet(self.index, dev_qrels, dev_queries, self.space)
        self.all = DevSet(self.index, self.qrels,
                          [(e.qid, e.sentences) for e in self.examples], self.space)  # fmt: skip
        groups = (linked_groups if args.groups == "linked" else page_groups)(self.qrels)
        self.group_sizes = np.bincount(np.unique(list(groups.values()), return_counts=True)[1])
        self.folds = grouped_folds(groups, args.folds)
        t = time.perf_counter()
        self.base = self.all.run(self.start)
        self.base_seconds = time.perf_counter() - t
        self.dev_base = self.dev.run(self.start)
        store = WeightsStore(ROOT / "models" / f"{self.lang}-en" / WEIGHTS_DIR)
        self.untuned = dict(store.load("default").weights)  # the bundle's untuned SMT weights

    def _columns(self, qid: str) -> Any:
        """The features that fire in a query's candidates' best derivations at the start."""
        if qid not in self._cols:
            ex = self.by_qid[qid]
            w = self.space.vector(self.start)
            self._cols[qid] = np.unique(ex.features(w, len(w)).indices)
        return self._cols[qid]

    def _stopper(self, qids: tuple[str, ...]) -> Any:
        if self.args.stop_by == "ranking":
            return self.all.subset(qids)
        return CandidateSet([self.by_qid[q] for q in qids], self.space,
                            {q: self.qrels[q] for q in qids}, self.index.doc_id)  # fmt: skip

    def fit(self, run: str, train_q: tuple[str, ...], stop_q: tuple[str, ...]) -> Any:
        objective, variant, opts = parse_run(run)
        freeze, lex, ir_terms = VARIANTS[variant]
        start = dict(self.start)
        if opts.get("start") == "untuned":
            start.update(self.untuned)
        spec = ShardSpec(0, "", "", (), {}, start)
        shard = Shard(spec)
        shard.space = self.space
        shard.examples = [self.by_qid[q] for q in train_q]
        shard.stats = {"queries": len(train_q)}
        shard.configure(objective, objective_options(objective, opts), freeze_smt=freeze,
                        lex=lex, ir_terms=ir_terms)  # fmt: skip
        if "minq" in opts:  # sparse features learn only if they fire in >= minq training queries
            assert shard.objective is not None
            counts = np.zeros(len(self.space), dtype=np.int64)
            for q in train_q:
                counts[self._columns(q)] += 1
            shard.objective.mask *= counts >= int(opts["minq"])
        stopper = self._stopper(stop_q)

        def use_stop(_rep: Reporter) -> Any:
            return stopper

        return train(InlineBackend(shards=[shard]), [spec], start, build_dev=use_stop,
                     epochs=self.args.epochs, patience=self.args.patience)  # fmt: skip

    def breakdown(self, pooled: RunDict) -> dict[str, Any]:
        """Where a run gains or loses: MAP of the page alone (relevance 3) and of the pages
        judged 2 or 3, and the AP gain by query length (thirds of the queries by length in
        whitespace tokens, characters for zh)."""
        out: dict[str, Any] = {}
        for level in (3, 2):
            qrels = {q: {d: r for d, r in j.items() if r >= level} for q, j in self.qrels.items()}
            a = evaluate(pooled, qrels, {"map": "map"}, depth=DEPTH)
            b = evaluate(self.base, qrels, {"map": "map"}, depth=DEPTH)
            out[f"map_rel{level}"] = {"default": b.means["map"], "learned": a.means["map"]}
        a = evaluate(pooled, self.qrels, {"map": "map"}, depth=DEPTH).per_query["map"]
        b = evaluate(self.base, self.qrels, {"map": "map"}, depth=DEPTH).per_query["map"]

        def length(q: str) -> int:
            text = self.texts[q]
            return len(text.replace(" ", "")) if self.lang == "zh" else len(text.split())

        qids = sorted(a, key=lambda q: (length(q), q))
        thirds = [qids[i * len(qids) // 3 : (i + 1) * len(qids) // 3] for i in range(3)]
        out["by_length"] = [
            {"queries": len(t), "length_min": length(t[0]), "length_max": length(t[-1]),
             "map_default": float(np.mean([b[q] for q in t])),
             "map_gain": float(np.mean([a[q] - b[q] for q in t]))}
            for t in thirds if t
        ]  # fmt: skip
        return out

    def in_sample(self, run: str) -> dict[str, Any]:
        """What the weight space can fit at all: trained, stopped and ranked on the same (all)
        queries. Not a measurement of generalisation — the capacity bound it is compared to."""
        t0 = time.perf_counter()
        qids = tuple(e.qid for e in self.examples)
        outcome = self.fit(run, qids, qids)
        fitted = compare_runs(self.all.run(outcome.weights), self.base, self.qrels)
        return _round({
            "run": run, "in_sample": fitted, "best_epoch": outcome.best_epoch,
            "stop_map_by_epoch": [outcome.baseline["map"]]
            + [e.metrics["map"] for e in outcome.history],
            "seconds": time.perf_counter() - t0,
        })  # fmt: skip

    def cross_validate(self, run: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        pooled: RunDict = {}
        rounds = []
        for r in cv_rounds(self.folds):
            outcome = self.fit(run, r.train, r.stop)
            pooled.update(self.all.subset(r.test).run(outcome.weights))
            rounds.append({"train": len(r.train), "stop": len(r.stop), "test": len(r.test),
                           "best_epoch": outcome.best_epoch,
                           "stop_map_by_epoch": [outcome.baseline["map"]]
                           + [e.metrics["map"] for e in outcome.history]})  # fmt: skip
        pooled_cmp = compare_runs(pooled, self.base, self.qrels)
        pooled_cmp["breakdown"] = self.breakdown(pooled)
        # the dev check: trained on every fold but the first, stopped on the first
        train_q = tuple(q for f in self.folds[1:] for q in f)
        outcome = self.fit(run, train_q, tuple(self.folds[0]))
        dev_run = self.dev.run(outcome.weights)
        dev_cmp = compare_runs(dev_run, self.dev_base, self.dev.qrels)
        w = outcome.weights
        shift = {n: w[n] - self.start.get(n, 0.0) for n in w if not is_ir_term_feature(n)}
        moved = {n: x for n, x in shift.items() if abs(x) > 1e-9}
        delta = np.array([x for n, x in w.items() if is_ir_term_feature(n) and x != 0.0])
        objective, variant, opts = parse_run(run)
        return _round({
            "run": run, "objective": objective, "variant": variant, "options": opts,
            "pooled": pooled_cmp, "rounds": rounds,
            "dev": dev_cmp, "dev_best_epoch": outcome.best_epoch,
            "final_weights_moved": summarise_moves(moved), "v": w.get(IR_FEATURE),
            "ir_terms_learned": len(delta),
            "ir_delta_abs_mean": float(np.abs(delta).mean()) if len(delta) else 0.0,
            "seconds": time.perf_counter() - t0,
        })  # fmt: skip


@dataclass(frozen=True)
class Params:
    lang: Annotated[Literal["de", "zh"], Help("query language", positional=True)] = "de"
    examples: Annotated[Path | None, Help("bench.ltr_examples output")] = None
    runs: Annotated[str, Help("runs objective:variant[:option=value], comma-separated")] = (
        "hinge:lex"
    )
    folds: Annotated[int, Help("folds")] = 5
    groups: Annotated[Literal["page", "linked"], Help("fold groups")] = "page"
    stop_by: Annotated[Literal["candidates", "ranking"], Help("early stopping on")] = "candidates"
    epochs: Annotated[int, Help("epochs")] = 10
    patience: Annotated[int, Help("epochs without a better stopping MAP")] = 3
    default: Annotated[
        str | None,
        Help(
            "the run whose figures become the file's top-level keys (its paragraph row, "
            "page groups, candidate-list stop; the short form's under 'short')"
        ),
    ] = None
    merge: Annotated[tuple[Path, ...], Help("fold these result files into --out, then stop")] = ()
    in_sample: Annotated[
        bool,
        Help("instead of cross-validating, train and rank on all queries (the capacity bound)"),
    ] = False
    out: Annotated[Path | None, Help("result file (default: results/ltr_pooled_<lang>.json)")] = (
        None
    )
    table: Annotated[tuple[Path, ...], Help("print the markdown table of these files")] = ()


def run(args: Params) -> None:
    if args.table:
        print(table(list(args.table)))
        return
    out_path = args.out or RESULTS_DIR / f"ltr_pooled_{args.lang}.json"
    if args.merge:
        for path in args.merge:
            for form, data in json.loads(path.read_text()).get("forms", {}).items():
                info = {k: v for k, v in data.items() if k not in ("runs", "in_sample")}
                for kind in ("runs", "in_sample"):
                    for row in data.get(kind, []):
                        record(out_path, form, info, kind, row)
    else:
        if args.examples is None:
            raise SystemExit("--examples is required (unless --table or --merge)")
        run_all(args, out_path)
    if args.default:
        set_default(out_path, args.default)


def run_all(args: Params, out_path: Path) -> None:
    t0 = time.perf_counter()
    runner = Runner(args)
    if runner.lang != args.lang:
        raise SystemExit(f"{args.examples} holds {runner.lang} examples, not {args.lang}")
    setup = {"folds": args.folds, "groups": args.groups, "stop_by": args.stop_by,
             "epochs": args.epochs, "patience": args.patience}  # fmt: skip
    info = {
        "examples": runner.key, "build": runner.stats,
        "fold_sizes": [len(f) for f in runner.folds],
        "group_size_counts": runner.group_sizes.tolist(),
        "base_ranking_seconds_per_query": round(runner.base_seconds / len(runner.examples), 4),
    }  # fmt: skip
    for run in args.runs.split(","):
        if args.in_sample:
            row = runner.in_sample(run)
            print(json.dumps(row), file=sys.stderr)
            row = {**row, "setup": setup, "stamp": stamp(args)}
            record(out_path, runner.form, info, "in_sample", row)
            continue
        row = runner.cross_validate(run)
        print(json.dumps({k: row[k] for k in ("run", "pooled", "dev", "seconds")}), file=sys.stderr)
        record(out_path, runner.form, info, "runs", {**row, "setup": setup, "stamp": stamp(args)})
    print(json.dumps({"out": str(out_path), "seconds": round(time.perf_counter() - t0, 1)}))


def record(out_path: Path, form: str, info: dict[str, Any], kind: str, row: dict[str, Any]) -> None:
    """Merge ``row`` (``kind``: "runs" or "in_sample"; it replaces a row of the same run and
    setup) and the form's ``info`` into the result file, under a lock: several runs may share
    the file."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(row.get("final_weights_moved"), dict):
        row = {**row, "final_weights_moved": summarise_moves(row["final_weights_moved"])}
    with open(out_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = json.loads(out_path.read_text()) if out_path.exists() else {}
        data = result.setdefault("forms", {}).setdefault(form, {})
        data.update(info)
        same = (row["run"], row["setup"])
        data[kind] = [r for r in data.get(kind, []) if (r["run"], r["setup"]) != same] + [row]
        _write(out_path, result)


def _write(path: Path, result: dict[str, Any]) -> None:
    write_result(path, result)


def summarise_moves(moved: dict[str, Any]) -> dict[str, Any]:
    """The non-per-term weights a run moved (already summarised: unchanged): the SMT weights
    and v in full, the LEX features by their count and the ten that moved most."""
    if "lex_moved" in moved:
        return moved
    lex = {n: x for n, x in moved.items() if is_lex_feature(n)}
    largest = sorted(lex.items(), key=lambda nx: (-abs(nx[1]), nx[0]))[:10]
    return {
        "dense": {n: x for n, x in moved.items() if n not in lex},
        "lex_moved": len(lex),
        "lex_largest": dict(largest),
    }


def set_default(out_path: Path, run: str) -> None:
    """The file's top-level keys: ``run``'s figures on the paragraph queries (the short form's
    under ``short``), with page groups and the candidate-list stop."""
    result = json.loads(out_path.read_text())

    def row_of(form: str) -> dict[str, Any] | None:
        rows = result.get("forms", {}).get(form, {}).get("runs", [])
        return next((r for r in rows if r["run"] == run and r["setup"]["groups"] == "page"
                     and r["setup"]["stop_by"] == "candidates"), None)  # fmt: skip

    def figures(row: dict[str, Any]) -> dict[str, Any]:
        p, d = row["pooled"], row["dev"]
        return {
            "queries": p["queries"], "map_default": p["map_default"],
            "map_learned": p["map_learned"], "p_map": p["p_map"], "detectable": p["detectable"],
            "detectable_p01": p["detectable_p01"], "dev_map_default": d["map_default"],
            "dev_map_learned": d["map_learned"], "p_dev_map": d["p_map"],
        }  # fmt: skip

    paragraph, short = row_of("paragraph"), row_of("short")
    if paragraph is None:
        raise SystemExit(f"{out_path}: no paragraph row of {run}")
    result.update({"objective": run, "form": "paragraph", **figures(paragraph)})
    if short is not None:
        result["short"] = figures(short)
    _write(out_path, result)


def table(paths: list[Path]) -> str:
    """The markdown rows of bench/README.md's pooled table, from result files."""
    lines = [
        "| lang | form | run | MAP default → learned (gain) | p | NDCG gain (p) | PRES gain (p) "
        "| detectable .05 / .01 | dev MAP gain (p) |",
        "|---|---|---|---|---:|---|---|---|---|",
    ]
    rows: list[tuple[str, str, str, str]] = []
    for path in paths:
        result = json.loads(path.read_text())
        for form, data in result.get("forms", {}).items():
            for row in data.get("runs", []):
                p, d = row["pooled"], row["dev"]
                lang = data["examples"]["lang"]
                setup = row["setup"]
                name = row["run"]
                if setup["groups"] != "page":
                    name += ", linked pages"
                if setup["stop_by"] != "candidates":
                    name += ", stop on ranking"
                rows.append((lang, form, name, (
                    f"| {lang} | {form} | {name} | {p['map_default']:.4f} → "
                    f"{p['map_learned']:.4f} ({p['map_gain']:+.4f}) | {p['p_map']:.3f} | "
                    f"{p['ndcg_gain']:+.4f} ({p['p_ndcg']:.2f}) | {p['pres_gain']:+.4f} "
                    f"({p['p_pres']:.2f}) | {p['detectable']:.4f} / {p['detectable_p01']:.4f} | "
                    f"{d['map_gain']:+.4f} ({d['p_map']:.2f}) |"
                )))  # fmt: skip
    rows.sort(key=lambda r: (r[0], FORMS.index(r[1]) if r[1] in FORMS else len(FORMS), r[2]))
    return "\n".join(lines + [r[3] for r in rows])


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("ltr-pooled")

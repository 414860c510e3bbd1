"""The ``clir`` command: one sub-command per verb (README.md, "The `clir` command").

This module only parses arguments and prints; the work is done by library modules, which
import without argparse. Progress goes to stderr, results to stdout. Domain errors print one
line (``clir: error: ...``) and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from service.errors import ClirError, ConfigurationError, InvalidInputError

# One BLAS thread per process: the heavy work is many small products, which multithreaded
# OpenBLAS slows down several times on this 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

Handler = Callable[[argparse.Namespace], int]

EXIT_ERROR = 1


# --- built verbs -------------------------------------------------------------------------


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


def _cmd_build_collection(args: argparse.Namespace) -> int:
    from service.collection import build_collection
    from service.index.build import build_params

    t0 = time.perf_counter()
    source = args.docs if args.docs is not None else args.pool
    pool = args.docs is None  # a sentence pool: token ids kept, as in its index
    if pool and args.title_weight is not None:
        raise InvalidInputError("--title-weight applies to --docs: pool sentences have no title")
    params = build_params(
        "pool" if pool else "docs", tokenizer=args.tokenizer, rsj_policy=args.rsj,
        analysis=args.analysis, title_weight=args.title_weight, limit=args.limit,
        source_name=source.name, keep_tokens=pool,
    )  # fmt: skip
    docs = _read_records(source, pool)
    if args.limit is not None:
        docs = islice(docs, args.limit)
    summary = build_collection(
        _docs_progress(docs, not args.quiet), args.out, params, shards=args.shards,
        buffer_mb=_buffer_mb(args), workers=args.workers,
    )  # fmt: skip
    payload = {
        "collection": str(args.out), "shards": args.shards, "n_docs": summary.n_docs,
        "seconds": round(time.perf_counter() - t0, 3), "analysis": params.analysis,
        "rsj": params.rsj,
    }  # fmt: skip
    print(json.dumps(payload, sort_keys=True))
    return 0


def _read_records(path: Path, pool: bool) -> Iterator[Any]:
    """Documents of a JSONL(.gz) file, or the sentences of a pool file (``id<TAB>english``)."""
    from service.data import read_docs, read_pool
    from service.records import Doc

    if pool:
        return (Doc(s.id, "", s.text, "") for s in read_pool(path))
    return iter(read_docs(path))


def _buffer_mb(args: argparse.Namespace) -> float:
    from service.settings import get_settings

    return float(args.buffer_mb if args.buffer_mb is not None else get_settings().segment_buffer_mb)


def _docs_progress(docs: Iterable[Any], enabled: bool) -> Iterator[Any]:
    from tqdm import tqdm

    yield from tqdm(docs, desc="documents", unit=" docs", file=sys.stderr, disable=not enabled)


def _cmd_docs(args: argparse.Namespace) -> int:
    from service.collection import CollectionWriter, is_collection

    if not is_collection(args.index):
        raise InvalidInputError(
            f"{args.index} is not a collection (no collection.json); build one with "
            "clir build-index --docs F --out DIR --shards S"
        )
    with CollectionWriter(args.index, buffer_mb=_buffer_mb(args), workers=args.workers) as writer:
        payload: dict[str, Any] = {"action": args.action}
        if args.action == "add":
            pool = args.docs is None
            records = _read_records(args.docs if not pool else args.pool, pool)
            payload["read"] = writer.add(_docs_progress(records, not args.quiet))
        elif args.action == "delete":
            ids = list(args.ids)
            if args.ids_file is not None:
                ids += [x.strip() for x in args.ids_file.read_text("utf-8").splitlines()]
            ids = [x for x in ids if x]
            if not ids:
                raise InvalidInputError("clir docs delete needs ids (arguments or --ids-file)")
            payload["not_found"] = writer.delete(ids)
        if args.action in ("add", "delete"):
            summary = writer.commit()
            payload.update(summary.__dict__)
        if not args.no_merge:
            payload["merged_into"] = writer.merge(max_segments=args.max_segments)
        commit = writer.commit_manifest
        payload.update(
            generation=commit.generation, n_docs=commit.n_docs, segments=len(commit.segments)
        )
    print(json.dumps(payload, sort_keys=True, default=str))
    return 0


def _cmd_build_index(args: argparse.Namespace) -> int:
    from service.index import build_docs_index, build_pool_index

    if args.shards is not None:
        return _cmd_build_collection(args)
    if args.docs is None and args.title_weight is not None:
        raise InvalidInputError("--title-weight applies to --docs: pool sentences have no title")
    extra = {"title_weight": args.title_weight} if args.docs is not None else {}
    build = build_docs_index if args.docs is not None else build_pool_index
    result = build(
        args.docs if args.docs is not None else args.pool,
        args.out,
        **extra,
        tokenizer=args.tokenizer,
        rsj_policy=args.rsj,
        analysis=args.analysis,
        limit=args.limit,
        force=args.force,
        progress=not args.quiet,
    )
    if result.skipped:
        print(
            f"{args.out}: up to date (same source checksum and settings); --force rebuilds",
            file=sys.stderr,
        )
    counts = result.manifest["counts"]
    payload = {
        "index": str(args.out),
        "skipped": result.skipped,
        "seconds": round(result.seconds, 3),
        **{k: counts[k] for k in ("n_docs", "n_terms", "n_postings", "avdl")},
        "negative_rsj_terms": counts["negative_rsj_terms"],
        "rsj": result.manifest["build"]["rsj"],
        "tokenizer": result.manifest["build"]["tokenizer"],
        "analysis": result.manifest["build"]["analysis"],
    }
    print(json.dumps(payload, sort_keys=True))
    return 0


def _cmd_train_model(args: argparse.Namespace) -> int:
    from service.mt.training.train import TrainConfig, train_model
    from service.settings import get_settings

    config = TrainConfig(
        src=args.src,
        tgt=args.tgt,
        rule_table_limit=get_settings().rule_table_limit,
        limit=args.limit,
        lm_limit=args.lm_limit,
    )
    manifest = train_model(args.parallel, args.lm_text, args.out, config, force=args.force)
    print(json.dumps({"bundle": str(args.out), "counts": manifest["counts"]["grammar"]}))
    return 0


def _cmd_translate(args: argparse.Namespace) -> int:
    from service.mt.bundle import load_bundle
    from service.mt.decoder import DecoderConfig
    from service.mt.translate import translate_text
    from service.settings import get_settings

    bundle = load_bundle(args.model)
    config = DecoderConfig(
        pop_limit=args.pop_limit or get_settings().pop_limit, use_lm=not args.no_lm
    )
    lines = [args.text] if args.text is not None else (ln.rstrip("\n") for ln in sys.stdin)
    for k, line in enumerate(lines):
        if not line.strip():
            print()
            continue
        # stdin mode: one input line -> one output line (no sentence splitting)
        result = translate_text(
            bundle, line, nbest=args.nbest, config=config, split=args.text is not None
        )
        if args.nbest == 1:
            print(" ".join(" ".join(s.best.tokens) for s in result))
            continue
        for s in result:
            for d in s.nbest:
                feats = " ".join(f"{n}={v:.4g}" for n, v in sorted(d.features.items()))
                print(f"{k} ||| {' '.join(d.tokens)} ||| {feats} ||| {d.score:.4f}")
    return 0


def _cmd_build_demo(args: argparse.Namespace) -> int:
    from service.mt.training.demo import build_demo

    manifest = build_demo(args.data, args.out)
    print(json.dumps({"bundle": str(args.out), "counts": manifest["counts"]["grammar"]}))
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from service.mt.bundle import load_bundle
    from service.mt.decoder import DecoderConfig
    from service.mt.tuning.data import load_dev_pairs
    from service.mt.tuning.run import default_pool, tune_bundle
    from service.settings import get_settings

    bundle = load_bundle(args.model)
    pool = args.pool or default_pool(args.dev)
    split = load_dev_pairs(args.dev, pool, bundle.src, max_words=args.max_words)
    tune_pairs = split.tune[: args.dev_size]
    heldout = split.heldout[: args.heldout_size]
    print(f"tuning on {len(tune_pairs)} sentences, {len(heldout)} held out", file=sys.stderr)
    config = DecoderConfig(pop_limit=args.pop_limit or get_settings().pop_limit)
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


def _cmd_serve(args: argparse.Namespace) -> int:
    from service.api.processes import serve
    from service.settings import get_settings

    settings = get_settings()
    workers = args.workers if args.workers is not None else settings.workers
    if workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, got {workers}")
    serve(settings, host=args.host, port=args.port, log_level=args.log_level, workers=workers)
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    import logging

    from service.jobs.worker import run_worker
    from service.settings import get_settings

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s worker %(process)d %(levelname)s %(message)s"
    )
    run_worker(get_settings(), once=args.once, poll_s=args.poll_s)
    return 0


def _cmd_train_ltr(args: argparse.Namespace) -> int:
    from service.ltr.task import ConsoleContext, train_ltr

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
        result = train_ltr(params, ctx)
    finally:
        ctx.close()
    print(json.dumps(result.to_json(), sort_keys=True))
    return 0


def _params(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--param key=value`` options as keyword arguments (numbers parsed)."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--param {pair!r}: expected key=value")
        value: Any = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        if raw in ("true", "false"):
            value = raw == "true"
        out[key.replace("-", "_")] = value
    return out


def _cmd_search(args: argparse.Namespace) -> int:
    from service.retrieval.explain import explanation_json
    from service.retrieval.runner import search

    ranking, index = search(
        args.model,
        args.index,
        args.method,
        args.query,
        args.k,
        use_lm=not args.no_lm,
        explain=args.explain,
        params=_params(args.param),
        feedback=_feedback(args),
    )
    if args.json:
        # the REST vocabulary (`results`, `id`); `hits` and `doc_id` repeat them for scripts
        # written against 0.1 and go in 0.2
        results = [
            {
                "rank": r,
                "id": h.doc_id,
                "doc_id": h.doc_id,
                "title": index.doc(h.docno).title,
                "score": h.score,
                **({"explanation": explanation_json(h.explanation)} if args.explain else {}),
            }
            for r, h in enumerate(ranking.hits, 1)
        ]
        payload = {
            "signature": ranking.signature,
            "info": ranking.info,
            "results": results,
            "hits": results,
            "deprecated": {"hits": "results", "doc_id": "id"},
        }
        print(json.dumps(payload))
        return 0
    print(f"# {ranking.signature}", file=sys.stderr)
    for r, h in enumerate(ranking.hits, 1):
        print(f"{r}\t{h.doc_id}\t{h.score:.4f}\t{index.doc(h.docno).title}")
        if args.explain and h.explanation is not None:
            print(f"\t{json.dumps(h.explanation.to_json(), ensure_ascii=False)}")
    return 0


def _print_metrics(payload: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(payload, sort_keys=True))
    else:
        for name, value in payload.items():
            print(f"{name:<26}{value}")


def _cmd_eval(args: argparse.Namespace) -> int:
    from service.retrieval.runner import evaluate_method

    payload = evaluate_method(
        args.model,
        args.index,
        args.method,
        args.queries,
        args.qrels,
        use_lm=not args.no_lm,
        run_out=args.run_out,
        limit=args.limit,
        progress=not args.quiet,
        params=_params(args.param),
        feedback=_feedback(args),
    )
    _print_metrics(payload, args.json)
    return 0


def _cmd_eval_tr(args: argparse.Namespace) -> int:
    from service.retrieval.runner import evaluate_tr

    payload = evaluate_tr(
        args.model,
        args.pool,
        args.queries,
        args.qrels,
        nbest=args.nbest,
        levenshtein=not args.no_levenshtein,
        limit=args.limit,
        max_candidates=args.max_candidates,
        use_lm=not args.no_lm,
        run_out=args.run_out,
        progress=not args.quiet,
    )
    _print_metrics(payload, args.json)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from service.retrieval.runner import run_topics

    payload = run_topics(
        args.model,
        args.index,
        args.method,
        args.topics,
        args.output,
        tag=args.tag,
        hits=args.hits,
        use_lm=not args.no_lm,
        limit=args.limit,
        progress=not args.quiet,
        params=_params(args.param),
        feedback=_feedback(args),
    )
    for qid, reason in payload["failed"].items():
        print(f"note: topic {qid} has no run lines: {reason}", file=sys.stderr)
    print(json.dumps(payload, sort_keys=True))
    return 0


def _cmd_weights(args: argparse.Namespace) -> int:
    from service.mt.bundle import load_bundle
    from service.retrieval.runner import load_index
    from service.retrieval.versions import NotOfferedError, activate_version
    from service.settings import get_settings

    bundle = load_bundle(args.model)
    store = bundle.weights_store
    if args.activate is not None:
        index_path = args.index or get_settings().first_existing(get_settings().doc_indexes)
        if index_path is None:
            print("note: no document index: the version is not probed", file=sys.stderr)
        index = load_index(index_path) if index_path is not None else None
        try:
            done = activate_version(bundle, args.activate, index, force=args.force)
        except NotOfferedError as exc:
            raise NotOfferedError(f"{exc} (--force activates it anyway)") from exc
        payload: dict[str, Any] = {
            "model": str(args.model),
            "version": done.record.version,
            "previous": done.previous,
            "probed": index is not None,
            "state": str(store.writable),
        }
        print(json.dumps(payload, sort_keys=True))
        return 0
    active = store.active_version()
    rows = []
    for version in store.versions():
        row: dict[str, Any] = {
            "version": version,
            "origin": store.origin(version),
            "active": version == active,
        }
        try:
            record = store.load(version)
            row.update(source=record.source, created=record.created, metrics=record.metrics)
        except ClirError as exc:
            row["error"] = str(exc)
        rows.append(row)
    if args.json:
        print(json.dumps({"model": str(args.model), "active": active,
                          "state": str(store.writable), "versions": rows}))  # fmt: skip
        return 0
    print(f"# {args.model}: new versions and the active pointer in {store.writable}")
    for row in rows:
        mark = "*" if row["active"] else " "
        what = row.get("error") or row.get("source", "")
        print(f"{mark} {row['version']:<32} {row['origin']:<7} {what}")
    return 0


# --- parser --------------------------------------------------------------------------------


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, default=1000, help="ranking depth (default 1000)")
    p.add_argument("--metrics", help="comma-separated metric names (default: the CLIR set)")
    p.add_argument(
        "--on-error",
        choices=["fail", "skip"],
        default="fail",
        help="malformed input lines: fail, or skip and report the count on stderr",
    )


def _add_feedback_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--feedback",
        action="store_true",
        help="expand the query with RM3 pseudo-relevance feedback (the method's top documents)",
    )
    p.add_argument("--feedback-docs", type=int, default=10, help="RM3: feedback documents")
    p.add_argument("--feedback-terms", type=int, default=10, help="RM3: expansion terms")
    p.add_argument(
        "--feedback-weight", type=float, default=0.5, help="RM3: the original query's share"
    )


def _feedback(args: argparse.Namespace) -> Any:
    """RM3's parameters from the feedback flags, or None without ``--feedback``."""
    if not args.feedback:
        return None
    from service.retrieval.feedback import FeedbackParams

    return FeedbackParams(args.feedback_docs, args.feedback_terms, args.feedback_weight)


def _add_param_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a scorer parameter, repeatable (e.g. PSQ: lam=0.4 lower=0 cumulative=1 nbest=1000)",
    )


class _Registry:
    """The names of a registry as argparse ``choices``, looked up when argparse first needs
    them (to check a value or print help): importing a registry imports what it registers,
    which only the verbs that use it should pay for."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._load = names
        self._names: tuple[str, ...] | None = None

    def _get(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(self._load())
        return self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __contains__(self, name: object) -> bool:
        return name in self._get()

    def __len__(self) -> int:
        return len(self._get())


def _document_methods() -> Iterable[str]:
    from service.retrieval.base import document_methods

    return document_methods()


def _tuning_methods() -> Iterable[str]:
    from service.mt.tuning.optimizers import OPTIMIZERS

    return OPTIMIZERS


def _rsj_policies() -> Iterable[str]:
    from service.index.bm25 import RsjPolicy

    return [policy.value for policy in RsjPolicy]


def _ltr_objectives() -> Iterable[str]:
    from service.ltr.objectives import OBJECTIVES

    return OBJECTIVES


def _ltr_backends() -> Iterable[str]:
    from service.ltr.backends import BACKENDS

    return BACKENDS


_METHODS = _Registry(_document_methods)
_TUNING_METHODS = _Registry(_tuning_methods)
_RSJ_POLICIES = _Registry(_rsj_policies)
_OBJECTIVES = _Registry(_ltr_objectives)
_BACKENDS = _Registry(_ltr_backends)


VerbAdder = Callable[[str, str, Handler], argparse.ArgumentParser]


def _model_verbs(verb: VerbAdder) -> None:
    """Verbs that build models and indexes: train-model, build-demo, tune, build-index."""
    p = verb("train-model", "Train a Hiero model bundle (grammar + LM).", _cmd_train_model)
    p.add_argument("--parallel", type=Path, required=True, help="origin<TAB>foreign<TAB>english")
    p.add_argument("--lm-text", type=Path, required=True, help="English text, one line each")
    p.add_argument("--src", required=True, choices=["de", "zh"])
    p.add_argument("--tgt", default="en", choices=["en"])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--limit", type=int, help="use only the first N sentence pairs")
    p.add_argument("--lm-limit", type=int, help="use only the first N LM text lines")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")

    p = verb("build-demo", "Build the small demo bundle from a data subset.", _cmd_build_demo)
    p.add_argument("--data", type=Path, default=Path("../shared/data"))
    p.add_argument("--out", type=Path, default=Path("models/demo-de-en"))

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

    p = verb("build-index", "Build an inverted BM25 index.", _cmd_build_index)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--docs", type=Path, help="documents, JSONL(.gz)")
    group.add_argument("--pool", type=Path, help="sentence pool, id<TAB>english (.gz)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--rsj",
        choices=_RSJ_POLICIES,
        default="floor",
        help="terms in more than half the documents (rsj < 0): floor rsj at 0 (default), "
        "drop their postings, or keep the negative weight",
    )
    p.add_argument("--limit", type=int, help="index only the first N records (demo subsets)")
    p.add_argument("--tokenizer", default="en", help="tokenizer name: en (default, Moses) or regex")
    p.add_argument(
        "--analysis",
        help="analysis chain: steps word, min2, stop, stem joined by '+', or none (default: "
        "the setting docs_analysis for --docs, none for --pool)",
    )
    p.add_argument(
        "--title-weight",
        type=int,
        help="how many times a document's title counts (--docs only; default: the setting "
        "docs_title_weight)",
    )
    p.add_argument("--force", action="store_true", help="rebuild even if the index is current")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--shards",
        type=int,
        help="build a collection of S shards (documents added and deleted later with clir "
        "docs; searched like an index) instead of one index",
    )
    _add_buffer_flag(p)


def _add_buffer_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes that tokenise and index documents (a collection; default 1)",
    )
    p.add_argument(
        "--buffer-mb",
        type=float,
        help="text buffered before a segment is written (bounds memory; default: the "
        "setting segment_buffer_mb)",
    )


def _collection_verbs(verb: VerbAdder) -> None:
    """Verbs that change a collection: docs add|delete|merge."""
    p = verb(
        "docs",
        "Add (or replace), delete or merge documents of a collection; each commits at once.",
        _cmd_docs,
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add documents; an id already there is replaced")
    source = add.add_mutually_exclusive_group(required=True)
    source.add_argument("--docs", type=Path, help="documents, JSONL(.gz)")
    source.add_argument("--pool", type=Path, help="pool sentences, id<TAB>english")
    delete = actions.add_parser("delete", help="delete documents by id")
    delete.add_argument("ids", nargs="*", help="document ids")
    delete.add_argument("--ids-file", type=Path, help="ids to delete, one per line")
    merge = actions.add_parser("merge", help="merge each shard's smallest segments")
    for q in (add, delete, merge):
        q.add_argument("--index", type=Path, required=True, help="the collection directory")
        q.add_argument(
            "--max-segments",
            type=int,
            default=8,
            help="merge a shard's smallest segments while it has more (default 8)",
        )
        q.add_argument("--no-merge", action="store_true", help="do not merge afterwards")
        q.add_argument("--quiet", action="store_true", help="no progress bar")
        _add_buffer_flag(q)


def _query_verbs(verb: VerbAdder) -> None:
    """Verbs that translate, search and evaluate: translate, search, eval, eval-tr."""
    p = verb("translate", "Translate text (or stdin lines) with a model.", _cmd_translate)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("text", nargs="?", help="text to translate; without it, one line per stdin line")
    p.add_argument("--nbest", type=int, default=1, help="print the N best distinct translations")
    p.add_argument("--pop-limit", type=int)
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")

    p = verb("search", "Search the document index with a foreign query.", _cmd_search)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--method", choices=_METHODS, default="bowfd")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument("--explain", action="store_true", help="print each hit's explanation")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_param_flag(p)
    _add_feedback_flags(p)

    p = verb("eval", "Evaluate a retrieval method on a query set.", _cmd_eval)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--method", choices=_METHODS, default="bowfd")
    p.add_argument("--queries", type=Path, required=True)
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("--run-out", type=Path, help="write the ranking (depth 1000) as a TREC run")
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument("--limit", type=int, help="evaluate only the first N queries")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true")
    _add_param_flag(p)
    _add_feedback_flags(p)

    p = verb("eval-tr", "Evaluate translation retrieval on a query set.", _cmd_eval_tr)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--pool", type=Path, required=True)
    p.add_argument("--queries", type=Path, required=True)
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("--nbest", type=int, choices=[1, 5, 10], default=5)
    p.add_argument("--no-levenshtein", action="store_true")
    p.add_argument(
        "--max-candidates",
        type=int,
        default=1000,
        help="per translation, re-score only the M best pool sentences by cosine (default 1000)",
    )
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument("--run-out", type=Path, help="write the top 10 per query as a TREC run")
    p.add_argument("--limit", type=int, help="evaluate only the first N queries")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true")


def _run_verbs(verb: VerbAdder) -> None:
    """Verbs over runs and weights versions."""
    p = verb(
        "run",
        "Rank every topic of a query file and write a TREC run (no judgments needed).",
        _cmd_run,
    )
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--method", choices=_METHODS, default="bowfd")
    p.add_argument(
        "--topics", "--queries", type=Path, required=True, help="topics, qid<TAB>text per line"
    )
    p.add_argument(
        "--output", "--out", type=Path, required=True, help="the run: qid Q0 docid rank score tag"
    )
    p.add_argument("--tag", help="run tag, one word (default: the method)")
    p.add_argument("--hits", type=int, default=1000, help="documents per topic (default 1000)")
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument("--limit", type=int, help="run only the first N topics")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_param_flag(p)
    _add_feedback_flags(p)

    p = verb(
        "weights",
        "List a model's weights versions, or activate one (checked to serve first).",
        _cmd_weights,
    )
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--activate", metavar="VERSION", help="make this version the active one")
    p.add_argument(
        "--force",
        action="store_true",
        help="activate a learned version that did not gain on its held-out queries",
    )
    p.add_argument(
        "--index",
        type=Path,
        help="document index to probe the version with (default: the first configured one)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = verb("eval-run", "Evaluate a TREC run file against TREC qrels.", _cmd_eval_run)
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_eval_flags(p)

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


def _service_verbs(verb: VerbAdder) -> None:
    """Learning to rank and the service: train-ltr, serve, worker."""
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

    p = verb("serve", "Run the web service.", _cmd_serve)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--workers", type=int, help="API processes, one per core (default: CLIR_WORKERS, 1)"
    )

    p = verb("worker", "Run the background job worker (training jobs).", _cmd_worker)
    p.add_argument("--once", action="store_true", help="Run at most one queued job, then exit.")
    p.add_argument("--poll-s", type=float, default=None, help="Seconds between queue polls.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clir", description="Cross-lingual retrieval with bag-of-words forced decoding."
    )
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        return p

    for add in (_model_verbs, _collection_verbs, _query_verbs, _run_verbs, _service_verbs):
        add(verb)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except ClirError as exc:
        print(f"clir: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("clir: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``clir translate``, ``search``, ``eval``, ``eval-tr`` and ``run``: a model's translations, a
retrieval method's rankings, and their evaluation on a query set
(:mod:`service.mt.translate`, :mod:`service.runs`). The settings reach them as arguments: the
weights state, the decoder's search and the n-best time budget (:func:`_run_setup`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.common import Registry, VerbAdder
from service.errors import InvalidInputError

if TYPE_CHECKING:
    from service.runs import RunSetup


def register(verb: VerbAdder) -> None:
    """The query verbs, in the order ``clir --help`` lists them."""
    _add_translate(verb)
    _add_search(verb)
    _add_eval(verb)
    _add_eval_tr(verb)
    _add_run(verb)


def _document_methods() -> Iterable[str]:
    from service.retrieval.base import document_methods

    return document_methods()


_METHODS = Registry(_document_methods)


def _add_param_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="a scorer parameter, repeatable (e.g. PSQ: lam=0.4 lower=0 cumulative=1 nbest=1000)",
    )


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


def _add_feedback_flags(p: argparse.ArgumentParser) -> None:
    """RM3 feedback as the service runs it: on or off by CLIR_FEEDBACK (on unless set), each
    parameter from its setting (CLIR_FEEDBACK_DOCS, …) unless a flag gives it."""
    p.add_argument(
        "--feedback",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="expand the query with RM3 pseudo-relevance feedback (the method's top documents); "
        "default: the setting CLIR_FEEDBACK (on)",
    )
    p.add_argument("--feedback-docs", type=int, help="RM3: feedback documents (CLIR_FEEDBACK_DOCS)")
    p.add_argument("--feedback-terms", type=int, help="RM3: expansion terms (CLIR_FEEDBACK_TERMS)")
    p.add_argument(
        "--feedback-weight",
        type=float,
        help="RM3: the original query's share (CLIR_FEEDBACK_WEIGHT)",
    )
    p.add_argument(
        "--feedback-form",
        choices=["rerank", "interpolate", "replace", "rerank+interpolate"],
        help="rerank (CLIR_FEEDBACK_FORM's default): BOW-FD ranks again with the relevance model "
        "as extra term weight (DT and PSQ interpolate); interpolate: the method's ranking and "
        "the expanded query's mixed; replace: the expanded query's alone; rerank+interpolate: both",
    )
    p.add_argument(
        "--feedback-mix",
        type=float,
        help="interpolate: the expanded query's share (CLIR_FEEDBACK_MIX)",
    )
    p.add_argument(
        "--feedback-pool",
        type=int,
        help="interpolate: how deep both are mixed (CLIR_FEEDBACK_POOL)",
    )


def _feedback(args: argparse.Namespace) -> Any:
    """RM3's parameters from the flags and, where a flag is not given, the settings; None when
    feedback is off (``--no-feedback``, or CLIR_FEEDBACK=false without ``--feedback``)."""
    from service.core.settings import get_settings
    from service.search.pipeline import feedback_from_settings

    return feedback_from_settings(
        get_settings(), args.feedback, docs=args.feedback_docs, terms=args.feedback_terms,
        weight=args.feedback_weight, form=args.feedback_form, mix=args.feedback_mix,
        pool=args.feedback_pool,
    )  # fmt: skip


def _add_dense_flags(p: argparse.ArgumentParser) -> None:
    """The dense reader as the service runs it: on by CLIR_DENSE (where the index has
    vectors), each parameter from its setting unless a flag gives it."""
    p.add_argument(
        "--dense",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="read the 1-best translation with the dense encoder too and fuse the rankings "
        "(where the index has vectors); default: the setting CLIR_DENSE (on)",
    )
    p.add_argument("--dense-depth", type=int, help="how deep both rankings are fused")
    p.add_argument("--dense-fusion", choices=["rrf", "mix"], help="CLIR_DENSE_FUSION")
    p.add_argument("--dense-rrf-k", type=float, help="RRF's k (CLIR_DENSE_RRF_K)")
    p.add_argument("--dense-weight", type=float, help="the dense ranking's weight")
    p.add_argument(
        "--dense-later-penalty",
        type=float,
        help="what a passage after a page's first loses (CLIR_DENSE_LATER_PENALTY)",
    )


def _dense(args: argparse.Namespace) -> Any:
    from service.core.settings import get_settings
    from service.search.pipeline import dense_from_settings

    return dense_from_settings(
        get_settings(), args.dense, depth=args.dense_depth, fusion=args.dense_fusion,
        k=args.dense_rrf_k, weight=args.dense_weight, later=args.dense_later_penalty,
    )  # fmt: skip


def _print_metrics(payload: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(payload, sort_keys=True))
    else:
        for name, value in payload.items():
            print(f"{name:<26}{value}")


def _add_translate(verb: VerbAdder) -> None:
    p = verb("translate", "Translate text (or stdin lines) with a model.", _cmd_translate)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("text", nargs="?", help="text to translate; without it, one line per stdin line")
    p.add_argument("--nbest", type=int, default=1, help="print the N best distinct translations")
    p.add_argument("--pop-limit", type=int)
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")


def _run_setup() -> RunSetup:
    """What a run draws on besides its flags, from the settings."""
    from service.core.settings import get_settings
    from service.runs import RunSetup

    s = get_settings()
    return RunSetup(s.weights_state_dir, s.decoder_engine, s.kbest_time_budget_s)


def _cmd_translate(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings
    from service.mt.bundle import load_bundle
    from service.mt.decoder import DecoderConfig
    from service.mt.translate import translate_text

    settings = get_settings()
    bundle = load_bundle(args.model, state_root=settings.weights_state_dir)
    config = DecoderConfig(
        pop_limit=args.pop_limit or settings.pop_limit,
        use_lm=not args.no_lm,
        engine=settings.decoder_engine,
    )
    lines = [args.text] if args.text is not None else (ln.rstrip("\n") for ln in sys.stdin)
    for k, line in enumerate(lines):
        if not line.strip():
            print()
            continue
        # stdin mode: one input line -> one output line (no sentence splitting)
        result = translate_text(
            bundle, line, nbest=args.nbest, config=config, split=args.text is not None,
            time_budget=settings.kbest_time_budget_s,
        )  # fmt: skip
        if args.nbest == 1:
            print(" ".join(" ".join(s.best.tokens) for s in result))
            continue
        for s in result:
            for d in s.nbest:
                feats = " ".join(f"{n}={v:.4g}" for n, v in sorted(d.features.items()))
                print(f"{k} ||| {' '.join(d.tokens)} ||| {feats} ||| {d.score:.4f}")
    return 0


def _add_search(verb: VerbAdder) -> None:
    p = verb("search", "Search the document index with a foreign query.", _cmd_search)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--method", choices=_METHODS, default="bowfd")
    p.add_argument("query")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument("--explain", action="store_true", help="print each hit's explanation")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--pin", action="append", metavar="WORD=ENGLISH",
        help="translate the source WORD only as ENGLISH (repeatable; see the alternatives)",
    )  # fmt: skip
    p.add_argument(
        "--block", action="append", metavar="ENGLISH", help="no translation may use this word"
    )
    _add_param_flag(p)
    _add_feedback_flags(p)
    _add_dense_flags(p)


def _choices(args: argparse.Namespace) -> Any:
    from service.retrieval.choices import Choices

    pins: dict[str, str] = {}
    for pair in args.pin or []:
        source, eq, english = pair.partition("=")
        if not eq:
            raise InvalidInputError(f"--pin {pair!r}: write it as WORD=ENGLISH (Tabelle=table)")
        pins[source] = english
    return Choices.of(pins, args.block)


def _cmd_search(args: argparse.Namespace) -> int:
    from service.retrieval.explain import explanation_json
    from service.runs import search

    choices = _choices(args)
    out, _pipe = search(
        args.model,
        args.index,
        args.method,
        args.query,
        args.k,
        use_lm=not args.no_lm,
        explain=args.explain,
        params=_params(args.param),
        feedback=_feedback(args),
        dense=_dense(args),
        setup=_run_setup(),
        choices=choices,
    )
    translation = " ".join(" ".join(s) for s in out.translation)
    pinned = choices.chosen()
    alternatives = [a.to_json() for a in out.alternatives]
    for alt in alternatives:
        alt["chosen"] = pinned.get(alt["source"])  # as the REST answer says it
        for o in alt["options"]:
            o["cue"] = out.cue(o["english"])
    if args.json:
        # the REST vocabulary (`results`, `id`); `hits` and `doc_id` repeat them for scripts
        # written against 0.1 and go in 0.2
        results = [
            {
                "rank": r,
                "id": h.doc_id,
                "doc_id": h.doc_id,
                "title": out.doc(h.docno).title,
                "score": h.score,
                "readers": out.readers.get(h.docno, {}),
                **({"explanation": explanation_json(h.explanation)} if args.explain else {}),
            }
            for r, h in enumerate(out.hits, 1)
        ]
        payload = {
            "signature": out.ranking.signature,
            "translation": translation,
            "total": out.total,
            "total_relation": out.relation,
            "dense": out.dense,
            "empty_reason": out.empty_reason,
            "alternatives": alternatives,
            "info": out.ranking.info,
            "results": results,
            "hits": results,
            "deprecated": {"hits": "results", "doc_id": "id"},
        }
        print(json.dumps(payload))
        return 0
    print(f"# {out.ranking.signature}", file=sys.stderr)
    print(f"# translation: {translation}; dense: {out.dense}", file=sys.stderr)
    for a in out.alternatives:  # what --pin can choose
        shown = " · ".join(
            f"{o.english} ({o.p:.2f}{', pinned' if pinned.get(a.source) == o.english else ''})"
            for o in a.options
        )
        print(f"# {a.source}: {shown}", file=sys.stderr)
    if out.empty_reason:
        print(f"# {out.empty_reason}", file=sys.stderr)
    for r, h in enumerate(out.hits, 1):
        readers = " ".join(f"{k}:{v}" for k, v in out.readers.get(h.docno, {}).items())
        shown = f"\t[{readers}]" if readers else ""
        print(f"{r}\t{h.doc_id}\t{h.score:.4f}\t{out.doc(h.docno).title}{shown}")
        if args.explain and h.explanation is not None:
            print(f"\t{json.dumps(h.explanation.to_json(), ensure_ascii=False)}")
    return 0


def _add_eval(verb: VerbAdder) -> None:
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
    _add_dense_flags(p)


def _cmd_eval(args: argparse.Namespace) -> int:
    from service.runs import evaluate_method

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
        dense=_dense(args),
        setup=_run_setup(),
    )
    _print_metrics(payload, args.json)
    return 0


def _add_eval_tr(verb: VerbAdder) -> None:
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
    p.add_argument(
        "--levenshtein-unit",
        choices=["char", "word"],
        default="char",
        help="edit similarity over characters (default) or words (the TR paper's)",
    )
    p.add_argument("--no-lm", action="store_true", help="decode without the language model")
    p.add_argument(
        "--dense",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reread the first suggestions with the dense encoder, as the service does; "
        "default: the setting CLIR_SUGGEST_DENSE (on)",
    )
    p.add_argument("--run-out", type=Path, help="write the top 10 per query as a TREC run")
    p.add_argument("--limit", type=int, help="evaluate only the first N queries")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true")


def _cmd_eval_tr(args: argparse.Namespace) -> int:
    from service.core.settings import get_settings
    from service.runs import evaluate_tr
    from service.search.suggestions import suggestion_reader_from_settings

    payload = evaluate_tr(
        args.model,
        args.pool,
        args.queries,
        args.qrels,
        nbest=args.nbest,
        levenshtein=not args.no_levenshtein,
        limit=args.limit,
        max_candidates=args.max_candidates,
        levenshtein_unit=args.levenshtein_unit,
        use_lm=not args.no_lm,
        run_out=args.run_out,
        progress=not args.quiet,
        setup=_run_setup(),
        reader=suggestion_reader_from_settings(get_settings(), args.dense),
    )
    _print_metrics(payload, args.json)
    return 0


def _add_run(verb: VerbAdder) -> None:
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
    _add_dense_flags(p)


def _cmd_run(args: argparse.Namespace) -> int:
    from service.runs import run_topics

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
        dense=_dense(args),
        setup=_run_setup(),
    )
    for qid, reason in payload["failed"].items():
        print(f"note: topic {qid} has no run lines: {reason}", file=sys.stderr)
    print(json.dumps(payload, sort_keys=True))
    return 0

"""Experiment: why Levenshtein reranking of translation retrieval loses (issue 40, item 5).

Each dev sentence of ``tr/<src>-en`` is decoded ONCE (as asked: ``search=False``, the bundle's
active weights) and its 10-best distinct translations with ``Pr(t|s)`` are kept (the 5-best
list is taken again from the same forests). Stage 1 caches them in ``--cache``; stage 2 reads
each translation's cosine candidates from the pool once and scores every variant of
``Pr(d|t)`` from the same translations and candidates:

* the tokens ``E`` is computed on (every token as the pool keeps it; words only; lowercased;
  without stopwords; characters), the depth ``M`` it re-weights, the interpolation
  (``cos^λ1·E^λ2``, a linear one, ``λ2`` grid), and whether ``E`` applies to every
  translation of the N-best list or to the 1-best only.

Reports p@1, MRR, f@1, f@5 per variant with the paired randomization p-value against the
cosine-only ranking (and against the paper's formula) on the same queries.

Run: ``nice -n 5 .venv/bin/python -m bench.exp_tr_levenshtein de --limit 500``; writes
``bench/results/tr_levenshtein.json`` (one entry per pair, merged with what is there).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz.distance import Levenshtein

from bench.common import DATA, RESULTS_DIR, ROOT, write_result
from service.data import load_qrels, load_queries
from service.errors import InvalidInputError
from service.evaluation import TR_METRICS, evaluate, randomization_test
from service.index.analysis import LONG_STOPWORDS, is_word
from service.index.inverted import load_index
from service.mt.bundle import load_bundle
from service.retrieval.query import decode_query
from service.retrieval.runner import decoder_for
from service.retrieval.tr import TranslationRetrieval, cosine_candidates, top_by_score

Translations = list[tuple[tuple[str, ...], float]]


def decode_stage(src: str, limit: int, cache: Path, state_root: Path | None) -> dict[str, Any]:
    """Decode the first ``limit`` dev sentences once; keep their 5- and 10-best lists."""
    bundle = load_bundle(ROOT / "models" / f"{src}-en", state_root=state_root)
    pool = load_index(ROOT / "indexes" / "pool")
    qdir = DATA / "tr" / f"{src}-en"
    queries = dict(islice(load_queries(qdir / "queries.dev.tsv").items(), limit))
    dec = decoder_for(bundle)
    version = bundle.active_weights().version
    lists: dict[str, dict[int, Translations]] = {}
    texts: dict[str, str] = {}
    if cache.exists():
        old = pickle.loads(cache.read_bytes())
        if old["weights"] == version:
            lists, texts = old["lists"], old["texts"]
    scorers = {n: TranslationRetrieval(pool, nbest=n) for n in (5, 10)}
    start = time.perf_counter()
    for i, (qid, text) in enumerate(queries.items()):
        if qid in lists:
            continue
        try:
            q = decode_query(dec, text, src, qid=qid, weights_version=version, search=False)
        except InvalidInputError as exc:
            print(f"{qid}: {exc}", file=sys.stderr)
            continue
        lists[qid] = {n: s.translations(q) for n, s in scorers.items()}
        texts[qid] = text
        if i % 25 == 0:
            print(f"decoded {i}/{len(queries)} {time.perf_counter() - start:.0f}s", file=sys.stderr)
            cache.write_bytes(pickle.dumps({"weights": version, "lists": lists, "texts": texts}))
    data = {"weights": version, "lists": lists, "texts": texts}
    cache.write_bytes(pickle.dumps(data))
    return data


# --- token views for E ---------------------------------------------------------------------


def view_all(tokens: Sequence[str]) -> list[str]:
    return list(tokens)


def view_words(tokens: Sequence[str]) -> list[str]:
    return [t for t in tokens if is_word(t)]


def view_lower(tokens: Sequence[str]) -> list[str]:
    return [t.lower() for t in tokens]


def view_lower_words(tokens: Sequence[str]) -> list[str]:
    return [t.lower() for t in tokens if is_word(t)]


def view_content(tokens: Sequence[str]) -> list[str]:
    return [t.lower() for t in tokens if is_word(t) and t.lower() not in LONG_STOPWORDS]


def view_chars(tokens: Sequence[str]) -> str:
    return " ".join(tokens)


def view_chars_words(tokens: Sequence[str]) -> str:
    return " ".join(t for t in tokens if is_word(t))


VIEWS: dict[str, Callable[[Sequence[str]], Sequence[str]]] = {
    "all": view_all,
    "words": view_words,
    "lower": view_lower,
    "lower_words": view_lower_words,
    "content": view_content,
    "chars": view_chars,
    "chars_words": view_chars_words,
}


def lev_sim(a: Sequence[str], b: Sequence[str]) -> float:
    longest = max(len(a), len(b))
    return 1.0 if longest == 0 else 1.0 - Levenshtein.distance(a, b) / longest


@dataclass
class Cands:
    docs: np.ndarray  # top-M_MAX by cosine, best first
    cos: np.ndarray
    e: dict[str, np.ndarray]  # E per view, same order


M_MAX = 1000


def candidate_stage(
    pool: Any, lists: dict[str, dict[int, Translations]], views: Sequence[str]
) -> dict[tuple[str, ...], Cands]:
    """Cosine candidates (top ``M_MAX``) and E under each view, once per distinct translation."""
    doc_tok: dict[int, list[str]] = {}
    out: dict[tuple[str, ...], Cands] = {}
    start = time.perf_counter()
    for i, (_qid, by_n) in enumerate(lists.items()):
        for tokens, _ in by_n[10] + by_n[5]:
            if tokens in out:
                continue
            docs, cos = cosine_candidates(pool, tokens)
            keep = top_by_score(docs, cos, M_MAX)
            d, c = docs[keep], cos[keep]
            e = {}
            for v in views:
                f = VIEWS[v]
                tv = f(tokens)
                vals = []
                for doc in d.tolist():
                    dt = doc_tok.get(doc)
                    if dt is None:
                        dt = doc_tok[doc] = pool.doc_tokens(doc)
                    vals.append(lev_sim(tv, f(dt)))
                e[v] = np.asarray(vals)
            out[tokens] = Cands(d, c, e)
        if i % 50 == 0:
            print(
                f"candidates {i}/{len(lists)} {time.perf_counter() - start:.0f}s", file=sys.stderr
            )
    return out


# --- variants -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    nbest: int = 5
    view: str | None = "all"  # None: no E
    m: int = 1000
    lam1: float = 1.0
    lam2: float = 1.0
    form: str = "geo"  # geo: cos^λ1·E^λ2; lin: (1-a)·cos + a·E with a = lam2
    one_best_only: bool = False  # E only on the 1-best translation's candidates
    normalise: bool = True  # Algorithm 1's per-translation normalisation (N > 1)


def score_variant(
    v: Variant, translations: Translations, cands: dict[tuple[str, ...], Cands]
) -> dict[int, float]:
    scores: dict[int, float] = {}
    single = len(translations) == 1
    for rank, (tokens, pr_t) in enumerate(translations):
        c = cands[tokens]
        cos = c.cos[: v.m]
        docs = c.docs[: v.m]
        use_e = v.view is not None and not (v.one_best_only and rank > 0)
        if use_e:
            e = c.e[v.view][: v.m]  # type: ignore[index]
            p = cos**v.lam1 * e**v.lam2 if v.form == "geo" else (1 - v.lam2) * cos + v.lam2 * e
        else:
            p = cos**v.lam1
        z = p.sum()
        if z <= 0:
            continue
        if not single and v.normalise:
            p = p / z
        for d, s in zip(docs.tolist(), p.tolist(), strict=True):
            if s > 0:
                scores[d] = scores.get(d, 0.0) + pr_t * s
    return scores


def run_variant(
    v: Variant,
    pool: Any,
    lists: dict[str, dict[int, Translations]],
    cands: dict[tuple[str, ...], Cands],
) -> dict[str, dict[str, float]]:
    run = {}
    for qid, by_n in lists.items():
        translations = by_n[v.nbest] if v.nbest > 1 else [(by_n[5][0][0], 1.0)]
        scores = score_variant(v, translations, cands)
        top = sorted(scores.items(), key=lambda ds: (-ds[1], ds[0]))[:10]
        run[qid] = {pool.doc_id(d): s for d, s in top}
    return run


def variants() -> list[Variant]:
    out = [Variant("N5 cos only", view=None), Variant("N5 paper (cos·E, all tokens)")]
    for view in ("words", "lower", "lower_words", "content", "chars"):
        out.append(Variant(f"N5 cos·E {view}", view=view))
    for m in (5, 10, 20, 50, 100, 300):
        out.append(Variant(f"N5 cos·E all M={m}", m=m))
        out.append(Variant(f"N5 cos only M={m}", view=None, m=m))
    for lam2 in (0.25, 0.5, 2.0, 4.0):
        out.append(Variant(f"N5 cos·E^{lam2} all", lam2=lam2))
    for lam1 in (2.0, 4.0):
        out.append(Variant(f"N5 cos^{lam1}·E all", lam1=lam1))
    for a in (0.1, 0.25, 0.5):
        out.append(Variant(f"N5 linear a={a} all", form="lin", lam2=a))
    out.append(Variant("N5 cos·E all, E on 1-best only", one_best_only=True))
    out.append(Variant("N5 cos·E all, unnormalised", normalise=False))
    out.append(Variant("N5 cos only, unnormalised", view=None, normalise=False))
    for n in (1, 10):
        out.append(Variant(f"N{n} cos only", nbest=n, view=None))
        out.append(Variant(f"N{n} paper", nbest=n))
    # E over characters
    for view in ("chars", "chars_words"):
        for lam1 in (1.0, 2.0):
            for lam2 in (0.5, 1.0, 2.0, 4.0):
                out.append(Variant(f"N5 cos^{lam1}·E^{lam2} {view}", view=view, lam1=lam1,
                                   lam2=lam2))  # fmt: skip
    for m in (10, 50, 100, 300):
        out.append(Variant(f"N5 cos·E chars M={m}", view="chars", m=m))
    for a in (0.25, 0.5):
        out.append(Variant(f"N5 linear a={a} chars", view="chars", form="lin", lam2=a))
    out.append(Variant("N5 cos·E chars, E on 1-best only", view="chars", one_best_only=True))
    for n in (1, 10):
        out.append(Variant(f"N{n} cos·E chars", nbest=n, view="chars"))
    return out


KEY_VARIANTS = ("N5 cos only", "N5 paper (cos·E, all tokens)", "N5 cos·E chars")


def check_against_scorer(
    pool: Any, lists: dict[str, dict[int, Translations]], cands: dict[tuple[str, ...], Cands]
) -> dict[str, int]:
    """The service's scorer against this script's scoring, on the first 30 queries: how many
    give the same top 10 (with E over words, the paper's, and over characters)."""
    out = {}
    for unit, name in (("word", KEY_VARIANTS[1]), ("char", KEY_VARIANTS[2])):
        scorer = TranslationRetrieval(pool, nbest=5, levenshtein_unit=unit)  # type: ignore[arg-type]
        v = next(v for v in variants() if v.name == name)
        same = 0
        for by_n in islice(lists.values(), 30):
            want = score_variant(v, by_n[5], cands)
            got = scorer.score_translations(by_n[5]).scores
            top = [d for d, _ in sorted(got.items(), key=lambda ds: (-ds[1], ds[0]))[:10]]
            ref = [d for d, _ in sorted(want.items(), key=lambda ds: (-ds[1], ds[0]))[:10]]
            same += top == ref
        out[unit] = same
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", choices=["de", "zh"])
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--decode-only", action="store_true")
    ap.add_argument(
        "--state-root", type=Path, help="weights state directory (another active version)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "tr_levenshtein.json")
    args = ap.parse_args()
    tag = "" if args.state_root is None else "_alt"
    cache = args.cache or Path(f"/tmp/tr_lev_{args.src}{tag}.pkl")
    data = decode_stage(args.src, args.limit, cache, args.state_root)
    if args.decode_only:
        return
    pool = load_index(ROOT / "indexes" / "pool")
    qdir = DATA / "tr" / f"{args.src}-en"
    lists = dict(islice(data["lists"].items(), args.limit))
    qrels = {q: j for q, j in load_qrels(qdir / "qrels.dev.txt").items() if q in lists}
    lists = {q: t for q, t in lists.items() if q in qrels}
    cand_cache = Path(f"/tmp/tr_lev_{args.src}{tag}_cands.pkl")
    cands: dict[tuple[str, ...], Cands] = {}
    if cand_cache.exists():
        cands = pickle.loads(cand_cache.read_bytes())
    wanted = {t for by_n in lists.values() for t, _ in by_n[10] + by_n[5]}
    if not wanted <= set(cands) or any(set(c.e) != set(VIEWS) for c in cands.values()):
        cands = candidate_stage(pool, lists, list(VIEWS))
        cand_cache.write_bytes(pickle.dumps(cands))
    metrics = ("p@1", "mrr", "f@1", "f@5")
    table: dict[str, Any] = {}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for v in variants():
        run = runs[v.name] = run_variant(v, pool, lists, cands)
        res = evaluate(run, qrels, TR_METRICS, depth=None)
        js = res.as_json()
        per_query[v.name] = {m: res.per_query[m] for m in metrics}
        table[v.name] = {m: js[m] for m in metrics}
        print(v.name, {m: round(js[m], 4) for m in metrics}, file=sys.stderr)
    Path(f"/tmp/tr_lev_{args.src}{tag}_runs.pkl").write_bytes(pickle.dumps(runs))
    entry_checks = check_against_scorer(pool, lists, cands)
    halves = {}
    qids = list(lists)
    for h, part in (
        ("first half", qids[: len(qids) // 2]),
        ("second half", qids[len(qids) // 2 :]),
    ):
        halves[h] = {
            name: round(sum(per_query[name]["p@1"].get(q, 0.0) for q in part) / len(part), 4)
            for name in KEY_VARIANTS
        }
    base, paper = "N5 cos only", "N5 paper (cos·E, all tokens)"
    for name, row in table.items():
        for ref, key in ((base, "p_vs_cos_only"), (paper, "p_vs_paper")):
            if name != ref:
                row[key] = {
                    m: round(randomization_test(per_query[name][m], per_query[ref][m]), 4)
                    for m in ("p@1", "mrr")
                }
    entry = {
        "weights": data["weights"],
        "queries": len(lists),
        "scorer_agrees": entry_checks,
        "p@1_by_half": halves,
        "variants": table,
    }
    params = {k: str(v) for k, v in vars(args).items()} | {"cache": str(cache)}
    write_result(args.out, entry, params, key=f"{args.src}-en {data['weights']}")
    print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()

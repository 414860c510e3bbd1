"""Metrics: hand-worked values, and agreement with ir-measures (trec_eval) on a random run."""

from __future__ import annotations

import random

import ir_measures
import pytest

from service.errors import ConfigurationError
from service.evaluation import evaluate, get_metric, rank_run
from service.evaluation.metrics import (
    average_precision,
    ndcg_at,
    precision_at,
    pres,
    recall_at,
    reciprocal_rank,
    tr_fmeasure,
    tr_precision,
    tr_recall,
)

QRELS = {"a": 3, "b": 1, "c": 2}  # three relevant documents, graded
RANKED = ["x", "a", "y", "c", "z"]  # relevant at ranks 2 and 4; "b" not retrieved


def test_average_precision_by_hand() -> None:
    assert average_precision(RANKED, QRELS) == pytest.approx((1 / 2 + 2 / 4) / 3)


def test_reciprocal_rank_precision_recall_by_hand() -> None:
    assert reciprocal_rank(RANKED, QRELS) == pytest.approx(0.5)
    assert precision_at(RANKED, QRELS, 4) == pytest.approx(2 / 4)
    assert precision_at(RANKED, QRELS, 10) == pytest.approx(2 / 10)
    assert recall_at(RANKED, QRELS, 4) == pytest.approx(2 / 3)
    assert recall_at(RANKED, QRELS, 1) == 0.0
    assert reciprocal_rank(RANKED, QRELS, min_rel=3) == pytest.approx(0.5)
    assert average_precision(RANKED, QRELS, min_rel=2) == pytest.approx((1 / 2 + 2 / 4) / 2)


def test_ndcg_by_hand() -> None:
    dcg = 3 / 1.584962500721156 + 2 / 2.321928094887362  # ranks 2 and 4 (log2 3, log2 5)
    idcg = 3 / 1 + 2 / 1.584962500721156 + 1 / 2  # 3, 2, 1 at ranks 1, 2, 3
    assert ndcg_at(RANKED, QRELS, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at(RANKED, QRELS, 1) == 0.0
    assert ndcg_at(["a", "c", "b"], QRELS, 3) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("ranked", "qrels", "n_max", "expected"),
    [
        # all relevant documents first: PRES = 1
        (["a", "b", "x"], {"a": 1, "b": 1}, 10, 1.0),
        # none found within N_max: ranks 11, 12 -> mean 11.5; 1 - (11.5 - 1.5)/10 = 0
        (["x", "y"], {"a": 1, "b": 1}, 10, 0.0),
        # one relevant at rank 3 of N_max = 10: 1 - (3 - 1)/10 = 0.8
        (["x", "y", "a"], {"a": 1}, 10, 0.8),
        # relevant at 2 and 5; third missing -> rank N_max + 3 = 13;
        # mean = 20/3; 1 - (20/3 - 2)/10 = 0.5333...
        (["x", "a", "y", "z", "b"], {"a": 1, "b": 1, "c": 1}, 10, 1 - (20 / 3 - 2) / 10),
        # a relevant document beyond N_max counts as missing: found a@1; b at 4 > N_max=3
        # -> b placed at 3 + 2 = 5; mean 3; 1 - (3 - 1.5)/3 = 0.5
        (["a", "x", "y", "b"], {"a": 1, "b": 1}, 3, 0.5),
        # judged non-relevant (0) documents are not relevant
        (["a"], {"a": 0, "b": 2}, 10, 0.0),
    ],
)
def test_pres_by_hand(
    ranked: list[str], qrels: dict[str, int], n_max: int, expected: float
) -> None:
    assert pres(ranked, qrels, n_max=n_max) == pytest.approx(expected)


def test_translation_retrieval_measures_by_hand() -> None:
    # two references r1, r2; top-5 returns 4 sentences, r1 among them
    ranked, qrels = ["s1", "r1", "s2", "s3"], {"r1": 1, "r2": 1}
    assert tr_precision(ranked, qrels, 5) == pytest.approx(1 / 4)
    assert tr_recall(ranked, qrels, 5) == pytest.approx(1 / 2)
    assert tr_fmeasure(ranked, qrels, 5) == pytest.approx(1 / ((4 + 2) / 2))
    # f is the harmonic mean of p and r (TR paper, §3.2)
    p, r = tr_precision(ranked, qrels, 5), tr_recall(ranked, qrels, 5)
    assert tr_fmeasure(ranked, qrels, 5) == pytest.approx(2 * p * r / (p + r))
    assert tr_fmeasure(ranked, qrels, 1) == 0.0


def test_ranking_breaks_ties_by_doc_id_descending() -> None:
    assert rank_run({"a": 1.0, "c": 1.0, "b": 2.0}) == ["b", "c", "a"]


def test_unknown_metric_names_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError, match="valid metrics"):
        get_metric("bleu")
    with pytest.raises(ConfigurationError):
        get_metric("map@10")
    with pytest.raises(ConfigurationError):
        get_metric("ndcg@x")


def _random_benchmark(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """60 queries, graded qrels, runs with ties, some queries with nothing relevant found."""
    rng = random.Random(seed)
    docs = [f"d{i:04d}" for i in range(400)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(60):
        qid = f"q{q:02d}"
        judged = rng.sample(docs, rng.randint(1, 25))
        qrels[qid] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        qrels[qid][judged[0]] = rng.choice([1, 2, 3])  # at least one relevant
        # every tenth query retrieves nothing relevant
        pool = [d for d in docs if d not in qrels[qid]] if q % 10 == 0 else docs
        retrieved = rng.sample(pool, rng.randint(5, 300))
        # coarse scores produce many ties
        run[qid] = {d: float(rng.randint(0, 30)) for d in retrieved}
    return qrels, run


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agrees_with_ir_measures(seed: int) -> None:
    qrels, run = _random_benchmark(seed)
    ours = evaluate(run, qrels, metrics=["map", "ndcg@10", "ndcg@1000", "mrr", "p@10"])
    theirs = ir_measures.calc_aggregate(
        [ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.nDCG @ 1000, ir_measures.RR,
         ir_measures.P @ 10],
        [ir_measures.Qrel(q, d, r) for q, ds in qrels.items() for d, r in ds.items()],
        [ir_measures.ScoredDoc(q, d, s) for q, ds in run.items() for d, s in ds.items()],
    )  # fmt: skip
    assert ours.queries == 60
    assert ours.means["map"] == pytest.approx(theirs[ir_measures.AP], abs=1e-6)
    assert ours.means["ndcg@10"] == pytest.approx(theirs[ir_measures.nDCG @ 10], abs=1e-6)
    assert ours.means["ndcg@1000"] == pytest.approx(theirs[ir_measures.nDCG @ 1000], abs=1e-6)
    assert ours.means["mrr"] == pytest.approx(theirs[ir_measures.RR], abs=1e-6)
    assert ours.means["p@10"] == pytest.approx(theirs[ir_measures.P @ 10], abs=1e-6)


def test_query_missing_from_run_scores_zero_and_unjudged_queries_are_skipped() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": {"a": 1.0}, "q9": {"z": 1.0}}
    res = evaluate(run, qrels, metrics=["map"])
    assert res.queries == 2
    assert res.per_query["map"] == {"q1": 1.0, "q2": 0.0}
    assert res.means["map"] == pytest.approx(0.5)
    assert res.skipped_queries == ["q3"]
    assert res.unjudged_run_queries == ["q9"]


def test_depth_cuts_the_run() -> None:
    qrels = {"q": {"a": 1}}
    run = {"q": {"x": 3.0, "y": 2.0, "a": 1.0}}
    assert evaluate(run, qrels, metrics=["mrr"], depth=2).means["mrr"] == 0.0
    assert evaluate(run, qrels, metrics=["mrr"], depth=3).means["mrr"] == pytest.approx(1 / 3)

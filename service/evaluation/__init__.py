"""Evaluation: retrieval metrics (MAP, NDCG, PRES, MRR, P@k, Recall@k), the translation
retrieval measures of the TR paper (f-measure@n, precision, recall) and paired significance
tests."""

from service.evaluation.evaluate import EvalResult, evaluate
from service.evaluation.metrics import CLIR_METRICS, TR_METRICS, get_metric, rank_run
from service.evaluation.significance import (
    bootstrap_test,
    detectable_difference,
    randomization_test,
)

__all__ = [
    "CLIR_METRICS",
    "TR_METRICS",
    "EvalResult",
    "bootstrap_test",
    "detectable_difference",
    "evaluate",
    "get_metric",
    "randomization_test",
    "rank_run",
]

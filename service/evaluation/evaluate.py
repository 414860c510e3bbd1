"""Evaluate a run against qrels: per-query values and means for a list of metrics.

Queries are those of the qrels with at least one relevant judgment; a query that the run
does not answer scores 0 on every metric (trec_eval ``-c``). Runs are cut at ``depth``
(1000 by default, the ranking depth of Hieber & Riezler 2015, §5) before any metric sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from service.evaluation.metrics import CLIR_METRICS, get_metric, rank_run
from service.records import QrelsDict, RunDict


@dataclass(frozen=True)
class EvalResult:
    """Per-query values ``per_query[metric][qid]`` and their means."""

    per_query: dict[str, dict[str, float]]
    means: dict[str, float]
    queries: int
    skipped_queries: list[str] = field(default_factory=list)
    unjudged_run_queries: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {k: round(v, 6) for k, v in self.means.items()}
        out["queries"] = self.queries
        return out


def evaluate(
    run: RunDict,
    qrels: QrelsDict,
    metrics: Iterable[str] | Mapping[str, str] = CLIR_METRICS,
    depth: int | None = 1000,
    min_rel: int = 1,
) -> EvalResult:
    """Compute ``metrics`` (names, or a mapping output name -> metric name)."""
    names = dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics}
    specs = {out: get_metric(name) for out, name in names.items()}
    evaluated = sorted(
        q for q, judged in qrels.items() if any(r >= min_rel for r in judged.values())
    )
    skipped = sorted(set(qrels) - set(evaluated))
    per_query: dict[str, dict[str, float]] = {out: {} for out in specs}
    for qid in evaluated:
        ranked = rank_run(run.get(qid, {}))
        if depth is not None:
            ranked = ranked[:depth]
        for out, spec in specs.items():
            per_query[out][qid] = spec.fn(ranked, qrels[qid])
    n = len(evaluated)
    means = {out: (sum(v.values()) / n if n else 0.0) for out, v in per_query.items()}
    return EvalResult(
        per_query=per_query,
        means=means,
        queries=n,
        skipped_queries=skipped,
        unjudged_run_queries=sorted(set(run) - set(qrels)),
    )

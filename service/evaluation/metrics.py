"""Per-query retrieval metrics, and a registry that resolves names like ``ndcg@10``.

Conventions follow trec_eval (and hence ``ir-measures``), which the tests check against:

* a run is ranked by score descending, ties by document id descending (trec_eval's order);
  the rank column of a run file is ignored;
* a document is relevant when its judgment is ``>= min_rel`` (default 1); unjudged documents
  are non-relevant;
* NDCG uses the judgment itself as the gain (graded, linear) with a ``log2(rank + 1)``
  discount, the ideal ranking being all judged documents by gain.

PRES is Magdy & Jones (SIGIR 2010), "PRES: a score metric for evaluating recall-oriented
information retrieval applications", used in Hieber & Riezler 2015, §5:

    PRES = 1 - (sum_i r_i / n - (n + 1) / 2) / N_max

where ``n`` is the number of relevant documents and ``r_i`` their ranks within the first
``N_max`` results; a relevant document not found there is placed just after ``N_max``: the
missing ones take ranks ``N_max + n_found + 1, ..., N_max + n``. PRES is 1 when all relevant
documents lead the list and 0 when none is found within ``N_max``.

The translation-retrieval measures of the TR paper, §3.2, are per query:
``p@n = correct / output_length``, ``r@n = correct / reference_length`` and
``f@n = correct / ((output_length + reference_length) / 2)`` (their harmonic mean), where
``correct`` is the number of reference sentences among the top ``n`` and ``output_length`` the
number of sentences returned (at most ``n``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.errors import ConfigurationError

# A metric sees one query: the ranked document ids and the judgments of that query.
MetricFn = Callable[[Sequence[str], dict[str, int]], float]


@dataclass(frozen=True)
class MetricSpec:
    """A resolved metric: its canonical name and the function computing it per query."""

    name: str
    fn: MetricFn


def rank_run(scores: dict[str, float]) -> list[str]:
    """Document ids best first, ties by document id descending (trec_eval order)."""
    return [d for d, _ in sorted(scores.items(), key=lambda x: (x[1], x[0]), reverse=True)]


def _relevant(qrels: dict[str, int], min_rel: int) -> set[str]:
    return {d for d, r in qrels.items() if r >= min_rel}


def average_precision(ranked: Sequence[str], qrels: dict[str, int], min_rel: int = 1) -> float:
    rel = _relevant(qrels, min_rel)
    if not rel:
        return 0.0
    hits, total = 0, 0.0
    for i, d in enumerate(ranked, start=1):
        if d in rel:
            hits += 1
            total += hits / i
    return total / len(rel)


def reciprocal_rank(ranked: Sequence[str], qrels: dict[str, int], min_rel: int = 1) -> float:
    rel = _relevant(qrels, min_rel)
    for i, d in enumerate(ranked, start=1):
        if d in rel:
            return 1.0 / i
    return 0.0


def precision_at(ranked: Sequence[str], qrels: dict[str, int], k: int, min_rel: int = 1) -> float:
    rel = _relevant(qrels, min_rel)
    return sum(1 for d in ranked[:k] if d in rel) / k


def recall_at(ranked: Sequence[str], qrels: dict[str, int], k: int, min_rel: int = 1) -> float:
    rel = _relevant(qrels, min_rel)
    if not rel:
        return 0.0
    return sum(1 for d in ranked[:k] if d in rel) / len(rel)


def ndcg_at(ranked: Sequence[str], qrels: dict[str, int], k: int) -> float:
    """Graded NDCG cut at ``k``: gain = judgment, discount = log2(rank + 1)."""
    dcg = sum(max(qrels.get(d, 0), 0) / math.log2(i + 1) for i, d in enumerate(ranked[:k], start=1))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def pres(
    ranked: Sequence[str], qrels: dict[str, int], n_max: int = 1000, min_rel: int = 1
) -> float:
    """Patent Retrieval Evaluation Score (Magdy & Jones 2010), see the module docstring."""
    rel = _relevant(qrels, min_rel)
    n = len(rel)
    if n == 0:
        return 0.0
    found = [i for i, d in enumerate(ranked[:n_max], start=1) if d in rel]
    n_found = len(found)
    missing = sum(n_max + i for i in range(n_found + 1, n + 1))
    mean_rank = (sum(found) + missing) / n
    return 1.0 - (mean_rank - (n + 1) / 2) / n_max


def tr_counts(ranked: Sequence[str], qrels: dict[str, int], n: int) -> tuple[int, int, int]:
    """(correct, output_length, reference_length) of the top ``n`` for one query."""
    rel = _relevant(qrels, 1)
    top = ranked[:n]
    return sum(1 for d in top if d in rel), len(top), len(rel)


def tr_precision(ranked: Sequence[str], qrels: dict[str, int], n: int) -> float:
    correct, out, _ = tr_counts(ranked, qrels, n)
    return correct / out if out else 0.0


def tr_recall(ranked: Sequence[str], qrels: dict[str, int], n: int) -> float:
    correct, _, ref = tr_counts(ranked, qrels, n)
    return correct / ref if ref else 0.0


def tr_fmeasure(ranked: Sequence[str], qrels: dict[str, int], n: int) -> float:
    correct, out, ref = tr_counts(ranked, qrels, n)
    return correct / ((out + ref) / 2) if out + ref else 0.0


# name -> (needs a cutoff?, default cutoff, factory)
_Factory = Callable[[int], MetricFn]
_METRICS: dict[str, tuple[int | None, _Factory]] = {
    "map": (None, lambda _k: average_precision),
    "mrr": (None, lambda _k: reciprocal_rank),
    "ndcg": (1000, lambda k: lambda r, q: ndcg_at(r, q, k)),
    "pres": (1000, lambda k: lambda r, q: pres(r, q, n_max=k)),
    "p": (10, lambda k: lambda r, q: precision_at(r, q, k)),
    "recall": (1000, lambda k: lambda r, q: recall_at(r, q, k)),
    "tr-p": (1, lambda k: lambda r, q: tr_precision(r, q, k)),
    "tr-r": (1, lambda k: lambda r, q: tr_recall(r, q, k)),
    "f": (1, lambda k: lambda r, q: tr_fmeasure(r, q, k)),
}

CLIR_METRICS: tuple[str, ...] = ("map", "ndcg", "ndcg@10", "pres", "mrr", "recall@1000", "p@10")
# Output names of the translation-retrieval report (``clir eval-tr``) -> registry names.
TR_METRICS: dict[str, str] = {
    **{f"f@{n}": f"f@{n}" for n in (1, 5, 10)},
    **{f"p@{n}": f"tr-p@{n}" for n in (1, 5, 10)},
    **{f"r@{n}": f"tr-r@{n}" for n in (1, 5, 10)},
    "mrr": "mrr",
}


def get_metric(name: str) -> MetricSpec:
    """Resolve ``name`` (``map``, ``ndcg@10``, ``pres@100``, ``f@5`` ...) to a metric."""
    base, _, cut = name.partition("@")
    if base not in _METRICS:
        valid = ", ".join(sorted(_METRICS))
        raise ConfigurationError(f"unknown metric {name!r}; valid metrics: {valid} (with @k)")
    default_cut, factory = _METRICS[base]
    if cut:
        if default_cut is None:
            raise ConfigurationError(f"metric {base!r} takes no cutoff")
        if not cut.isdigit() or int(cut) < 1:
            raise ConfigurationError(f"cutoff of {name!r} must be a positive integer")
        k = int(cut)
    else:
        k = default_cut or 0
    return MetricSpec(name, factory(k))

"""What the bench scripts share: where the repository, the shared data and the results are,
and the one percentile of every reported latency figure.

``percentile`` is numpy's default (linear interpolation between the two closest ranks,
``numpy.percentile(xs, q)``, ``q`` in 0..100): p50 of an even count is the mean of the two
middle values, p90 of 10 samples lies between the 9th and the 10th. Figures recorded before
the scripts shared it used nearest-rank (bench_decoder, bench_load) or a floor index
(bench_models) and can differ from a rerun by up to one sample's gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent  # the repository
DATA = ROOT.parent / "shared" / "data"  # corpora, query sets and qrels, beside the repository
RESULTS_DIR = ROOT / "bench" / "results"


def percentile(xs: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``xs`` by linear interpolation (numpy's default);
    NaN for no samples."""
    if len(xs) == 0:
        return float("nan")
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))

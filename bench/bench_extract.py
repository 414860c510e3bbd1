"""Hiero grammar training on de-en with the real pipeline pieces, stage by stage.

Stages: read + clean + tokenise (:class:`service.text.clean.CorpusCleaner`), word alignment (eflomal
both ways, :func:`service.mt.training.align.align_corpus`) and grow-diag-final-and
(:func:`service.mt.training.align.symmetrize`), encoding, the lexical table, rule extraction +
aggregation + the min-count filter (:func:`service.mt.training.extract.extract_rules`, tight phrases
for rules with gaps, sharded passes), features + pruning to 30
(:func:`service.mt.training.rule_features.estimate_features`) and the conversion to the
grammar's arrays
(``RuleTable.to_encoded``). Per stage: wall and CPU seconds (CPU is what to compare when the shared
machine is loaded; eflomal runs in child processes, counted separately) and peak RSS so far. Counts:
rule instances, unique rules before and after the min-count filter and after pruning, and the bytes
of the encoded arrays. Last, the unique rules of the old behaviour (loose phrases everywhere, no
minimum count) on a prefix of the corpus, for comparison (run after the peak-memory figures are
taken). Writes ``bench/results/extract_rules.json``.

    nice -n 10 .venv/bin/python -m bench extract [N]     # N pairs; default: all
"""

from __future__ import annotations

import itertools
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, TypeVar

import numpy as np
import numpy.typing as npt

from bench.common import DATA as SHARED_DATA
from bench.common import RESULTS_DIR, Help, write_result
from service.data.formats import read_parallel
from service.mt.training.align import align_corpus, symmetrize
from service.mt.training.extract import (
    AlignedPair,
    EncodedCorpus,
    ExtractionConfig,
    RuleCounts,
    encode_corpus,
    extract_rules,
)
from service.mt.training.lexical_counts import lexical_table_from_corpus
from service.mt.training.rule_features import estimate_features
from service.text.clean import CorpusCleaner

DATA = SHARED_DATA / "parallel" / "de-en.tsv.gz"
OUT = RESULTS_DIR / "extract_rules.json"
LOOSE_PREFIX = 50_000
T = TypeVar("T")


def _rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class _Stages:
    def __init__(self) -> None:
        self.figures: dict[str, dict[str, float]] = {}

    def run(self, name: str, fn: Callable[[], T]) -> T:
        t, c, cc = time.perf_counter(), time.process_time(), _child_cpu()
        result = fn()
        self.figures[name] = {
            "wall_seconds": round(time.perf_counter() - t, 2),
            "cpu_seconds": round(time.process_time() - c, 2),
            "child_cpu_seconds": round(_child_cpu() - cc, 2),
            "peak_rss_mb_so_far": _rss_mb(),
            "peak_child_rss_mb_so_far": round(
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            ),
        }
        print(f"[{name}] {self.figures[name]}", file=sys.stderr, flush=True)
        return result


def _gapped(counts: RuleCounts) -> int:
    rows = counts.source_sides
    return int(((rows == 1) | (rows == 2)).any(axis=1)[counts.source_id].sum())


@dataclass(frozen=True)
class Params:
    pairs: Annotated[
        int | None, Help("the first N sentence pairs (default: all)", positional=True)
    ] = None
    out: Annotated[Path, Help("JSON output")] = OUT


def run(p: Params) -> None:
    n_pairs = p.pairs
    stages = _Stages()
    cleaner = CorpusCleaner("de", "en")

    def clean() -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        return [
            (pair.source, pair.target)
            for pair in itertools.islice(cleaner.clean(read_parallel(DATA)), n_pairs)
        ]

    pairs = stages.run("read_clean_tokenize", clean)

    links, offsets = stages.run("align_eflomal_gdfa", partial(_align, pairs))
    # compile (or load the cached machine code of) the kernels outside the timings
    warm = encode_corpus([AlignedPair(["a", "b"], ["x", "y"], [(0, 0), (1, 1)])])
    estimate_features(extract_rules(warm), lexical_table_from_corpus(warm), 30).to_encoded()
    corpus = stages.run("encode", partial(_encode, pairs, links, offsets))
    n = len(pairs)
    del pairs, links, offsets  # the token lists: only the encoded corpus is needed from here
    lexical = stages.run("lexical_table", lambda: lexical_table_from_corpus(corpus))
    config = ExtractionConfig()
    counts = stages.run("extract_aggregate_filter", lambda: extract_rules(corpus, config))
    table = stages.run("features_and_pruning", lambda: estimate_features(counts, lexical, 30))
    encoded = stages.run("to_encoded", table.to_encoded)
    peak_training = _rss_mb()
    arrays = {
        name: int(getattr(encoded, name).nbytes)
        for name in (
            "lhs",
            "source",
            "source_offsets",
            "target",
            "target_offsets",
            "features",
            "alignment",
            "alignment_offsets",
        )
    }
    grammar_cpu = sum(
        stages.figures[s]["cpu_seconds"]
        for s in ("encode", "lexical_table", "extract_aggregate_filter", "features_and_pruning")
    )
    result: dict[str, object] = {
        "corpus": str(DATA.name),
        "pairs_read": cleaner.report.pairs_in,
        "pairs": n,
        "source_tokens": len(corpus.source),
        "target_tokens": len(corpus.target),
        "links": len(corpus.link_i),
        "config": {
            "tight_hierarchical": config.tight_hierarchical,
            "min_hierarchical_count": config.min_hierarchical_count,
            "max_initial": [config.max_initial_source, config.max_initial_target],
            "max_rule_symbols": config.max_rule_symbols,
            "prune_limit": 30,
            "shards": counts.shards,
        },
        "stages": stages.figures,
        "extraction_plus_features_cpu_seconds": round(grammar_cpu, 1),
        "rule_instances": counts.instances,
        "unique_rules_before_min_count": counts.unfiltered,
        "unique_rules_after_min_count": len(counts),
        "unique_gapped_rules_after_min_count": _gapped(counts),
        "unique_phrase_rules": len(counts) - _gapped(counts),
        "rules_after_pruning_30": len(table),
        "unique_source_sides_kept": len(counts.source_sides),
        "unique_target_sides_kept": len(counts.target_sides),
        "encoded_array_bytes": arrays,
        "encoded_total_mb": round(sum(arrays.values()) / 2**20, 1),
        "peak_rss_mb_training": peak_training,
    }
    del table, encoded, counts
    # the old behaviour, for comparison, on a prefix (its tables are several times larger)
    prefix = min(LOOSE_PREFIX, len(corpus))
    loose = ExtractionConfig(tight_hierarchical=False, min_hierarchical_count=1)
    for label, cfg in (("loose_no_min_count", loose), ("tight_no_min_count", None)):
        sub = _prefix(corpus, prefix)
        c = time.process_time()
        cfg = cfg or ExtractionConfig(min_hierarchical_count=1)
        counts = extract_rules(sub, cfg)
        result[f"prefix_{prefix}_{label}"] = {
            "rule_instances": counts.instances,
            "unique_rules": len(counts),
            "cpu_seconds": round(time.process_time() - c, 1),
        }
    write_result(p.out, result, p, indent=2)
    print(json.dumps(result, indent=2))


def _align(
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    fwd, rev = align_corpus(pairs)
    links = symmetrize(fwd, rev, "grow-diag-final-and")
    return links.links, links.offsets


def _encode(
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]],
    links: npt.NDArray[np.int32],
    offsets: npt.NDArray[np.int64],
) -> EncodedCorpus:
    def aligned() -> Iterator[AlignedPair]:
        for k, (f, e) in enumerate(pairs):
            yield AlignedPair(
                f, e, [(i, j) for i, j in links[offsets[k] : offsets[k + 1]].tolist()]
            )

    return encode_corpus(aligned())


def _prefix(corpus: EncodedCorpus, n: int) -> EncodedCorpus:
    """The first ``n`` sentence pairs of an encoded corpus (vocabularies shared)."""
    so, to, lo = corpus.source_offsets, corpus.target_offsets, corpus.link_offsets
    return EncodedCorpus(
        corpus.source_vocab,
        corpus.target_vocab,
        corpus.source[: so[n]],
        so[: n + 1],
        corpus.target[: to[n]],
        to[: n + 1],
        corpus.link_i[: lo[n]],
        corpus.link_j[: lo[n]],
        lo[: n + 1],
    )


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("extract")

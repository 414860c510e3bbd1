"""Hiero extraction + aggregation + feature estimation on the first N de-en pairs.

Tokenisation is a plain lowercase whitespace split (a stand-in for service.text); alignments
come from the real aligner (eflomal both ways, grow-diag-final-and, :mod:`service.mt.align`),
whose time is reported but not counted. Writes ``bench/results/extract_rules.json``.

    nice -n 10 .venv/bin/python -m bench.bench_extract [N]
"""

from __future__ import annotations

import itertools
import json
import resource
import sys
import time
from pathlib import Path

from service.data.formats import read_parallel
from service.mt.align import align_corpus, symmetrize
from service.mt.extract import AlignedPair, ExtractionConfig, encode_corpus, extract_rules
from service.mt.features import estimate_features
from service.mt.lexical import LexicalTable

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "parallel" / "de-en.tsv.gz"
OUT = Path(__file__).resolve().parent / "results" / "extract_rules.json"
FULL_CORPUS_PAIRS = 525_000


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(n_pairs: int = 50_000) -> None:
    pairs = []
    for p in itertools.islice(read_parallel(DATA), n_pairs):
        f, e = p.foreign.lower().split(), p.english.lower().split()
        if f and e and len(f) <= 80 and len(e) <= 80:
            pairs.append((f, e))
    t = time.perf_counter()
    fwd, rev = align_corpus(pairs)
    links = symmetrize(fwd, rev, "grow-diag-final-and")
    t_align = time.perf_counter() - t
    aligned = [
        AlignedPair(f, e, [tuple(x) for x in links[k].tolist()]) for k, (f, e) in enumerate(pairs)
    ]
    # compile (or load the cached machine code of) the kernels outside the timing
    warm = encode_corpus(aligned[:20])
    estimate_features(extract_rules(warm), LexicalTable.from_corpus(warm), 30)
    rss_before = _rss_mb()

    times: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def stage(name: str, t: float, c: float) -> None:
        times[name] = time.perf_counter() - t
        cpu[name] = time.process_time() - c

    t, c = time.perf_counter(), time.process_time()
    corpus = encode_corpus(aligned)
    stage("encode", t, c)
    t, c = time.perf_counter(), time.process_time()
    lexical = LexicalTable.from_corpus(corpus)
    stage("lexical_table", t, c)
    t, c = time.perf_counter(), time.process_time()
    counts = extract_rules(corpus, ExtractionConfig())
    stage("extract_and_aggregate", t, c)
    t, c = time.perf_counter(), time.process_time()
    table = estimate_features(counts, lexical, 30)
    stage("features_and_pruning", t, c)
    total, total_cpu = sum(times.values()), sum(cpu.values())
    rss_after = _rss_mb()
    t, c = time.perf_counter(), time.process_time()
    encoded = table.to_encoded()
    stage("to_encoded_for_grammar_py", t, c)
    t, c = time.perf_counter(), time.process_time()
    n_rule_objects = sum(1 for _ in itertools.islice(table.rules(), 1_000_000))
    stage("first_1M_as_Rule_objects", t, c)

    n = len(pairs)
    result = {
        "pairs": n,
        "source_tokens": len(corpus.source),
        "target_tokens": len(corpus.target),
        "links": len(corpus.link_i),
        "alignment_seconds_not_counted": round(t_align, 1),
        "wall_seconds": {k: round(v, 2) for k, v in times.items()},
        "cpu_seconds": {k: round(v, 2) for k, v in cpu.items()},
        "total_wall_seconds": round(total, 2),
        "total_cpu_seconds": round(total_cpu, 2),
        "rule_instances": counts.instances,
        "instances_per_cpu_second": round(counts.instances / cpu["extract_and_aggregate"]),
        "unique_rules": len(counts),
        "unique_source_sides": len(counts.source_sides),
        "unique_target_sides": len(counts.target_sides),
        "rules_after_pruning_30": len(table),
        "encoded_alignment_points": len(encoded.alignment),
        "rule_objects_timed": n_rule_objects,
        "peak_rss_mb_before_extraction": round(rss_before),
        "peak_rss_mb_after_extraction": round(rss_after),
        "extrapolated_full_de_en_cpu_seconds": round(total_cpu * FULL_CORPUS_PAIRS / n),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)

"""Cost of splitting query compounds (:mod:`service.text.compounds`) with the full de-en bundle.

* the words the service splits in the de dev queries (paragraph, short and question sets: every
  token the grammar does not know and the English LM does not know), timed with the exact
  dynamic programme (:func:`~service.text.compounds.best_split`) and with the enumeration of
  every split (:func:`~service.text.compounds.best_split_reference`) in the same process — the
  ratio is the figure — and checked to agree;
* the longest words the service tries (``CompoundRule.max_length``, 60 letters): random letters,
  by the dynamic programme; and words packed with known parts ("text" × 15), by both — the
  enumeration visits every split, so its time grows exponentially with the number of parts.

Writes ``bench/results/compounds.json`` (``--out``). Run: ``.venv/bin/python -m bench compounds``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.bench_querysets import load_set
from bench.common import RESULTS_DIR, ROOT, Help, bundle_signature, write_result
from service.mt.bundle import load_bundle
from service.retrieval.query import query_sentences
from service.text.compounds import best_split, best_split_reference

REPEATS = 5


def _time(fn: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass(frozen=True)
class Params:
    model: Annotated[Path, Help("bundle (with a compound splitter)")] = ROOT / "models" / "de-en"
    out: Annotated[Path, Help("JSON output")] = RESULTS_DIR / "compounds.json"


def run(p: Params) -> dict[str, Any]:
    bundle = load_bundle(p.model)
    sp = bundle.compound_splitter
    assert sp is not None
    rule, count = sp.rule, sp.part_count
    words: set[str] = set()
    for name in ("paragraph", "short", "question"):
        queries, _ = load_set(name, "de")
        for text in queries.values():
            for sent in query_sentences(text, "de"):
                words.update(w for w in sent if sp.split_word(w) != (w,))
    candidates = sorted(words)
    for w in candidates:
        assert best_split(w, count, rule) == best_split_reference(w, count, rule), w
    dp = _time(lambda: [best_split(w, count, rule) for w in candidates])
    ref = _time(lambda: [best_split_reference(w, count, rule) for w in candidates])
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzäöüß"
    worst = ["".join(rng.choice(letters) for _ in range(rule.max_length)) for _ in range(200)]
    worst_s = _time(lambda: [best_split(w, count, rule) for w in worst])
    # many known parts: the enumeration visits every split, the programme stays polynomial
    packed = ["text" * 15, "datenbank" * 6 + "text", "seite" * 12]
    assert all(best_split(w, count, rule) == best_split_reference(w, count, rule) for w in packed)
    packed_dp = _time(lambda: [best_split(w, count, rule) for w in packed])
    packed_ref = _time(lambda: [best_split_reference(w, count, rule) for w in packed])
    result = {
        "bundle": f"models/{bundle.name}",
        "split_words_in_dev_queries": len(candidates),
        "examples": {w: list(sp.split_word(w)) for w in candidates[:12]},
        "dp_ms_per_word": 1000 * dp / len(candidates),
        "reference_ms_per_word": 1000 * ref / len(candidates),
        "reference_over_dp": ref / dp,
        "worst_case_words": len(worst),
        "worst_case_length": rule.max_length,
        "worst_case_ms_per_word": 1000 * worst_s / len(worst),
        "packed_words": packed,
        "packed_dp_ms_per_word": 1000 * packed_dp / len(packed),
        "packed_reference_ms_per_word": 1000 * packed_ref / len(packed),
        "repeats": REPEATS,
    }
    write_result(p.out, result, p, signatures={"bundle": bundle_signature(bundle)})
    print(json.dumps(result, indent=1, ensure_ascii=False))
    return result


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("compounds")

"""Speed of the tokenizers and, with ``--clean``, the full-corpus cleaning.

``main()`` measures tokens per second of the English tokenizer on document text (every 10th
document of ``clir/docs.jsonl.gz``, line by line as the index tokenises it; sacremoses itself
on every 100th, for the ratio), of the German and Chinese tokenizers on the foreign sides of
the parallel corpora, and of :func:`normalize`. ``python -m bench.bench_text --clean`` also
cleans all of de-en and zh-en and records the report of each (run it with ``nice``).
Results: ``bench/results/text.json`` (and ``text_cleaning.json``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from bench.common import DATA, RESULTS_DIR
from service.data import read_parallel
from service.text import get_tokenizer, normalize
from service.text.clean import CorpusCleaner
from service.text.tokenize import MosesWordTokenizer

RESULTS = RESULTS_DIR


def _doc_lines(step: int) -> list[str]:
    lines: list[str] = []
    with gzip.open(DATA / "clir" / "docs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, 0, None, step):
            lines += [t for t in json.loads(line)["text"].split("\n") if t.strip()]
    return lines


def _foreign_lines(lang: str, step: int) -> list[str]:
    pairs = read_parallel(DATA / "parallel" / f"{lang}-en.tsv.gz")
    return [normalize(p.foreign) for p in itertools.islice(pairs, 0, None, step)]


def _rate(fn: Callable[[str], list[str]], lines: Iterable[str]) -> dict[str, float]:
    lines = list(lines)
    start = time.perf_counter()
    tokens = sum(len(fn(line)) for line in lines)
    seconds = time.perf_counter() - start
    words = sum(len(line.split()) for line in lines)
    chars = sum(len(line) for line in lines)
    return {
        "lines": len(lines),
        "whitespace_words": words,
        "chars": chars,
        "tokens": tokens,
        "seconds": round(seconds, 3),
        "tokens_per_second": round(tokens / seconds),
        "words_per_second": round(words / seconds),
        "chars_per_second": round(chars / seconds),
    }


def speed() -> dict[str, Any]:
    out: dict[str, Any] = {}
    docs = _doc_lines(10)
    out["en_fast_docs_every_10th"] = _rate(get_tokenizer("en").tokenize, docs)
    slow = MosesWordTokenizer("en", fast=False)
    sample = _doc_lines(100)
    out["en_sacremoses_docs_every_100th"] = _rate(slow.tokenize, sample)
    fresh = MosesWordTokenizer("en")  # a cold cache, same lines as sacremoses
    out["en_fast_cold_docs_every_100th"] = _rate(fresh.tokenize, sample)
    out["de_fast_parallel_every_10th"] = _rate(
        get_tokenizer("de").tokenize, _foreign_lines("de", 10)
    )
    zh_lines = _foreign_lines("zh", 10)
    get_tokenizer("zh").tokenize("预热")  # load jieba's dictionary outside the timing
    out["zh_parallel_every_10th"] = _rate(get_tokenizer("zh").tokenize, zh_lines)
    out["normalize_docs_every_10th"] = _rate(lambda s: normalize(s).split(), docs)
    return out


def clean_full() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lang in ("de", "zh"):
        cleaner = CorpusCleaner(lang, "en")
        start = time.perf_counter()
        for _ in cleaner.clean(read_parallel(DATA / "parallel" / f"{lang}-en.tsv.gz")):
            pass
        report = cleaner.report.to_dict()
        report["seconds"] = round(time.perf_counter() - start, 1)
        out[f"{lang}-en"] = report
        print(cleaner.report, file=sys.stderr)
    return out


def main(clean: bool = False) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = speed()
    (RESULTS / "text.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for name, r in results.items():
        print(f"{name:<34} {r['tokens_per_second']:>10,} tokens/s  ({r['tokens']:,} tokens)")
    if clean:
        report = clean_full()
        path = RESULTS / "text_cleaning.json"
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(clean="--clean" in sys.argv[1:])

"""Speed of the tokenizers and, with ``--clean``, the full-corpus cleaning.

``python -m bench text`` measures tokens per second of the English tokenizer on document text
(every 10th document of ``clir/docs.jsonl.gz``, ``--step``, line by line as the index tokenises
it; sacremoses itself on every 100th, ``--slow-step``, for the ratio), of the German and
Chinese tokenizers on the foreign sides of the parallel corpora (every ``--step``-th pair), and
of :func:`normalize`. ``--clean`` also cleans all of de-en and zh-en and records the report of
each (run it with ``nice``). Results: ``bench/results/text.json`` (``--out``; and
``text_cleaning.json``); ``text-quick`` samples every 100th document and writes under
``bench/results/quick/``.
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, Help, write_result
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


def speed(step: int = 10, slow_step: int = 100) -> dict[str, Any]:
    out: dict[str, Any] = {}
    docs = _doc_lines(step)
    out[f"en_fast_docs_every_{step}th"] = _rate(get_tokenizer("en").tokenize, docs)
    slow = MosesWordTokenizer("en", fast=False)
    sample = _doc_lines(slow_step)
    out[f"en_sacremoses_docs_every_{slow_step}th"] = _rate(slow.tokenize, sample)
    fresh = MosesWordTokenizer("en")  # a cold cache, same lines as sacremoses
    out[f"en_fast_cold_docs_every_{slow_step}th"] = _rate(fresh.tokenize, sample)
    out[f"de_fast_parallel_every_{step}th"] = _rate(
        get_tokenizer("de").tokenize, _foreign_lines("de", step)
    )
    zh_lines = _foreign_lines("zh", step)
    get_tokenizer("zh").tokenize("预热")  # load jieba's dictionary outside the timing
    out[f"zh_parallel_every_{step}th"] = _rate(get_tokenizer("zh").tokenize, zh_lines)
    out[f"normalize_docs_every_{step}th"] = _rate(lambda s: normalize(s).split(), docs)
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


@dataclass(frozen=True)
class Params:
    step: Annotated[int, Help("every N-th document and parallel pair")] = 10
    slow_step: Annotated[int, Help("every N-th document for sacremoses itself")] = 100
    clean: Annotated[bool, Help("also clean the full corpora (text_cleaning.json)")] = False
    out: Annotated[Path, Help("JSON output of the speeds")] = RESULTS / "text.json"


def run(p: Params) -> None:
    results = speed(p.step, p.slow_step)
    signatures = {lang: get_tokenizer(lang).signature() for lang in ("en", "de", "zh")}
    write_result(p.out, results, p, signatures=signatures, indent=2)
    for name, r in results.items():
        print(f"{name:<34} {r['tokens_per_second']:>10,} tokens/s  ({r['tokens']:,} tokens)")
    if p.clean:
        report = clean_full()
        write_result(RESULTS / "text_cleaning.json", report, p, indent=2)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("text")

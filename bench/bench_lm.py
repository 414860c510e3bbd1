"""Benchmark of the 4-gram modified Kneser-Ney LM.

Estimates the LM on the full ``lm/en.txt.gz`` with :mod:`service.mt.training.lm_estimate` (wall
time, peak RSS, ARPA size), loads it in KenLM (load time) and measures perplexity on held-out
English: the reference sentences of the de-en translation-retrieval dev set (qrels joined with
``tr/pool.en.tsv.gz``). If KenLM's ``lmplz`` is available (``$LMPLZ`` or on PATH), it estimates a
model from the same tokenised text and both models are compared on the same held-out text
(perplexity and the largest per-word difference of log probabilities).

Note: the LM text contains the English of every LibreOffice help page, dev pages included
(data README §4), so the held-out perplexity is optimistic for those sentences.

Run: ``nice -n 10 .venv/bin/python -m bench lm`` → ``bench/results/lm.json`` (``--out``).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from bench.common import DATA, RESULTS_DIR, Help, write_result
from service.data.io import iter_lines
from service.mt.lm import KenLM
from service.mt.training.lm_estimate import (
    build_binary,
    estimate_kneser_ney,
    read_lm_text,
    simple_tokenize,
    write_arpa,
)
from service.text.tokenize import preprocess

RESULTS = RESULTS_DIR / "lm.json"
ORDER = 4


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def tokenise_lm_text(src: Path, dst: Path) -> dict[str, Any]:
    """Tokenise the LM text once (service.text, English) into one line per sentence."""
    start = time.perf_counter()
    lines = words = 0
    with gzip.open(dst, "wt", encoding="utf-8", compresslevel=1) as out:
        for _, line in iter_lines(src):
            tokens = preprocess(line, "en")
            if tokens:
                out.write(" ".join(tokens) + "\n")
                lines += 1
                words += len(tokens)
    return {"seconds": round(time.perf_counter() - start, 1), "lines": lines, "tokens": words}


def held_out_sentences() -> list[list[str]]:
    """English references of the de-en translation-retrieval dev queries, tokenised."""
    wanted: set[str] = set()
    for _, line in iter_lines(DATA / "tr" / "de-en" / "qrels.dev.txt"):
        fields = line.split()
        if len(fields) == 4:
            wanted.add(fields[2])
    sentences = []
    for _, line in iter_lines(DATA / "tr" / "pool.en.tsv.gz"):
        pool_id, _, text = line.partition("\t")
        if pool_id in wanted:
            tokens = preprocess(text, "en")
            if tokens:
                sentences.append(tokens)
    return sentences


def perplexity(lm: KenLM, sentences: list[list[str]]) -> dict[str, Any]:
    total = 0.0
    events = oov = 0
    for sentence in sentences:
        total += lm.sentence_score(sentence)
        events += len(sentence) + 1  # words and </s>
        oov += sum(lm.is_oov(w) for w in sentence)
    return {
        "perplexity": round(math.exp(-total / events), 3),
        "log_prob_per_event": round(total / events, 5),
        "events": events,
        "oov_tokens": oov,
    }


def max_word_difference(a: KenLM, b: KenLM, sentences: list[list[str]]) -> float:
    worst = 0.0
    for sentence in sentences:
        sa, sb = a.begin_state(), b.begin_state()
        for word in sentence:
            pa, sa = a.score(sa, word)
            pb, sb = b.score(sb, word)
            worst = max(worst, abs(pa - pb))
        worst = max(worst, abs(a.end_score(sa) - b.end_score(sb)))
    return worst


def _load(path: Path) -> tuple[KenLM, float]:
    start = time.perf_counter()
    lm = KenLM(path)
    return lm, round(time.perf_counter() - start, 3)


def run_lmplz(lmplz: str, text: Path, arpa: Path, workdir: Path) -> dict[str, Any]:
    start = time.perf_counter()
    with gzip.open(text, "rb") as src, arpa.open("wb") as out:
        # Started through a shell that forks again, so that lmplz's own peak-RSS report does
        # not include this process's resident set, inherited at fork and kept across exec.
        proc = subprocess.run(
            [
                "sh",
                "-c",
                '"$0" "$@"; exit $?',
                lmplz,
                *("-o", str(ORDER), "-S", "2G", "-T", str(workdir), "--skip_symbols"),
            ],
            stdin=src,
            stdout=out,
            stderr=subprocess.PIPE,
            check=False,
        )
    seconds = round(time.perf_counter() - start, 1)
    log = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        return {"error": log[-2000:]}
    stats = []
    lines = log.splitlines()
    if "Statistics:" in lines:
        at = lines.index("Statistics:")
        stats = lines[at + 1 : at + 1 + ORDER]
    # lmplz reports its own peak RSS ("RSSMax:<kB>")
    match = re.search(r"RSSMax:(\d+) kB", log)
    return {
        "seconds": seconds,
        "peak_rss_mb": round(int(match.group(1)) / 1024, 1) if match else None,
        "arpa_mb": round(arpa.stat().st_size / 2**20, 1),
        "statistics": stats,
    }


@dataclass(frozen=True)
class Params:
    out: Annotated[Path, Help("JSON output")] = RESULTS


def run(p: Params) -> None:
    results: dict[str, Any] = {"order": ORDER, "lm_text": str(DATA / "lm" / "en.txt.gz")}
    workdir = Path(tempfile.mkdtemp(prefix="bench_lm_", dir=os.environ.get("BENCH_TMP")))
    try:
        text = workdir / "en.tok.gz"
        results["tokenise"] = tokenise_lm_text(DATA / "lm" / "en.txt.gz", text)
        print(f"tokenised: {results['tokenise']}", file=sys.stderr)

        arpa = workdir / "en.4.arpa"
        rss_before = _peak_rss_mb()
        start = time.perf_counter()
        model = estimate_kneser_ney(read_lm_text(text, simple_tokenize), ORDER)
        estimated = time.perf_counter()
        write_arpa(model, arpa)
        written = time.perf_counter()
        results["estimate"] = {
            "seconds_read_and_estimate": round(estimated - start, 1),
            "seconds_write_arpa": round(written - estimated, 1),
            "peak_rss_mb": round(_peak_rss_mb(), 1),
            "peak_rss_mb_before_estimation": round(rss_before, 1),
            "sentences": model.sentences,
            "words": model.words,
            "special_tokens_dropped": model.special_tokens_dropped,
            "vocabulary": len(model.vocab),
            "ngrams": model.counts(),
            "discounts": [list(map(lambda d: round(d, 6), s.discounts)) for s in model.stats],
            "count_of_counts": [list(s.count_of_counts) for s in model.stats],
            "arpa_mb": round(arpa.stat().st_size / 2**20, 1),
        }
        del model
        print(f"estimated: {results['estimate']}", file=sys.stderr)

        held_out = held_out_sentences()
        results["held_out"] = {
            "source": "tr/de-en qrels.dev.txt joined with tr/pool.en.tsv.gz",
            "sentences": len(held_out),
            "tokens": sum(map(len, held_out)),
        }
        ours, load_s = _load(arpa)
        results["estimate"]["kenlm_load_arpa_seconds"] = load_s
        results["estimate"]["held_out"] = perplexity(ours, held_out)
        print(f"ours on held-out: {results['estimate']['held_out']}", file=sys.stderr)

        lmplz = os.environ.get("LMPLZ") or shutil.which("lmplz")
        if lmplz is None:
            results["lmplz"] = {"skipped": "lmplz not found (set $LMPLZ or put it on PATH)"}
        else:
            other = workdir / "lmplz.4.arpa"
            results["lmplz"] = run_lmplz(lmplz, text, other, workdir)
            if "error" not in results["lmplz"]:
                theirs, load_s = _load(other)
                results["lmplz"]["kenlm_load_arpa_seconds"] = load_s
                results["lmplz"]["held_out"] = perplexity(theirs, held_out)
                results["lmplz"]["max_abs_word_logprob_difference_vs_ours"] = round(
                    max_word_difference(ours, theirs, held_out), 7
                )
                del theirs
            binary_exe = os.environ.get("BUILD_BINARY") or str(
                Path(lmplz).with_name("build_binary")
            )
            if Path(binary_exe).is_file():
                start = time.perf_counter()
                binary = build_binary(arpa, workdir / "en.4.binary", exe=binary_exe)
                if binary is not None:
                    results["binary"] = {
                        "build_seconds": round(time.perf_counter() - start, 1),
                        "mb": round(binary.stat().st_size / 2**20, 1),
                    }
                    _, results["binary"]["kenlm_load_seconds"] = _load(binary)
                    results["binary"]["note"] = "KenLM maps the binary file lazily (mmap)"
        print(f"lmplz: {results['lmplz']}", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_result(p.out, results, p, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("lm")

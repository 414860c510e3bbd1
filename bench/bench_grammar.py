"""Benchmark of the binary grammar: write time, size, load time, lookup time.

Builds a synthetic grammar shaped like Hiero rules (Chiang 2007 §3: phrases of 1-5 words and
patterns with one or two non-adjacent gaps over spans of at most 10 words) from real German
sentences of ``../shared/data/parallel/de-en.tsv.gz``, so that a sentence's n-grams and gapped
patterns hit as they would in a real grammar: each source side is cut out of a corpus sentence
at a random position (so frequent n-grams are frequent patterns) and gets one target side per
occurrence, at most 30, made of words of the aligned English sentence. Feature values and
alignments are random but well-formed. The 100 lookup sentences (20 tokens each) are held out
from the pattern sampling.

Issue targets on this 2-core machine: the grammar loads in under 10 s, looking up all rules of
a 20-word sentence takes under 50 ms. Timings are wall-clock on a shared machine; load times
are with a warm page cache (the grammar was just written).

Run: ``nice -n 10 .venv/bin/python -m bench grammar [--rules N]`` (``grammar-quick``: 100,000
rules).
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np

from bench.common import DATA as SHARED_DATA
from bench.common import RESULTS_DIR, ROOT, Help, percentile, write_result
from service.core.csr import ptr_from_counts
from service.data.formats import read_parallel
from service.mt.grammar import (
    PAD,
    EncodedRules,
    Grammar,
    nt_symbol,
    write_encoded,
)
from service.mt.rules import RULE_FEATURES

DATA = SHARED_DATA / "parallel" / "de-en.tsv.gz"
RESULTS = RESULTS_DIR / "grammar.json"
TOKEN = re.compile(r"\w+|[^\w\s]")
SENTENCE_LEN = 20
N_SENTENCES = 100
MAX_SPAN = 10
MAX_TARGETS = 30

# Hiero source shapes (t = terminal, X = gap) and how often each is sampled
SHAPES = {
    "t": 6,
    "tt": 6,
    "ttt": 5,
    "tttt": 4,
    "ttttt": 3,
    "tX": 3,
    "Xt": 3,
    "tXt": 4,
    "ttX": 2,
    "Xtt": 2,
    "ttXt": 2,
    "tXtt": 2,
    "XtX": 3,
    "tXtX": 2,
    "XtXt": 2,
    "tXtXt": 2,
    "XttX": 1,
    "ttXtX": 1,
}


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def _flatten(sents: list[list[str]], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    ids = [vocab.setdefault(w, len(vocab)) for s in sents for w in s]
    return np.array(ids, dtype=np.int64), ptr_from_counts([len(s) for s in sents])


def sample_patterns(
    rng: np.random.Generator, words: np.ndarray, sent_of: np.ndarray, sent_end: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` sampled occurrences: padded source matrix [n, 5] and the sentence of each."""
    names = list(SHAPES)
    weights = np.array([SHAPES[s] for s in names], dtype=float)
    which = rng.choice(len(names), size=n, p=weights / weights.sum())
    mats, sents = [], []
    for si, shape in enumerate(names):
        m = int((which == si).sum())
        pos = rng.integers(0, len(words), size=m)
        cur = pos.copy()
        mat = np.full((m, 5), PAD, dtype=np.int64)
        k = 0
        for c, sym in enumerate(shape):
            if sym == "t":
                mat[:, c] = words[np.minimum(cur, len(words) - 1)]
                cur = cur + 1
            else:
                k += 1
                mat[:, c] = nt_symbol(0, k)
                cur = cur + rng.integers(1, 4, size=m)
        ok = (cur <= sent_end[sent_of[pos]]) & (cur - pos <= MAX_SPAN)
        mats.append(mat[ok])
        sents.append(sent_of[pos[ok]])
    return np.concatenate(mats), np.concatenate(sents)


def _unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(mat, axis=0, return_index=True, return_counts=True)``, but fast: each row
    packs into two int64 keys (terminal ids < 2**20, gaps and padding below them)."""
    code = np.where(mat == PAD, 0, np.where(mat < 0, -mat, mat + 3))
    assert code.max() < 2**21
    hi = (code[:, 0] << 42) | (code[:, 1] << 21) | code[:, 2]
    lo = (code[:, 3] << 21) | code[:, 4]
    order = np.lexsort((lo, hi))
    hi, lo = hi[order], lo[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(order)))
    return mat[order[starts]], order[starts], counts


def build_grammar(n_rules: int, rng: np.random.Generator) -> tuple[EncodedRules, list[list[str]]]:
    t0 = time.perf_counter()
    de: list[list[str]] = []
    en: list[list[str]] = []
    for pair in read_parallel(DATA):
        f, e = tokenize(pair.foreign), tokenize(pair.english)
        if f and e:
            de.append(f)
            en.append(e)
    long = [i for i, s in enumerate(de) if len(s) >= SENTENCE_LEN]
    held = set(rng.choice(long, size=N_SENTENCES, replace=False).tolist())
    tests = [de[i][:SENTENCE_LEN] for i in sorted(held)]
    keep = [i for i in range(len(de)) if i not in held]
    de = [de[i] for i in keep]
    en = [en[i] for i in keep]
    src_vocab: dict[str, int] = {}
    tgt_vocab: dict[str, int] = {}
    words, off = _flatten(de, src_vocab)
    ewords, eoff = _flatten(en, tgt_vocab)
    sent_of = np.repeat(np.arange(len(de)), np.diff(off))
    print(f"corpus: {len(de)} sentences, {len(words)} tokens ({time.perf_counter() - t0:.1f} s)")

    # sample occurrences until their distinct source sides carry enough target sides
    n_occ = n_rules
    while True:
        mat, sent = sample_patterns(rng, words, sent_of, off[1:], n_occ)
        pats, first, counts = _unique_rows(mat)
        n_tgt = np.minimum(counts, MAX_TARGETS)
        if n_tgt.sum() >= n_rules:
            break
        n_occ = int(n_occ * 1.5 * n_rules / n_tgt.sum())
    order = rng.permutation(len(pats))
    cum = np.cumsum(n_tgt[order])
    chosen = order[: int(np.searchsorted(cum, n_rules)) + 1]
    pats, sent, n_tgt = pats[chosen], sent[first[chosen]], n_tgt[chosen]
    print(f"{len(pats)} source sides from {n_occ} sampled occurrences")

    rule_pat = np.repeat(np.arange(len(pats)), n_tgt)[:n_rules]
    n = len(rule_pat)
    src = pats[rule_pat]
    src_len = (src != PAD).sum(1)
    is_gap = (src < 0) & (src != PAD)
    arity = is_gap.sum(1)
    n_terms = src_len - arity
    # target: terminals from the aligned English sentence, gaps in or out of order
    t_terms = np.clip(n_terms + rng.integers(-1, 3, size=n), 1, 6)
    t_len = t_terms + arity
    width = int(t_len.max())
    s = sent[rule_pat]
    elen = np.diff(eoff)[s]
    tgt = np.full((n, width), PAD, dtype=np.int64)
    for c in range(width):
        pick = eoff[s] + (rng.random(n) * elen).astype(np.int64)
        tgt[:, c] = np.where(c < t_len, ewords[pick], PAD)
    slot1 = (rng.random(n) * t_len).astype(np.int64)
    tgt[np.arange(n)[arity >= 1], slot1[arity >= 1]] = nt_symbol(0, 1)
    two = np.flatnonzero(arity == 2)
    slot2 = (slot1[two] + 1 + (rng.random(len(two)) * (t_len[two] - 1)).astype(np.int64)) % t_len[
        two
    ]
    tgt[two, slot2] = nt_symbol(0, 2)
    # features: log probabilities, counts, arity
    feats = np.zeros((n, len(RULE_FEATURES)), dtype=np.float32)
    feats[:, :4] = -rng.exponential(2.0, size=(n, 4))
    feats[:, 4] = np.log1p(rng.exponential(2.0, size=n))
    feats[:, 5] = (rng.random(n) < 0.4).astype(np.float32)
    feats[:, 6] = arity
    # alignments: 1-3 points between terminals' positions
    n_pts = rng.integers(1, 4, size=n)
    rule_of_pt = np.repeat(np.arange(n), n_pts)
    align = np.stack(
        [
            (rng.random(len(rule_of_pt)) * src_len[rule_of_pt]).astype(np.int64),
            (rng.random(len(rule_of_pt)) * t_len[rule_of_pt]).astype(np.int64),
        ],
        axis=1,
    )
    enc = EncodedRules(
        source_vocab=list(src_vocab),
        target_vocab=list(tgt_vocab),
        labels=["X"],
        feature_names=list(RULE_FEATURES),
        lhs=np.zeros(n, dtype=np.int64),
        source=src[src != PAD],
        source_offsets=ptr_from_counts(src_len),
        target=tgt[tgt != PAD],
        target_offsets=ptr_from_counts(t_len),
        features=feats,
        alignment=align,
        alignment_offsets=ptr_from_counts(n_pts),
    )
    print(f"built {n} rules in {time.perf_counter() - t0:.1f} s")
    return enc, tests


@dataclass(frozen=True)
class Params:
    rules: Annotated[int, Help("synthetic rules")] = 10_000_000
    seed: Annotated[int, Help("random seed")] = 13
    out: Annotated[Path, Help("JSON output")] = RESULTS


def run(args: Params) -> None:
    rng = np.random.default_rng(args.seed)
    enc, tests = build_grammar(args.rules, rng)
    n_rules = len(enc)
    work = Path(tempfile.mkdtemp(prefix="bench-grammar-"))
    try:
        t0 = time.perf_counter()
        path = write_encoded(enc, work / "grammar")
        write_s = time.perf_counter() - t0
        del enc
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"wrote in {write_s:.1f} s, {size / 2**20:.0f} MiB")

        loads = {}
        for verify in (False, True):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                g = Grammar.load(path, verify=verify)
                times.append(time.perf_counter() - t0)
            loads[verify] = statistics.median(times)
        print(f"load: {loads[False]:.2f} s (shapes), {loads[True]:.2f} s (with checksums)")

        g = Grammar.load(path, verify=False)
        for toks in tests[:5]:  # warm up: touch the trie pages
            g.filter(toks, MAX_SPAN)
        filt, full, n_pat, n_rule = [], [], [], []
        for toks in tests:
            t0 = time.perf_counter()
            sg = g.filter(toks, MAX_SPAN)
            t1 = time.perf_counter()
            for i, j in sg.spans():
                sg.rule_matches(i, j)
            t2 = time.perf_counter()
            filt.append((t1 - t0) * 1e3)
            full.append((t2 - t0) * 1e3)
            n_pat.append(len(sg))
            n_rule.append(sg.num_rules)
        result = {
            "benchmark": "grammar",
            "machine": {"cores": 2, "python": platform.python_version(), "numpy": np.__version__},
            "data": str(DATA.relative_to(ROOT.parent)),
            "grammar": {
                "rules": n_rules,
                "source_sides": g.num_patterns,
                "target_sides": g.manifest["counts"]["targets"],
                "source_vocab": len(g.source_vocab),
                "target_vocab": len(g.target_vocab),
                "features": len(g.feature_names),
            },
            "write_seconds": round(write_s, 2),
            "size_on_disk_mib": round(size / 2**20, 1),
            "bytes_per_rule": round(size / max(n_rules, 1), 1),
            "load_seconds": round(loads[False], 3),
            "load_seconds_with_checksums": round(loads[True], 3),
            "lookup": {
                "sentences": len(tests),
                "tokens_per_sentence": SENTENCE_LEN,
                "max_span": MAX_SPAN,
                "filter_ms_median": round(statistics.median(filt), 2),
                "filter_ms_p90": round(percentile(filt, 90), 2),
                "filter_and_rule_lists_ms_median": round(statistics.median(full), 2),
                "filter_and_rule_lists_ms_p90": round(percentile(full, 90), 2),
                "pattern_matches_median": int(statistics.median(n_pat)),
                "rule_matches_median": int(statistics.median(n_rule)),
                "rule_matches_max": int(max(n_rule)),
            },
            "targets": {"load_seconds": 10, "lookup_ms": 50},
            "meets_targets": loads[True] < 10 and percentile(filt, 90) < 50,
            "notes": "warm page cache; lookup = Grammar.filter (all rules of all spans as "
            "contiguous id blocks); 'and_rule_lists' also builds per-span (rule, gaps) lists",
        }
        write_result(args.out, result, args, indent=2)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from bench.cli import main_for

    main_for("grammar")

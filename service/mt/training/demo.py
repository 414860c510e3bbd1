"""The small demo bundle committed under ``models/demo-de-en``.

``make serve`` on a fresh clone needs a model without the full training run. The demo is a real
bundle, built by the same pipeline (:func:`service.mt.training.train.train_model`) from a subset:
every LibreOffice-help paragraph pair of the training pages plus a deterministic 1-in-``n`` sample
of the gettext pairs, a grammar kept small by stricter pruning (fewer target sides per source side,
gapped rules seen in more sentence pairs), and a language model on the English side of that subset
plus the English LibreOffice help pages (the demo's document collection).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from service.data import read_docs, read_parallel, write_parallel
from service.data.io import atomic_write, open_output
from service.mt.bundle import GRAMMAR_DIR, MANIFEST
from service.mt.grammar import load_grammar, write_grammar
from service.mt.rules import ARITY, LOG_COUNT
from service.mt.training.train import TrainConfig, train_model


def _keep(origin: str, foreign: str, one_in: int) -> bool:
    if origin.startswith("lohelp:"):
        return True
    digest = hashlib.sha1(f"{origin}\t{foreign}".encode()).digest()
    return digest[0] % one_in == 0


def build_demo(
    data_dir: Path,
    out: Path,
    *,
    src: str = "de",
    gettext_one_in: int = 10,
    rule_table_limit: int = 5,
    min_hierarchical_count: int = 5,
    lm_order: int = 3,
    min_phrase_count: float = 1.5,
    min_gapped_count: float = 3.0,
) -> dict[str, Any]:
    """Build the demo bundle at ``out``; returns its manifest."""
    work = Path(tempfile.mkdtemp(prefix="clir-demo-"))
    try:
        parallel = work / "parallel.tsv.gz"
        pairs = [
            p
            for p in read_parallel(data_dir / "parallel" / f"{src}-en.tsv.gz", on_error="skip")
            if _keep(p.origin, p.foreign, gettext_one_in)
        ]
        write_parallel(parallel, pairs)
        lm_text = work / "lm.txt"
        with open_output(lm_text) as fh:
            for p in pairs:
                fh.write(p.english + "\n")
            for doc in read_docs(data_dir / "clir" / "docs.jsonl.gz"):
                if doc.id.startswith("lo:"):
                    fh.write(doc.title + "\n" + doc.text + "\n")
        config = TrainConfig(
            src=src,
            rule_table_limit=rule_table_limit,
            min_hierarchical_count=min_hierarchical_count,
            lm_order=lm_order,
        )
        manifest = train_model(parallel, lm_text, out, config, force=True)
        shutil.rmtree(out.with_name(out.name + ".work"), ignore_errors=True)
        kept = filter_grammar(out / GRAMMAR_DIR, min_phrase_count, min_gapped_count)
        manifest["counts"]["grammar"]["rules_demo_filtered"] = kept
        manifest["settings"]["demo_filter"] = {
            "min_phrase_count": min_phrase_count,
            "min_gapped_count": min_gapped_count,
            "single_words_always": True,
        }
        with atomic_write(out / MANIFEST) as tmp:
            tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)


def filter_grammar(path: Path, min_phrase_count: float, min_gapped_count: float) -> int:
    """Keep phrase rules seen ``min_phrase_count`` times or translating a single word, and
    rules with gaps seen ``min_gapped_count`` times; rewrite the grammar in place (atomically).
    Returns the number of rules kept."""
    grammar = load_grammar(path)
    names = grammar.feature_names
    feats = np.asarray(grammar.features)
    count = np.expm1(feats[:, names.index(LOG_COUNT)])
    arity = feats[:, names.index(ARITY)]
    offsets = np.asarray(grammar.pattern_offsets, dtype=np.int64)
    starts = np.asarray(grammar.pattern_rules, dtype=np.int64)
    pattern_len: np.ndarray = offsets[1:] - offsets[:-1]
    rules_per_pattern: np.ndarray = starts[1:] - starts[:-1]
    source_len = np.repeat(pattern_len, rules_per_pattern)
    keep = np.where(
        arity == 0,
        (count >= min_phrase_count) | (source_len == 1),
        count >= min_gapped_count,
    )
    ids = np.flatnonzero(keep).tolist()
    tmp = path.with_name(path.name + ".filtered")
    if tmp.exists():
        shutil.rmtree(tmp)
    write_grammar((grammar.rule(i) for i in ids), tmp, feature_names=list(names))
    del grammar, feats
    old = path.with_name(path.name + ".unfiltered")
    path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old)
    return len(ids)

"""The small demo bundle committed under ``models/demo-de-en`` (issue #3 item 8).

``make serve`` on a fresh clone needs a model without the full training run. The demo is a
real bundle, built by the same pipeline (:func:`service.mt.train.train_model`) from a subset:
every LibreOffice-help paragraph pair of the training pages plus a deterministic 1-in-``n``
sample of the gettext pairs, a grammar kept small by stricter pruning (fewer target sides per
source side, gapped rules seen in more sentence pairs), and a language model on the English
side of that subset plus the English LibreOffice help pages (the demo's document collection).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from service.data import read_docs, read_parallel, write_parallel
from service.data.io import open_output
from service.mt.train import TrainConfig, train_model


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
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)

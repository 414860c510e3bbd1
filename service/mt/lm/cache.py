"""Loading the LM table: built from the ARPA file when needed, verified, cached on disk.

:func:`build_lm_table` runs the pipeline in memory: read the file
(:func:`service.mt.lm.read_arpa.read_arpa`), assemble the table
(:func:`service.mt.lm.assemble.assemble`) and, if asked, compare it with KenLM
(:func:`service.mt.lm.verify.verify_table`). :func:`load_lm_table` keeps the result, the way
KenLM keeps a binary file beside the ARPA text
(Heafield 2011, "KenLM: Faster and Smaller Language Model Queries", §2.1): the arrays
(:data:`service.mt.lm.table.ARRAYS`: scores and left-extension flags) as ``.npy`` files in
``<arpa stem>.table/`` beside the ARPA file (:func:`cache_path`), with the vocabulary and a
``manifest.json`` (format, the hash seed, the ARPA's size, mtime and sha256, order, counts,
table size, whether it was verified), written to a temporary directory and renamed into place
(:mod:`service.core.arraydir`), and opened memory-mapped; a stale, partial or corrupt cache, or one
of another format or seed, is rebuilt.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from service.core import arraydir
from service.errors import MissingResourceError
from service.mt.lm.assemble import assemble
from service.mt.lm.kernels import SEED
from service.mt.lm.read_arpa import read_arpa
from service.mt.lm.table import ARRAYS, DTYPES, SLOT_ARRAYS, LmTable
from service.mt.lm.verify import VerifyReport, verify_table

Log = Callable[[str], None]

_logger = logging.getLogger(__name__)

TABLE_FORMAT = 2  # bump when the cache layout or the key function changes
CACHE_SUFFIX = ".table"
MANIFEST = "manifest.json"
VOCAB_FILE = "vocab.txt"
STALE_TEMP_SECONDS = 3600.0  # a temporary cache directory older than this is a crash's leftover


def _build(path: Path, verify: bool, say: Log) -> tuple[LmTable, dict[str, Any]]:
    """Parse, build and (if asked) verify; the table and its cache manifest."""
    t0 = time.perf_counter()
    arpa = read_arpa(path)
    t1 = time.perf_counter()
    built = assemble(arpa)
    table = built.table
    t2 = time.perf_counter()
    total = sum(arpa.counts)
    say(
        f"{path}: {total:,} n-grams read in {t1 - t0:.1f}s; table of {len(table.keys):,} slots "
        f"({built.blanks} blanks, {table.nbytes / 1e6:.0f} MB) built in {t2 - t1:.1f}s"
    )
    report: VerifyReport | None = None
    if verify:
        report = verify_table(built, arpa)
        table = replace(table, verified=True)
        say(
            f"{path}: the table equals KenLM on all {report.ngrams:,} n-grams "
            f"({report.scores:,} scores) and {report.random_queries:,} random queries "
            f"({time.perf_counter() - t2:.1f}s, of which {report.kenlm_load_seconds:.1f}s "
            "loading KenLM)"
        )
    t3 = time.perf_counter()
    manifest: dict[str, Any] = {
        "format": TABLE_FORMAT,
        "seed": int(SEED),
        "arpa": {
            "name": path.name,
            "size": arpa.size,
            "mtime_ns": arpa.mtime_ns,
            "sha256": arpa.sha256,
        },
        "order": arpa.order,
        "counts": list(arpa.counts),
        "table_size": len(table.keys),
        "blanks": built.blanks,
        "verified": verify,
        "verification": None
        if report is None
        else {
            "ngrams": report.ngrams,
            "scores": report.scores,
            "random_queries": report.random_queries,
        },
        "seconds": {
            "parse": round(t1 - t0, 2),
            "table": round(t2 - t1, 2),
            "verify": round(t3 - t2, 2),
        },
    }
    return table, manifest


def build_lm_table(arpa: Path, *, verify: bool = True, log: Log | None = None) -> LmTable:
    """Parse the ARPA file at ``arpa``, build its table and (if ``verify``) check it with KenLM.

    DataFormatError for a malformed file (naming the line) or a table that differs from KenLM.
    """
    return _build(Path(arpa), verify, log or _logger.info)[0]


def cache_path(arpa: Path, cache_dir: Path | None = None) -> Path:
    """Where :func:`load_lm_table` keeps the table of ``arpa``: ``<stem>.table`` beside it or in
    ``cache_dir``."""
    arpa = Path(arpa)
    return (Path(cache_dir) if cache_dir is not None else arpa.parent) / (arpa.stem + CACHE_SUFFIX)


def load_lm_table(
    arpa: Path,
    *,
    cache_dir: Path | None = None,
    verify: bool = True,
    log: Log | None = None,
) -> LmTable:
    """The table of ``arpa``, memory-mapped from its cache, built (and cached) if need be.

    The cache (:func:`cache_path`) is used when its manifest matches the ARPA file's size and
    modification time, every file has the recorded size and the arrays their shapes, and (if
    ``verify``) it was verified; otherwise the table is rebuilt. If the cache cannot be
    written (a read-only directory), the table built in memory is returned.
    """
    say = log or _logger.info
    arpa = Path(arpa)
    if not arpa.is_file():
        raise MissingResourceError(f"{arpa}: language model file not found")
    cache = cache_path(arpa, cache_dir)
    table, why = _open_cache(cache, arpa, verify)
    if table is not None:
        return table
    say(f"{arpa}: building the LM table ({why})")
    table, manifest = _build(arpa, verify, say)
    now = arpa.stat()
    if (now.st_size, now.st_mtime_ns) != (manifest["arpa"]["size"], manifest["arpa"]["mtime_ns"]):
        say(f"{arpa}: the file changed while it was read; the table is not cached")
        return table
    try:
        _write_cache(cache, table, manifest)
    except OSError as exc:
        say(f"{cache}: cannot write the LM table cache ({exc}); using the table in memory")
        return table
    cached, why = _open_cache(cache, arpa, verify)
    if cached is None:  # pragma: no cover - another process replaced it with a bad one
        say(f"{cache}: the cache just written does not load ({why}); using the table in memory")
        return table
    return cached


def _open_cache(cache: Path, arpa: Path, verify: bool) -> tuple[LmTable | None, str]:
    """The cached table if it is current and whole, else None and the reason."""
    if not (cache / MANIFEST).is_file():
        return None, f"no cache in {cache}"
    try:
        manifest = json.loads((cache / MANIFEST).read_text(encoding="utf-8"))
        stat = arpa.stat()
        source = manifest["arpa"]
        if manifest["format"] != TABLE_FORMAT or manifest["seed"] != int(SEED):
            return None, "the cache has another format"
        if (source["size"], source["mtime_ns"]) != (stat.st_size, stat.st_mtime_ns):
            return None, f"{arpa.name} changed since the cache was built"
        if verify and not manifest["verified"]:
            return None, "the cache was not verified against KenLM"
        for name, size in manifest["files"].items():
            if (cache / name).stat().st_size != size:
                return None, f"{cache / name} has the wrong size"
        arrays = {
            name: np.load(cache / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            for name in ARRAYS
        }
        table_size, vocab_size = manifest["table_size"], manifest["counts"][0]
        for name, arr in arrays.items():
            want = table_size if name in SLOT_ARRAYS else vocab_size
            if arr.shape != (want,) or arr.dtype != DTYPES[name]:
                return None, f"{cache / name}.npy has the wrong shape or type"
        vocab_words = (cache / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        if len(vocab_words) != vocab_size:
            return None, f"{cache / VOCAB_FILE} has the wrong length"
        table = LmTable(
            order=int(manifest["order"]),
            vocab=MappingProxyType({w: i for i, w in enumerate(vocab_words)}),
            verified=bool(manifest["verified"]),
            **arrays,
        )
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return None, f"the cache is unreadable ({type(exc).__name__}: {exc})"
    return table, "cached"


def _write_cache(cache: Path, table: LmTable, manifest: dict[str, Any]) -> None:
    """Write the cache atomically (:func:`service.core.arraydir.atomic_directory`), the manifest
    last, after removing what interrupted writers left beside it."""
    arraydir.remove_leftovers(cache, STALE_TEMP_SECONDS)
    with arraydir.atomic_directory(cache) as tmp:
        files: dict[str, int] = {}
        for name in ARRAYS:
            files[f"{name}.npy"] = arraydir.save_array(tmp / f"{name}.npy", getattr(table, name))
        text = "".join(w + "\n" for w in table.vocab).encode("utf-8")
        files[VOCAB_FILE] = arraydir.write_file(tmp / VOCAB_FILE, text)
        body = json.dumps({**manifest, "files": files}, indent=1, sort_keys=True) + "\n"
        arraydir.write_file(tmp / MANIFEST, body.encode("utf-8"))

"""What the bench scripts share: where the repository, the shared data and the results are,
the one percentile of every reported latency figure, and the one way a result is written.

``percentile`` is numpy's default (linear interpolation between the two closest ranks,
``numpy.percentile(xs, q)``, ``q`` in 0..100): p50 of an even count is the mean of the two
middle values, p90 of 10 samples lies between the 9th and the 10th. Figures recorded before
the scripts shared it used nearest-rank (bench_decoder, bench_load) or a floor index
(bench_models) and can differ from a rerun by up to one sample's gap.

:func:`write_result` is how every benchmark writes ``bench/results/*.json``: the figures and a
``"stamp"`` saying where they come from (:func:`stamp`: the git revision and whether the tree
had uncommitted changes, the machine, the time, the benchmark's parameters and the signatures
of the models, indexes and scorers it used). Result files written before the stamp existed
have none; their figures are kept as they were.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent  # the repository
DATA = ROOT.parent / "shared" / "data"  # corpora, query sets and qrels, beside the repository
RESULTS_DIR = ROOT / "bench" / "results"
QUICK_DIR = RESULTS_DIR / "quick"  # what `make bench` (the cheap benchmarks) writes
STAMP = "stamp"  # the key of a result's provenance


def percentile(xs: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``xs`` by linear interpolation (numpy's default);
    NaN for no samples."""
    if len(xs) == 0:
        return float("nan")
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def revision() -> dict[str, Any]:
    """The checkout's commit and whether tracked files differ from it (``dirty``); both
    ``None`` outside a git checkout."""
    commit = _git("rev-parse", "HEAD")
    changes = _git("status", "--porcelain", "--untracked-files=no")
    return {"revision": commit, "dirty": None if changes is None else bool(changes)}


def machine() -> dict[str, Any]:
    """The machine a figure was measured on (the load average says how shared it was)."""
    return {
        "node": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def jsonable(value: Any) -> Any:
    """``value`` with paths (relative to the repository when inside it), enums, tuples and
    dataclasses turned into JSON types."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value.relative_to(ROOT)) if value.is_relative_to(ROOT) else str(value)
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return value


def stamp(params: Any = None, signatures: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Where a figure comes from: revision, machine, time (UTC), the benchmark's parameters
    (a dataclass) and ``signatures`` (model bundles, indexes, scorers: whatever changes the
    numbers)."""
    return {
        **revision(),
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "params": jsonable(params) if params is not None else None,
        "signatures": jsonable(dict(signatures or {})),
    }


def write_result(
    path: Path,
    result: Mapping[str, Any],
    params: Any = None,
    *,
    signatures: Mapping[str, Any] | None = None,
    key: str | None = None,
    indent: int = 1,
    sort_keys: bool = False,
) -> Path:
    """Write ``result`` to ``path`` as JSON with a fresh :func:`stamp` under ``"stamp"``
    (replacing one the result carried), atomically (a reader never sees half a file).

    With ``key`` the file is a record of many runs (``bench_collection``'s): ``result`` goes
    under ``key`` with its own stamp and the other keys are kept. Returns ``path``."""
    mark = stamp(params, signatures)
    figures = {k: v for k, v in result.items() if k != STAMP}
    data: dict[str, Any]
    if key is None:
        data = {**figures, STAMP: mark}
    else:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        data[key] = {**figures, STAMP: mark}
    text = json.dumps(jsonable(data), indent=indent, sort_keys=sort_keys, ensure_ascii=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def bundle_signature(bundle: Any) -> dict[str, Any]:
    """What identifies a model bundle's numbers: its name, the manifest's build key (a hash
    of its data and settings) and the weights version it serves."""
    manifest = getattr(bundle, "manifest", {}) or {}
    return {
        "model": bundle.name,
        "build_key": manifest.get("build_key"),
        "weights": bundle.active_weights().version,
    }


@dataclasses.dataclass(frozen=True)
class Help:
    """A benchmark parameter's help text, as ``Annotated`` metadata of its field
    (``queries: Annotated[int, Help("dev sentences")] = 400``); ``positional`` makes it an
    optional positional argument instead of ``--name`` (:mod:`bench.cli` builds the flags
    from the fields' types)."""

    text: str
    positional: bool = False


def write_per_language(
    name: str, measure: Callable[[str], Mapping[str, Any]], langs: Sequence[str]
) -> None:
    """An experiment's ``main``: ``measure(lang)`` for each language asked (default de and
    zh), written to ``bench/results/<name>_<lang>.json``."""
    for lang in langs or ("de", "zh"):
        write_result(RESULTS_DIR / f"{name}_{lang}.json", measure(lang))

"""Resumable pipeline stages for offline training (``clir train-model``).

A stage writes its outputs into a work directory and then a small ``<stage>.done.json``
recording a key: the checksum of its inputs and settings. A later run whose key matches skips
the stage; any change of input or setting, or a crash before the marker was written, reruns
it. Outputs are written atomically by the stage itself, so a crash never leaves an output that
looks complete.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.data.io import atomic_write


def stage_key(**parts: Any) -> str:
    """A stable key for the inputs and settings of a stage."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def peak_rss_mb() -> float:
    """Peak resident memory of this process and of its finished children, in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


@dataclass
class StageRunner:
    """Runs named stages in a work directory, skipping those already done for the same key."""

    workdir: Path
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr))
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def marker(self, name: str) -> Path:
        return self.workdir / f"{name}.done.json"

    def is_done(self, name: str, key: str) -> bool:
        path = self.marker(name)
        if not path.exists():
            return False
        try:
            return bool(json.loads(path.read_text())["key"] == key)
        except (json.JSONDecodeError, KeyError, TypeError):
            return False

    def info(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.marker(name).read_text())
        return data

    def run(self, name: str, key: str, fn: Callable[[], dict[str, Any] | None]) -> dict[str, Any]:
        """Run ``fn`` unless stage ``name`` is done for ``key``; returns its recorded info."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.is_done(name, key):
            self.log(f"[{name}] up to date, skipped")
            info = self.info(name)
            self.timings[name] = {"skipped": True, **info.get("timing", {})}
            return info
        self.log(f"[{name}] running")
        start = time.perf_counter()
        result = fn() or {}
        seconds = time.perf_counter() - start
        peak_mb = peak_rss_mb()
        timing = {"seconds": round(seconds, 2), "peak_rss_mb": round(peak_mb, 1)}
        info = {"key": key, "result": result, "timing": timing}
        with atomic_write(self.marker(name)) as tmp:
            tmp.write_text(json.dumps(info, indent=1, sort_keys=True, default=str))
        self.timings[name] = {"skipped": False, **timing}
        self.log(f"[{name}] done in {seconds:.1f}s")
        return info

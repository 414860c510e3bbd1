"""Versioned weight vectors of a model bundle.

A bundle keeps every weight vector it ever served under ``weights/<version>.json`` and names
the active one in ``weights/ACTIVE``. New versions (from tuning or learning to rank) are
written atomically and never overwrite an existing version; activation rewrites the pointer
atomically after the version has been read back and validated, so a corrupted or truncated
file is refused while the previous version keeps serving.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service.data.io import atomic_write
from service.errors import DataFormatError, InvalidInputError, MissingResourceError, NotFoundError

VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ACTIVE = "ACTIVE"


def check_version_name(version: str) -> str:
    """A version name is a plain file stem: no separators, no '..', at most 64 characters."""
    if not VERSION_RE.match(version) or ".." in version:
        raise InvalidInputError(
            f"invalid weights version {version!r}: use letters, digits, '.', '_', '-' "
            "(at most 64, not starting with a dot)"
        )
    return version


@dataclass(frozen=True)
class WeightsVersion:
    """One stored weight vector with where it came from and how it scored."""

    version: str
    weights: dict[str, float]
    created: str
    source: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    parent: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "weights": self.weights,
            "created": self.created,
            "source": self.source,
            "metrics": self.metrics,
            "parent": self.parent,
        }


def _parse(path: Path, data: Any) -> WeightsVersion:
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        raise DataFormatError(path, None, 'expected an object with a "weights" object')
    weights: dict[str, float] = {}
    for name, value in data["weights"].items():
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
        ):
            raise DataFormatError(path, None, f"weight {name!r} is not a finite number")
        weights[str(name)] = float(value)
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise DataFormatError(path, None, '"metrics" must be an object')
    return WeightsVersion(
        version=str(data.get("version", path.stem)),
        weights=weights,
        created=str(data.get("created", "")),
        source=str(data.get("source", "")),
        metrics={str(k): float(v) for k, v in metrics.items() if isinstance(v, int | float)},
        parent=data.get("parent"),
    )


class WeightsStore:
    """The ``weights/`` directory of a bundle."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, version: str) -> Path:
        return self.root / f"{check_version_name(version)}.json"

    def versions(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.json") if VERSION_RE.match(p.stem))

    def load(self, version: str) -> WeightsVersion:
        path = self.path(version)
        if not path.exists():
            raise NotFoundError(f"weights version {version!r} does not exist in {self.root}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataFormatError(path, None, f"corrupted weights file: {exc}") from exc
        parsed = _parse(path, data)
        if parsed.version != version:
            raise DataFormatError(path, None, f"file names version {parsed.version!r}")
        return parsed

    def save(
        self,
        weights: dict[str, float],
        *,
        version: str | None = None,
        source: str = "",
        metrics: dict[str, float] | None = None,
        parent: str | None = None,
    ) -> WeightsVersion:
        """Store a new version (never overwriting one); returns it."""
        now = datetime.now(UTC)
        version = check_version_name(
            now.strftime("v%Y%m%d-%H%M%S-%f") if version is None else version
        )
        path = self.path(version)
        if path.exists():
            raise InvalidInputError(f"weights version {version!r} already exists")
        record = WeightsVersion(
            version=version,
            weights={k: float(v) for k, v in weights.items()},
            created=now.isoformat(timespec="seconds"),
            source=source,
            metrics=dict(metrics or {}),
            parent=parent,
        )
        _parse(path, record.to_json())  # refuse non-finite weights before writing
        with atomic_write(path) as tmp:
            tmp.write_text(json.dumps(record.to_json(), indent=1, sort_keys=True) + "\n")
        return record

    def active_version(self) -> str:
        pointer = self.root / ACTIVE
        if not pointer.exists():
            raise MissingResourceError(f"{pointer}: no active weights version")
        return check_version_name(pointer.read_text(encoding="utf-8").strip())

    def active(self) -> WeightsVersion:
        return self.load(self.active_version())

    def activate(self, version: str) -> WeightsVersion:
        """Validate ``version`` and make it the active one; returns it."""
        record = self.load(version)
        with atomic_write(self.root / ACTIVE) as tmp:
            tmp.write_text(version + "\n")
        return record

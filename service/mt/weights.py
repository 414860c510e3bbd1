"""Versioned weight vectors of a model bundle.

A bundle ships its own weight vectors as ``weights/<version>.json`` and names the active one in
``weights/ACTIVE``. A bundle that serves is read-only: the versions that tuning and learning to
rank write, and the active pointer, live in a *state directory* outside it (a state root,
:data:`DEFAULT_STATE_DIR` unless the caller names another — the service and the commands pass
their setting ``weights_state_dir`` —, one subdirectory per bundle, :func:`bundle_state_dir`). The
versions of a bundle are those of both places; the state's ``ACTIVE``, once written, overrides
the bundle's, and without one the bundle's own ``ACTIVE`` is honoured (a bundle trained before
the state directory existed keeps serving the version it had). Building a bundle writes into
``weights/`` itself (a store without a state directory).

New versions are written atomically and never overwrite an existing version; activation
rewrites the pointer atomically after the version has been read back and validated, so a
corrupted or truncated file is refused while the previous version keeps serving.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from service.data.io import atomic_write
from service.errors import DataFormatError, InvalidInputError, MissingResourceError, NotFoundError

VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ACTIVE = "ACTIVE"
BUNDLE_NOTE = "BUNDLE"  # in a bundle's state directory: the path of the bundle it belongs to
DEFAULT_STATE_DIR = Path("var/weights")  # the state root (the setting weights_state_dir's default)

Origin = Literal["bundle", "state"]


def bundle_state_dir(bundle: str | Path, state_root: str | Path) -> Path:
    """The state directory of the bundle at ``bundle``: ``<state_root>/<name>-<hash>``, the
    hash of its absolute path keeping apart bundles of one name in different places."""
    resolved = Path(bundle).resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:12]
    return Path(state_root) / f"{resolved.name}-{digest}"


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
    """The weights versions of a bundle: its ``weights/`` directory ``root`` and, when given,
    its state directory ``state``, where new versions and the active pointer are written (the
    bundle is then never written to). Without ``state`` everything lives in ``root``."""

    def __init__(self, root: str | Path, state: str | Path | None = None) -> None:
        self.root = Path(root)
        self.state = Path(state) if state is not None else None

    @property
    def writable(self) -> Path:
        """Where new versions and the active pointer go."""
        return self.state if self.state is not None else self.root

    def _dirs(self) -> list[Path]:
        return [self.root] if self.state is None else [self.root, self.state]

    def path(self, version: str) -> Path:
        """The file of ``version``: where it exists, else where :meth:`save` would write it."""
        name = f"{check_version_name(version)}.json"
        for folder in self._dirs():
            if (folder / name).exists():
                return folder / name
        return self.writable / name

    def origin(self, version: str) -> Origin:
        """``"bundle"`` for a version the bundle ships, ``"state"`` for one written since."""
        return "bundle" if self.path(version).parent == self.root else "state"

    def versions(self) -> list[str]:
        names: set[str] = set()
        for folder in self._dirs():
            if folder.is_dir():
                names.update(p.stem for p in folder.glob("*.json") if VERSION_RE.match(p.stem))
        return sorted(names)

    def load(self, version: str) -> WeightsVersion:
        path = self.path(version)
        if not path.exists():
            where = " or ".join(str(d) for d in self._dirs())
            raise NotFoundError(f"weights version {version!r} does not exist in {where}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataFormatError(path, None, f"corrupted weights file: {exc}") from exc
        parsed = _parse(path, data)
        if parsed.version != version:
            raise DataFormatError(path, None, f"file names version {parsed.version!r}")
        return parsed

    def _prepare_state(self) -> None:
        """Create the state directory, with a note naming the bundle it belongs to."""
        if self.state is None or self.state.is_dir():
            return
        self.state.mkdir(parents=True, exist_ok=True)
        with atomic_write(self.state / BUNDLE_NOTE) as tmp:
            tmp.write_text(f"{self.root.parent.resolve()}\n", encoding="utf-8")

    def save(
        self,
        weights: dict[str, float],
        *,
        version: str | None = None,
        source: str = "",
        metrics: dict[str, float] | None = None,
        parent: str | None = None,
    ) -> WeightsVersion:
        """Store a new version (never overwriting one, the bundle's included); returns it."""
        now = datetime.now(UTC)
        version = check_version_name(
            now.strftime("v%Y%m%d-%H%M%S-%f") if version is None else version
        )
        if self.path(version).exists():
            raise InvalidInputError(f"weights version {version!r} already exists")
        path = self.writable / f"{version}.json"
        record = WeightsVersion(
            version=version,
            weights={k: float(v) for k, v in weights.items()},
            created=now.isoformat(timespec="seconds"),
            source=source,
            metrics=dict(metrics or {}),
            parent=parent,
        )
        _parse(path, record.to_json())  # refuse non-finite weights before writing
        self._prepare_state()
        with atomic_write(path) as tmp:
            tmp.write_text(json.dumps(record.to_json(), indent=1, sort_keys=True) + "\n")
        return record

    def active_version(self) -> str:
        """The state's pointer if one was written, else the bundle's own."""
        pointers = [d / ACTIVE for d in reversed(self._dirs())]
        pointer = next((p for p in pointers if p.exists()), None)
        if pointer is None:
            raise MissingResourceError(f"{pointers[-1]}: no active weights version")
        return check_version_name(pointer.read_text(encoding="utf-8").strip())

    def active(self) -> WeightsVersion:
        return self.load(self.active_version())

    def activate(self, version: str) -> WeightsVersion:
        """Validate ``version`` and make it the active one; returns it."""
        record = self.load(version)
        self._prepare_state()
        with atomic_write(self.writable / ACTIVE) as tmp:
            tmp.write_text(version + "\n")
        return record

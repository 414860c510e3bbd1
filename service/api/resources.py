"""Resources the service serves, loaded once at start-up (the app's lifespan loads
every configured model bundle, the document index and the sentence-pool index).

A bundle or index that is missing or fails to load is reported (``/readyz`` names it) and the
rest still loads; the first bundle per source language wins.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.collection.docstore import Store, open_store
from service.core.settings import Settings
from service.errors import ClirError
from service.mt.bundle import ModelBundle, load_bundle

log = logging.getLogger(__name__)


@dataclass
class Resources:
    """What the service has loaded, and what it looked for and did not find."""

    models: dict[str, ModelBundle] = field(default_factory=dict)  # source language -> bundle
    doc_index: Store | None = None  # one index, or a live collection
    pool_index: Store | None = None  # one index, or a collection
    missing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return bool(self.models) and self.doc_index is not None

    def status(self) -> dict[str, Any]:
        if self.ready:
            detail = "ready"
        elif not self.models:
            detail = "no model loaded"
        else:
            detail = "no document index loaded"
        return {
            "ready": self.ready,
            "detail": detail,
            "models": {lang: b.name for lang, b in sorted(self.models.items())},
            "doc_index": str(self.doc_index.path) if self.doc_index is not None else None,
            "pool_index": str(self.pool_index.path) if self.pool_index is not None else None,
            "missing": self.missing,
            "errors": self.errors,
        }


def _load_index(kind: str, candidates: list[Path], res: Resources) -> Store | None:
    """The first of ``candidates`` that opens (an index or a collection)."""
    for path in candidates:
        if not path.exists():
            continue
        try:
            return open_store(path)
        except ClirError as exc:
            res.errors.append(f"{kind} {path}: {exc}")
            log.error("cannot load %s %s: %s", kind, path, exc)
    if not any(p.exists() for p in candidates):
        res.missing.append(f"{kind}: none of {', '.join(str(p) for p in candidates)} exists")
    return None


def load_resources(settings: Settings) -> Resources:
    res = Resources()
    for path in settings.model_bundles:
        if not path.exists():
            continue
        try:
            bundle = load_bundle(path, state_root=settings.weights_state_dir)
        except ClirError as exc:
            res.errors.append(f"model bundle {path}: {exc}")
            log.error("cannot load model bundle %s: %s", path, exc)
            continue
        res.models.setdefault(bundle.src, bundle)
    if not res.models and not res.errors:
        names = ", ".join(str(p) for p in settings.model_bundles)
        res.missing.append(f"model bundle: none of {names} exists")
    res.doc_index = _load_index("document index", settings.doc_indexes, res)
    res.pool_index = _load_index("sentence-pool index", settings.pool_indexes, res)
    return res

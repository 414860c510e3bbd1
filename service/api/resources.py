"""Resources the service serves, loaded once at start-up.

Until the model-bundle and index loaders exist, this finds which configured bundles and
indexes are present on disk and reports the service as not ready with what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.settings import Settings


@dataclass
class Resources:
    """What the service has loaded, and what it looked for and did not find."""

    models: dict[str, Any] = field(default_factory=dict)  # source language -> bundle
    doc_index: Any | None = None
    pool_index: Any | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return bool(self.models) and self.doc_index is not None

    def status(self) -> dict[str, Any]:
        detail = "ready" if self.ready else "no model loaded" if not self.models else "no index"
        return {
            "ready": self.ready,
            "detail": detail,
            "models": sorted(self.models),
            "doc_index": self.doc_index is not None,
            "pool_index": self.pool_index is not None,
            "missing": self.missing,
        }


def _describe_missing(kind: str, candidates: list[Path]) -> str:
    return f"{kind}: none of {', '.join(str(p) for p in candidates)} exists"


def load_resources(settings: Settings) -> Resources:
    res = Resources()
    if settings.first_existing(settings.model_bundles) is None:
        res.missing.append(_describe_missing("model bundle", settings.model_bundles))
    if settings.first_existing(settings.doc_indexes) is None:
        res.missing.append(_describe_missing("document index", settings.doc_indexes))
    if settings.first_existing(settings.pool_indexes) is None:
        res.missing.append(_describe_missing("sentence-pool index", settings.pool_indexes))
    return res

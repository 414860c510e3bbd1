"""The README's scaling section names every environment variable a scaled-out service needs,
and every ``CLIR_*`` variable the README names is a setting (no stale or misspelt names)."""

from __future__ import annotations

import re
from pathlib import Path

from service.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"
# the settings a collection served in process or by Ray shard workers, its writers and its
# load depend on
SCALING = (
    "doc_indexes", "pool_indexes", "search_backend", "ray_address", "search_shard_timeout_s",
    "search_threads", "bowfd_cascade", "admin_token", "segment_buffer_mb",
    "collection_lock_timeout_s", "collection_max_segments", "max_doc_bytes",
    "max_documents_body_bytes", "max_concurrency", "queue_size", "request_time_budget_s",
)  # fmt: skip
# variables the README names that are not fields of Settings (read by other programs)
NOT_SETTINGS = {"CLIR_RAY_TOKEN"}  # docker-compose's Ray token


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_scaling_section_names_every_variable_it_needs() -> None:
    scaling = section(README.read_text(encoding="utf-8"), "Scaling out")
    missing = [f"CLIR_{name.upper()}" for name in SCALING if f"CLIR_{name.upper()}" not in scaling]
    assert not missing, f"the README's scaling section does not name {missing}"


def test_every_variable_the_readme_names_is_a_setting() -> None:
    named = set(re.findall(r"\bCLIR_[A-Z0-9_]*[A-Z0-9]\b", README.read_text(encoding="utf-8")))
    settings = {f"CLIR_{name.upper()}" for name in Settings.model_fields}
    assert not sorted(named - settings - NOT_SETTINGS)

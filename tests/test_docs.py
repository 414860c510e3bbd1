"""The README is the front door and ``docs/`` the manual: the README stays short and its links
resolve; the pages name only settings, verbs and endpoints that exist, and every one that
exists is named — the settings in the settings page's table, the ``clir`` verbs in the CLI
page, the REST endpoints in the REST page; the scaling page names every variable a
scaled-out service needs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from service.api.app import create_app
from service.cli.core import build_parser
from service.core.settings import Settings
from tests.api.conftest import bare_settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_LINES = 150
# the settings a collection served in process or by Ray shard workers, its writers and its
# load depend on
SCALING = (
    "doc_indexes", "pool_indexes", "search_backend", "ray_address", "search_shard_timeout_s",
    "search_threads", "bowfd_cascade", "admin_token", "segment_buffer_mb",
    "collection_lock_timeout_s", "collection_max_segments", "max_doc_bytes",
    "max_documents_body_bytes", "max_concurrency", "queue_size", "request_time_budget_s",
    "shard_replicas",
)  # fmt: skip
# variables the pages name that are not fields of Settings (read by other programs)
NOT_SETTINGS = {"CLIR_RAY_TOKEN"}  # docker-compose's Ray token
# endpoints not in the OpenAPI schema
UNLISTED = {("GET", "/")}  # the web page


def pages() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in [README, *sorted(DOCS.glob("*.md"))]}


def variable(name: str) -> str:
    return f"CLIR_{name.upper()}"


def test_the_readme_is_a_short_front_door_whose_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    assert "make serve" in text and "make test" in text  # the two set-up commands
    for page, body in pages().items():
        base = README.parent if page == "README.md" else DOCS
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", body):
            if "://" not in target:
                assert (base / target).exists(), f"{page} links to {target}, which is missing"


def test_the_scaling_page_names_every_variable_it_needs() -> None:
    scaling = (DOCS / "scaling.md").read_text(encoding="utf-8")
    missing = [variable(name) for name in SCALING if variable(name) not in scaling]
    assert not missing, f"docs/scaling.md does not name {missing}"


def test_every_variable_named_is_a_setting_and_every_setting_is_in_the_table() -> None:
    named = set(re.findall(r"\bCLIR_[A-Z0-9_]*[A-Z0-9]\b", "\n".join(pages().values())))
    settings = {variable(name) for name in Settings.model_fields}
    assert not sorted(named - settings - NOT_SETTINGS)
    table = set(re.findall(r"^\| `(CLIR_[A-Z0-9_]+)` \|", (DOCS / "settings.md").read_text(),
                           re.MULTILINE))  # fmt: skip
    assert table == settings, (sorted(settings - table), sorted(table - settings))
    assert all(f.description for f in Settings.model_fields.values())


def verbs() -> set[str]:
    out = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                inner = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                out |= {f"{name} {v}" for v in inner[0].choices} if inner else {name}
    return out


def test_the_cli_page_names_every_verb_and_no_other() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    listed = {m.strip() for m in re.findall(r"^\| `clir ([a-z-]+(?: [a-z-]+)?)", text, re.M)}
    listed = {v if v in verbs() else v.split()[0] for v in listed}
    assert listed == verbs(), (sorted(verbs() - listed), sorted(listed - verbs()))


def test_the_rest_page_names_every_endpoint_and_no_other(tmp_path: Path) -> None:
    schema = create_app(bare_settings(tmp_path)).openapi()["paths"]

    def shape(path: str) -> str:
        return re.sub(r"\{[^}]*\}", "{}", path.split("?")[0])

    served = {(m.upper(), shape(p)) for p, ops in schema.items() for m in ops} | UNLISTED
    text = (DOCS / "rest.md").read_text(encoding="utf-8")
    listed = set()
    for row in re.findall(r"^\| (`(?:GET|POST|DELETE|PUT|PATCH) [^|]+)\|", text, re.M):
        for method, path in re.findall(r"`(GET|POST|DELETE|PUT|PATCH) ([^`]+)`", row):
            listed.add((method, shape(path)))
    assert listed == served, (sorted(served - listed), sorted(listed - served))

"""The command line and the API are one search path (the search pipeline under both): for the
same query, method and store, ``clir search --json`` and ``POST /v1/search`` give the same
results (ids and scores), count, translation, alternatives and reason for an empty page — over
German dev queries of each kind people type (short phrases, questions, paragraphs) and queries
that find nothing, on the demo index and on its documents as a collection of 2 shards, with
the settings' defaults (feedback and the dense reader on) on both sides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.cli import main
from service.collection.writer import build_collection
from service.data import read_queries
from service.index.build import BuildParams
from service.index.inverted import InvertedIndex
from tests.api.conftest import ROOT, demo_settings

pytestmark = [pytest.mark.slow, pytest.mark.data]

MODEL = ROOT / "models" / "demo-de-en"
SETS = ROOT / "bench" / "querysets" / "lohelp-de"
PARAGRAPHS = ROOT.parent / "shared" / "data" / "clir" / "lohelp-de" / "queries.dev.tsv"
# nothing to search for (common words, punctuation)
EMPTY = ["das", "???"]
# words no grammar rule and no document holds (the dense reader still reads them)
UNKNOWN = "Xyzzy Plugh"
METHODS = ("dt", "psq", "bowfd")


def queries() -> list[str]:
    """A few dev queries of each kind, then the empty ones."""
    picked: list[str] = []
    for path, every in ((SETS / "queries.short.dev.tsv", 52), (SETS / "questions.dev.tsv", 17),
                        (PARAGRAPHS, 65)):  # fmt: skip
        if not path.is_file():
            pytest.fail(f"{path} is missing")
        picked += [q.text for q in list(read_queries(path))[::every]]
    return [*picked, UNKNOWN, *EMPTY]


def as_collection(tmp: Path) -> Path:
    index = InvertedIndex.load(ROOT / "indexes" / "demo")
    docs = [index.doc(i) for i in range(index.n_docs)]
    params = BuildParams(**index.manifest["build"])
    build_collection(docs, tmp / "coll", params, shards=2, buffer_mb=1.5, merge=False)
    return tmp / "coll"


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """What both answers must agree on."""
    return {
        "results": [(r["id"], r["score"]) for r in body["results"]],
        "total": (body["total"], body["total_relation"]),
        "translation": body["translation"],
        "empty_reason": body["empty_reason"],
        "dense": body["dense"],
        "alternatives": [
            (a["source"], [(o["english"], o["p"]) for o in a["options"]])
            for a in body["alternatives"]
        ],
    }


@pytest.mark.parametrize("store", ["index", "collection"])
def test_the_cli_and_the_api_answer_alike(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = ROOT / "indexes" / "demo" if store == "index" else as_collection(tmp_path)
    texts = queries()
    with TestClient(create_app(demo_settings(tmp_path, doc_indexes=[path]))) as client:
        for i, text in enumerate(texts):
            # every query with one method in turn (the empty ones with each)
            methods = METHODS if text in (UNKNOWN, *EMPTY) else (METHODS[i % len(METHODS)],)
            for method in methods:
                r = client.post(
                    "/v1/search", json={"query": text, "lang": "de", "method": method, "k": 10}
                )
                assert r.status_code == 200, r.text
                api = answer(r.json())
                argv = ["search", "--model", str(MODEL), "--index", str(path),
                        "--method", method, "--k", "10", "--json", text]  # fmt: skip
                assert main(argv) == 0
                cli = answer(json.loads(capsys.readouterr().out))
                assert cli == api, (method, text)
                if text in EMPTY:
                    assert api["results"] == [] and api["empty_reason"], (method, text)
                elif text != UNKNOWN:
                    assert api["results"] and api["empty_reason"] is None, (method, text)

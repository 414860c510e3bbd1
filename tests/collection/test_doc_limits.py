"""A document over the size limit (``max_doc_bytes``, ``--max-doc-bytes``) stops ``clir
build-index`` and ``clir docs add`` with its line, its id and the limit, and commits nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.core.settings import get_settings
from service.data import write_docs
from service.records import Doc
from tests.conftest import TOY_DOCS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


BIG = Doc("huge:1", "Huge", "word " * 1000, "s")  # 5,004 bytes


@pytest.mark.parametrize("shards", [None, "2"])
def test_build_index_refuses_a_document_over_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shards: str | None
) -> None:
    write_docs(tmp_path / "docs.jsonl", [TOY_DOCS[0], BIG, *TOY_DOCS[1:]])
    out = tmp_path / "ix"
    argv = ["build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out", str(out),
            "--quiet", "--no-dense", "--max-doc-bytes", "5000"]  # fmt: skip
    code, _, err = run(capsys, *argv, *(["--shards", shards] if shards else []))
    assert code != 0
    assert "docs.jsonl:2:" in err and "'huge:1'" in err and "at most 5,000" in err
    assert "Traceback" not in err
    if shards is None:
        assert not out.exists()  # nothing written
    code, out_json, _ = run(capsys, *argv[:-1], "5004", *(["--shards", shards] if shards else []))
    assert code == 0 and json.loads(out_json)["n_docs"] == len(TOY_DOCS) + 1


def test_docs_add_refuses_a_document_over_the_default_limit_and_commits_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    get_settings.cache_clear()
    write_docs(tmp_path / "docs.jsonl", TOY_DOCS)
    coll = tmp_path / "coll"
    assert run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
               str(coll), "--shards", "2", "--quiet", "--no-dense")[0] == 0  # fmt: skip
    before = (coll / "collection.json").read_bytes()
    limit = get_settings().max_doc_bytes
    huge = Doc("huge:2", "", "x" * (limit + 1), "s")
    write_docs(tmp_path / "new.jsonl", [Doc("ok:1", "Fine", "a red car", "s"), huge])
    code, _, err = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                       str(tmp_path / "new.jsonl"), "--quiet", "--no-merge")  # fmt: skip
    assert code != 0
    assert "new.jsonl:2:" in err and "'huge:2'" in err and f"at most {limit:,}" in err
    assert (coll / "collection.json").read_bytes() == before  # not even the first document
    write_docs(tmp_path / "ok.jsonl", [Doc("ok:1", "Fine", "a red car", "s")])
    code, out, _ = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                       str(tmp_path / "ok.jsonl"), "--quiet", "--no-merge")  # fmt: skip
    assert code == 0 and json.loads(out)["added"] == 1  # the writer was left usable

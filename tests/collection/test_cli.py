"""``clir build-index --shards``, ``clir docs add|delete|merge`` and ``clir search`` over a
collection, through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.collection.manifest import MANIFEST
from service.data import write_docs
from service.index.build import COLLECTION_MANIFEST
from service.mt.bundle import ModelBundle
from service.records import Doc
from tests.collection.test_live import corpus
from tests.conftest import TOY_DOCS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_build_add_delete_merge_and_search(
    tmp_path: Path, toy_bundle: ModelBundle, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path / "docs.jsonl", TOY_DOCS)
    coll = tmp_path / "coll"
    # the lexical reader alone: the dense reader's collection tests are tests/collection/test_dense
    code, out, _ = run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
                       str(coll), "--shards", "2", "--quiet", "--no-dense")  # fmt: skip
    assert code == 0 and json.loads(out)["n_docs"] == len(TOY_DOCS)
    write_docs(tmp_path / "new.jsonl", [Doc("fresh", "Red Car", "a red car , a red red car", "x")])
    code, out, _ = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                       str(tmp_path / "new.jsonl"), "--quiet")  # fmt: skip
    assert code == 0
    assert json.loads(out)["n_docs"] == len(TOY_DOCS) + 1 and json.loads(out)["added"] == 1
    code, out, _ = run(capsys, "search", "--model", str(toy_bundle.path), "--index", str(coll),
                       "--method", "dt", "das Auto ist rot", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["results"][0]["id"] == "fresh"
    code, out, _ = run(capsys, "docs", "delete", "--index", str(coll), "fresh", "nope")
    assert code == 0
    assert json.loads(out)["not_found"] == ["nope"] and json.loads(out)["n_docs"] == len(TOY_DOCS)
    code, out, _ = run(capsys, "search", "--model", str(toy_bundle.path), "--index", str(coll),
                       "--method", "dt", "das Auto ist rot", "--json")  # fmt: skip
    assert "fresh" not in [r["id"] for r in json.loads(out)["results"]]
    code, out, _ = run(capsys, "docs", "merge", "--index", str(coll), "--max-segments", "1")
    assert code == 0 and json.loads(out)["segments"] == 2
    code, out, _ = run(capsys, "docs", "status", "--index", str(coll))
    status = json.loads(out)
    assert code == 0 and status["shards"] == 2 and status["deleted"] == 0
    assert sum(s["n_docs"] for s in status["by_shard"]) == status["n_docs"] == len(TOY_DOCS)
    # a snapshot, a change, the snapshot restored over it: the change is undone
    code, out, _ = run(capsys, "docs", "snapshot", "--index", str(coll), "--out",
                       str(tmp_path / "snap"))  # fmt: skip
    assert code == 0 and json.loads(out)["generation"] == status["generation"]
    code, out, _ = run(capsys, "docs", "delete", "--index", str(coll), TOY_DOCS[0].id)
    assert json.loads(out)["n_docs"] == len(TOY_DOCS) - 1
    code, _, err = run(capsys, "docs", "restore", "--from", str(tmp_path / "snap"), "--index",
                       str(coll))  # fmt: skip
    assert code != 0 and "--force" in err
    code, out, _ = run(capsys, "docs", "restore", "--from", str(tmp_path / "snap"), "--index",
                       str(coll), "--force")  # fmt: skip
    assert code == 0 and json.loads(out)["n_docs"] == len(TOY_DOCS)
    code, out, _ = run(capsys, "docs", "status", "--index", str(coll))
    assert json.loads(out)["generation"] > status["generation"]


def test_errors_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_docs(tmp_path / "docs.jsonl", corpus(5, 32))
    index = tmp_path / "idx"
    assert run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
               str(index), "--quiet")[0] == 0  # fmt: skip
    code, _, err = run(capsys, "docs", "delete", "--index", str(index), "d1")
    assert code != 0 and "index built whole" in err and "written to" in err and "--shards" in err
    # its status is a collection's: one shard of one segment, not writable
    code, out, _ = run(capsys, "docs", "status", "--index", str(index))
    status = json.loads(out)
    assert code == 0 and status["writable"] is False and status["n_docs"] == 5
    assert (status["shards"], status["segments"], status["generation"]) == (1, 1, 0)
    (tmp_path / "bad.jsonl").write_text('{"id": "x", "text": "a"}\n{"id": 3}\n')
    coll = tmp_path / "coll"
    assert run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
               str(coll), "--shards", "2", "--quiet")[0] == 0  # fmt: skip
    before = (coll / "collection.json").read_bytes()
    code, _, err = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                       str(tmp_path / "bad.jsonl"), "--quiet")  # fmt: skip
    assert code != 0 and "bad.jsonl:2" in err and "id" in err
    assert (coll / "collection.json").read_bytes() == before  # a failed add changes nothing
    code, _, err = run(capsys, "docs", "delete", "--index", str(coll))
    assert code != 0 and "needs ids" in err
    # the build run again over the collection: refused, the collection kept; --force rebuilds
    # it as a new generation
    code, _, err = run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
                       str(coll), "--shards", "2", "--quiet", "--no-dense")  # fmt: skip
    assert code != 0 and "is a collection (5 documents" in err and "--force" in err
    assert (coll / "collection.json").read_bytes() == before
    code, out, _ = run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
                       str(coll), "--shards", "2", "--quiet", "--no-dense", "--force")  # fmt: skip
    assert code == 0 and json.loads(out)["generation"] > json.loads(before)["generation"]
    (tmp_path / "empty.jsonl").write_text("")
    before = (coll / "collection.json").read_bytes()
    code, out, _ = run(capsys, "docs", "add", "--index", str(coll), "--docs",
                       str(tmp_path / "empty.jsonl"), "--quiet")  # fmt: skip
    assert code == 0 and json.loads(out)["added"] == 0
    assert (coll / "collection.json").read_bytes() == before  # an empty file: no commit
    # one index built over the collection (--shards forgotten): refused, the collection kept
    code, _, err = run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
                       str(coll), "--quiet", "--no-dense")  # fmt: skip
    assert code != 0 and "is a collection" in err and "--shards" in err
    assert (coll / "collection.json").read_bytes() == before
    assert COLLECTION_MANIFEST == MANIFEST  # the index layer's name for the collection's file


def test_eval_and_run_over_a_collection_equal_the_index(
    tmp_path: Path, toy_bundle: ModelBundle, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path / "docs.jsonl", TOY_DOCS)
    (tmp_path / "q.tsv").write_text("q1\tdas Haus ist groß\nq2\tdas Auto ist rot\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 2\nq2 0 d3 1\nq2 0 d4 1\n")
    for out, extra in ((tmp_path / "idx", []), (tmp_path / "coll", ["--shards", "2"])):
        assert run(capsys, "build-index", "--docs", str(tmp_path / "docs.jsonl"), "--out",
                   str(out), "--quiet", *extra)[0] == 0  # fmt: skip
    results = []
    for out in ("idx", "coll"):
        for method in ("dt", "bowfd"):
            code, text, _ = run(
                capsys, "eval", "--model", str(toy_bundle.path), "--index", str(tmp_path / out),
                "--method", method, "--queries", str(tmp_path / "q.tsv"), "--qrels",
                str(tmp_path / "qrels.txt"), "--run-out", str(tmp_path / f"{out}-{method}.run"),
                "--json", "--quiet",
            )  # fmt: skip
            assert code == 0
            payload = json.loads(text)
            results.append((payload["map"], payload["signature"]))
    assert results[:2] == results[2:]
    for method in ("dt", "bowfd"):
        a = (tmp_path / f"idx-{method}.run").read_text()
        assert a == (tmp_path / f"coll-{method}.run").read_text() and a


def test_a_pool_collection_from_the_command(
    tmp_path: Path, toy_bundle: ModelBundle, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pool FILE --shards S`` builds a sentence pool as a collection (token ids kept, no
    analysis, as the pool index), ``docs add --pool`` adds sentences, and its manifest's build
    parameters are the pool index's."""
    from service.collection.manifest import read_commit
    from service.index import build_pool_index
    from service.index.inverted import InvertedIndex

    rows = [("p1", "the house is big"), ("p2", "a red car"), ("p3", "the old book is small")]
    (tmp_path / "pool.tsv").write_text("".join(f"{i}\t{t}\n" for i, t in rows[:2]))
    (tmp_path / "more.tsv").write_text(f"{rows[2][0]}\t{rows[2][1]}\n")
    coll = tmp_path / "pool"
    code, out, _ = run(capsys, "build-index", "--pool", str(tmp_path / "pool.tsv"), "--out",
                       str(coll), "--shards", "2", "--quiet")  # fmt: skip
    assert code == 0 and json.loads(out)["n_docs"] == 2
    code, out, _ = run(capsys, "docs", "add", "--index", str(coll), "--pool",
                       str(tmp_path / "more.tsv"), "--quiet")  # fmt: skip
    assert code == 0 and json.loads(out)["n_docs"] == 3
    build_pool_index(tmp_path / "pool.tsv", tmp_path / "idx")
    want = InvertedIndex.load(tmp_path / "idx").manifest["build"]
    got = read_commit(coll).build
    same = ("kind", "keep_tokens", "analysis", "title_weight", "tokenizer", "k1", "b", "rsj")
    assert {k: got[k] for k in same} == {k: want[k] for k in same}

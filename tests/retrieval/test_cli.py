"""clir search / eval / eval-tr on the toy bundle and index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.data import load_run
from service.index import build_pool_index
from service.index.build import BuildParams
from service.index.inverted import InvertedIndex


@pytest.fixture(scope="module")
def query_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("queries")
    queries, qrels = root / "q.tsv", root / "qrels.txt"
    queries.write_text("q1\tDas Haus ist groß.\nq2\tDas Buch ist alt.\nq3\t%s <b></b>\n")
    # q3 normalises to nothing: it is reported and scores 0
    qrels.write_text("q1 0 d1 2\nq2 0 d5 1\nq3 0 d8 1\n")
    return queries, qrels


def test_search_prints_ranked_ids_titles_scores(
    toy_paths: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, index = toy_paths
    for method in ("dt", "psq"):
        args = ["search", "--model", str(model), "--index", str(index), "--method", method]
        assert main([*args, "Das Haus ist groß.", "--k", "2"]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert len(lines) == 2
        rank, doc_id, score, title = lines[0].split("\t")
        assert (rank, doc_id, title) == ("1", "d1", "Houses")
        assert float(score) > float(lines[1].split("\t")[2])
    args = ["search", "--model", str(model), "--index", str(index), "--method", "psq"]
    assert main([*args, "Das Haus ist groß.", "--json", "--param", "lam=1.0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "lambda:1.0" in out["signature"]
    assert out["hits"][0]["doc_id"] == "d1"


def test_eval_json_and_run_file(
    toy_paths: tuple[Path, Path],
    query_files: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, index = toy_paths
    queries, qrels = query_files
    run = tmp_path / "dt.run"
    args = ["eval", "--model", str(model), "--index", str(index), "--method", "dt",
            "--queries", str(queries), "--qrels", str(qrels), "--json", "--quiet"]  # fmt: skip
    assert main([*args, "--run-out", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    # q1 and q2 find their document first (AP 1), q3 cannot be decoded (AP 0)
    assert out["queries"] == 3
    assert out["failed_queries"] == 1
    assert out["map"] == pytest.approx(2 / 3)
    assert out["mrr"] == pytest.approx(2 / 3)
    for name in ("ndcg", "pres", "recall@1000", "p@10", "seconds", "signature"):
        assert name in out
    ranked = load_run(run)
    assert set(ranked) == {"q1", "q2"}
    assert max(ranked["q1"], key=ranked["q1"].__getitem__) == "d1"
    assert "dt" in run.read_text().split("\n")[0].split()[-1]
    # without the language model, and --limit
    assert main([*args, "--no-lm", "--limit", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 1
    assert "lm:no" in out["signature"]
    assert out["map"] == pytest.approx(1.0)


def test_eval_tr(toy_bundle_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool = tmp_path / "pool.tsv"
    pool.write_text(
        "p1\tThe house is big.\np2\tThe home is large.\np3\tThe dog is small.\n"
        "p4\tThe book is old.\np5\tA big tree.\n"
    )
    build_pool_index(pool, tmp_path / "pool")
    queries, qrels = tmp_path / "q.tsv", tmp_path / "qrels.txt"
    queries.write_text("t1\tDas Haus ist groß.\nt2\tDas Hund ist klein.\n")
    qrels.write_text("t1 0 p1 1\nt2 0 p3 1\n")
    args = ["eval-tr", "--model", str(toy_bundle_path), "--pool", str(tmp_path / "pool"),
            "--queries", str(queries), "--qrels", str(qrels), "--json", "--quiet"]  # fmt: skip
    for extra in ([], ["--nbest", "1"], ["--nbest", "10", "--no-levenshtein"],
                  ["--levenshtein-unit", "word"]):  # fmt: skip
        assert main([*args, *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert ("|E:word|" if "word" in extra else "|E:char|") in out["signature"]
        assert out["queries"] == 2
        assert out["f@1"] == pytest.approx(1.0)  # both references ranked first
        assert out["p@1"] == pytest.approx(1.0) and out["r@1"] == pytest.approx(1.0)
        # f@5: 1 correct of the output and 1 reference sentence: t1 outputs 5 sentences
        # (1/((5 + 1)/2)), t2 four — "A big tree." shares only the full stop with "the dog is
        # small .", and punctuation alone suggests nothing (1/((4 + 1)/2))
        assert out["f@5"] == pytest.approx((1 / 3 + 2 / 5) / 2)
        assert out["mrr"] == pytest.approx(1.0)


@pytest.fixture
def toy_bundle_path(toy_paths: tuple[Path, Path]) -> Path:
    return toy_paths[0]


def test_stale_index_is_refused(
    toy_paths: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    model, index = toy_paths
    stale = tmp_path / "stale"
    shutil.copytree(index, stale)
    manifest = json.loads((stale / "manifest.json").read_text())
    assert set(manifest["build"]) == set(BuildParams.__dataclass_fields__)
    manifest["build"]["tokenizer_signature"] = "en:moses(old)"
    (stale / "manifest.json").write_text(json.dumps(manifest))
    InvertedIndex.load(stale)  # still a readable index ...
    code = main(["search", "--model", str(model), "--index", str(stale), "--method", "dt", "x"])
    assert code == 1  # ... but its terms no longer match the tokenizer
    assert "rebuild" in capsys.readouterr().err


def test_bad_param_is_a_clear_error(
    toy_paths: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, index = toy_paths
    args = ["search", "--model", str(model), "--index", str(index), "--method", "psq", "x"]
    assert main([*args, "--param", "lam"]) == 1
    assert "key=value" in capsys.readouterr().err
    assert main([*args, "--param", "lam=3"]) == 1
    assert "λ" in capsys.readouterr().err

"""``clir run``, ``clir weights`` and BOW-FD search with a LEX weights version, on the committed
demo bundle: new versions and the active pointer go to a temporary weights state directory,
and the bundle's files are checked to be unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli import main
from service.core.settings import get_settings
from service.data import load_run, write_docs
from service.index import build_docs_index
from service.mt.bundle import load_bundle
from service.records import Doc
from service.retrieval.bowfd import IR_FEATURE

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "models" / "demo-de-en"
QUERY = "Wie füge ich eine Tabelle ein?"

DOCS = [
    Doc("t1", "Inserting Tables", "how to insert a table into a text document", "t"),
    Doc("t2", "Table Properties", "change the properties of a table , its rows and columns", "t"),
    Doc("p1", "Printing", "print a document or the selected pages on a printer", "t"),
    Doc("c1", "Charts", "insert a chart from the data of a spreadsheet", "t"),
    Doc("s1", "Saving", "save a document in another format", "t"),
]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo-index")
    write_docs(root / "docs.jsonl", DOCS)
    build_docs_index(root / "docs.jsonl", root / "idx")
    return root / "idx"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A weights state directory of this test only."""
    monkeypatch.setenv("CLIR_WEIGHTS_STATE_DIR", str(tmp_path / "state"))
    get_settings.cache_clear()
    yield tmp_path / "state"
    get_settings.cache_clear()


def bundle_files() -> dict[str, bytes]:
    return {
        str(p.relative_to(DEMO)): p.read_bytes()
        for p in sorted((DEMO / "weights").rglob("*"))
        if p.is_file()
    } | {"manifest.json": (DEMO / "manifest.json").read_bytes()}


def run_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_run_writes_a_trec_run_without_judgments(
    demo_index: Path, state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topics = tmp_path / "topics.tsv"
    topics.write_text(f"q1\t{QUERY}\nq2\tDokument drucken\nq3\t<b></b>\n", encoding="utf-8")
    run = tmp_path / "bowfd.run"
    args = ["run", "--model", str(DEMO), "--index", str(demo_index), "--method", "bowfd",
            "--topics", str(topics), "--output", str(run), "--tag", "demo-bowfd",
            "--hits", "3", "--quiet"]  # fmt: skip
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["queries"], summary["failed_queries"], summary["hits"]) == (3, 1, 3)
    assert summary["run"] == str(run) and summary["tag"] == "demo-bowfd"
    assert "weights:default" in summary["signature"]
    assert "q3" in captured.err  # a topic without words is reported, not fatal
    lines = run_lines(run)
    assert summary["lines"] == len(lines)
    for qid in ("q1", "q2"):
        mine = [ln for ln in lines if ln[0] == qid]
        assert 1 <= len(mine) <= 3
        # qid Q0 docid rank score tag, ranks 1.., scores not increasing
        assert all(len(ln) == 6 and ln[1] == "Q0" and ln[5] == "demo-bowfd" for ln in mine)
        assert [int(ln[3]) for ln in mine] == list(range(1, len(mine) + 1))
        scores = [float(ln[4]) for ln in mine]
        assert scores == sorted(scores, reverse=True)
    assert {ln[0] for ln in lines} == {"q1", "q2"}
    assert set(load_run(run)) == {"q1", "q2"}  # what eval-run and trec_eval read
    # the names of the issue (--queries, --out), the default tag: the method
    other = tmp_path / "dt.run"
    args = ["run", "--model", str(DEMO), "--index", str(demo_index), "--method", "dt",
            "--queries", str(topics), "--out", str(other), "--hits", "2", "--quiet"]  # fmt: skip
    assert main(args) == 0
    assert {ln[5] for ln in run_lines(other)} == {"dt"}
    assert main([*args, "--tag", "two words"]) == 1
    assert "one word" in capsys.readouterr().err


def test_a_lex_version_serves_bowfd_search_and_leaves_the_bundle_alone(
    demo_index: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = bundle_files()
    store = load_bundle(DEMO, state_root=state).weights_store
    default = store.load("default").weights
    # what `clir train-ltr --lex --activate` stores when a trained epoch wins
    store.save({**default, IR_FEATURE: 1.0, "lex:tabelle_table": 2.0}, version="lex-test")
    index = ["--index", str(demo_index)]
    assert main(["weights", "--model", str(DEMO), "--activate", "lex-test", *index]) == 0
    activated = json.loads(capsys.readouterr().out)
    assert activated["previous"] == "default" and activated["probed"] is True
    search = ["search", "--model", str(DEMO), *index, "--method", "bowfd", QUERY, "--json"]
    assert main(search) == 0
    found = json.loads(capsys.readouterr().out)
    assert "weights:lex-test" in found["signature"]
    assert found["hits"][0]["doc_id"] in ("t1", "t2")

    assert main(["weights", "--model", str(DEMO), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    rows = {r["version"]: (r["origin"], r["active"]) for r in listed["versions"]}
    assert rows["default"] == ("bundle", False) and rows["lex-test"] == ("state", True)
    assert Path(listed["state"]).parent == state

    # a version naming a feature the model does not have is refused; lex-test keeps serving
    store.save({**default, "NoSuchFeature": 1.0}, version="unknown")
    assert main(["weights", "--model", str(DEMO), "--activate", "unknown", *index]) == 1
    err = capsys.readouterr().err
    assert "refused" in err and "NoSuchFeature" in err
    assert load_bundle(DEMO, state_root=state).active_weights().version == "lex-test"
    # a learned version its training did not offer: refused, naming the CLI's way to force it
    store.save(default, version="lost", source="ltr", metrics={"activation_offered": 0.0})
    assert main(["weights", "--model", str(DEMO), "--activate", "lost", *index]) == 1
    assert "not offered for activation" in (err := capsys.readouterr().err) and "--force" in err
    assert main(["weights", "--model", str(DEMO), "--activate", "lost", "--force", *index]) == 0
    capsys.readouterr()
    assert load_bundle(DEMO, state_root=state).active_weights().version == "lost"
    assert bundle_files() == shipped


def test_search_and_eval_expand_with_feedback(
    demo_index: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = ["--model", str(DEMO), "--index", str(demo_index), "--method", "dt"]
    assert main(["search", *base, QUERY, "--json", "--feedback", "--feedback-docs", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["signature"].endswith("|fb:rm3(2,10,0.7)+mix(0.5@100)")
    assert out["info"]["expansion"]["terms"]  # the expanded query is reported
    assert main(["search", *base, QUERY, "--feedback", "--feedback-weight", "2"]) != 0
    assert "feedback original_weight must be in [0, 1], got 2" in capsys.readouterr().err
    queries, qrels = tmp_path / "q.tsv", tmp_path / "qrels.txt"
    queries.write_text(f"q1\t{QUERY}\n", encoding="utf-8")
    qrels.write_text("q1 0 t1 1\n", encoding="utf-8")
    args = ["eval", *base, "--queries", str(queries), "--qrels", str(qrels), "--quiet", "--json"]
    assert main([*args, "--feedback", "--feedback-terms", "3", "--feedback-form", "replace"]) == 0
    assert json.loads(capsys.readouterr().out)["signature"].endswith("|fb:rm3(10,3,0.7)")

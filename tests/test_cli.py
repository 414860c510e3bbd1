"""The clir command: every verb has --help, unbuilt verbs exit 2, eval tools work."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from service.cli import build_parser, main
from service.data import rank_entries, write_run
from service.records import ScoredDoc

VERBS = [
    "train-model", "tune", "build-index", "translate", "search", "eval", "eval-tr",
    "eval-run", "compare-runs", "train-ltr", "serve", "run", "weights",
]  # fmt: skip


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([verb, "--help"])
    assert info.value.code == 0
    assert "usage: clir " + verb in capsys.readouterr().out


def test_missing_model_exits_1_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train-ltr", "--model", "m", "--index", "i", "--queries", "q", "--qrels", "r",
                 "--dev-queries", "q", "--dev-qrels", "r", "--quiet"]) == 1  # fmt: skip
    assert "clir: error:" in capsys.readouterr().err


def test_parser_lists_the_design_verbs() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert set(VERBS) <= set(sub.choices)  # type: ignore[arg-type]


def _write_run(path: Path, qrels: dict[str, dict[str, int]], quality: float, seed: int) -> None:
    """A run that places each query's relevant documents high with probability ``quality``."""
    rng = random.Random(seed)
    scored = []
    for qid, judged in qrels.items():
        for d, rel in judged.items():
            good = rel > 0 and rng.random() < quality
            scored.append(ScoredDoc(qid, d, 10 + rng.random() if good else rng.random()))
        for i in range(30):
            scored.append(ScoredDoc(qid, f"lo:noise{i}", rng.random() * 5))
    write_run(path, rank_entries(scored, "t", depth=1000))


def test_eval_run_missing_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval-run", "--qrels", str(tmp_path / "x"), "--run", str(tmp_path / "y")]) == 1
    assert "no such file" in capsys.readouterr().err


def test_search_json_speaks_the_rest_vocabulary(
    toy_paths: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`results` with `id`, as POST /v1/search; `hits`/`doc_id` stay, marked deprecated."""
    model, index = toy_paths
    args = ["search", "--model", str(model), "--index", str(index), "--method", "dt"]
    assert main([*args, "Das Haus ist groß.", "--k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["results"]) == 2
    first = out["results"][0]
    assert (first["rank"], first["id"], first["title"]) == (1, "d1", "Houses")
    assert out["deprecated"] == {"hits": "results", "doc_id": "id"}
    assert [h["doc_id"] for h in out["hits"]] == [r["id"] for r in out["results"]]


def test_search_pin_is_honoured_and_marked(capsys: pytest.CaptureFixture[str]) -> None:
    """`--pin Tabelle=sheet` on the demo: the translation says the pinned word, the JSON
    alternatives name the choice as the REST answer does, the text marks it; a pin no word of
    the query can take is refused naming it."""
    root = Path(__file__).resolve().parents[1]
    args = ["search", "--model", str(root / "models" / "demo-de-en"),
            "--index", str(root / "indexes" / "demo"), "--no-dense", "--k", "3"]  # fmt: skip
    assert main([*args, "Tabelle sortieren", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    tabelle = next(a for a in free["alternatives"] if a["source"] == "tabelle")
    assert tabelle["chosen"] is None
    assert {"table", "sheet"} <= {o["english"] for o in tabelle["options"]}
    assert main([*args, "Tabelle sortieren", "--pin", "Tabelle=sheet", "--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert "sheet" in pinned["translation"].split() and "pin:tabelle=sheet" in pinned["signature"]
    assert next(a for a in pinned["alternatives"] if a["source"] == "tabelle")["chosen"] == "sheet"
    assert pinned["results"] != free["results"]
    assert main([*args, "Tabelle sortieren", "--pin", "Tabelle=sheet"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"# tabelle: .*sheet \(0\.\d\d, pinned\)", err), err
    assert not re.search(r"table \([^)]*pinned", err)
    assert main([*args, "Tabelle sortieren", "--pin", "Haus=house"]) == 1
    assert "haus" in capsys.readouterr().err.lower()

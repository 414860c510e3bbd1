"""clir translate: 1-best per line on stdin, n-best lists, errors."""

from __future__ import annotations

import io

import pytest

from service.cli import main
from service.errors import InvalidInputError
from service.mt.bundle import ModelBundle
from service.mt.translate import translate_text


def test_translate_text_nbest(toy_bundle: ModelBundle) -> None:
    result = translate_text(toy_bundle, "Das Haus ist groß. Ein Hund ist klein.", nbest=3)
    assert [s.source for s in result] == [
        ("das", "haus", "ist", "groß", "."),
        ("ein", "hund", "ist", "klein", "."),
    ]
    first = result[0].nbest
    # haus -> house/home, groß -> big/large: at least three distinct strings exist
    assert {d.tokens[1] for d in first} <= {"house", "home"}
    assert len({d.tokens for d in first}) == len(first) == 3
    assert [d.score for d in first] == sorted((d.score for d in first), reverse=True)
    with pytest.raises(InvalidInputError):
        translate_text(toy_bundle, "   ")


def test_cli_stdin_one_line_per_line(
    toy_bundle: ModelBundle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("das buch ist alt\n\nein hund ist klein\n"))
    assert main(["translate", "--model", str(toy_bundle.path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["the book is old", "", "a dog is small"]


def test_cli_nbest_format(toy_bundle: ModelBundle, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "--model", str(toy_bundle.path), "das haus", "--nbest", "2"]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2
    assert {r[1] for r in rows} == {"the house", "the home"}
    assert "LanguageModel=" in rows[0][2]

"""Sentence splitting of multi-sentence queries (Hieber & Riezler 2015, §3)."""

from __future__ import annotations

import pytest

from service.errors import ConfigurationError
from service.text import split_sentences

GERMAN = [
    ("Das ist ein Test. Der zweite Satz!", ["Das ist ein Test.", "Der zweite Satz!"]),
    ("Was nun? Weiter.", ["Was nun?", "Weiter."]),
    ("Wählen Sie z. B. eine Datei. Dann OK.", ["Wählen Sie z. B. eine Datei.", "Dann OK."]),
    ("Das heißt d. h. Text. Neu", ["Das heißt d. h. Text.", "Neu"]),
    ("Tabellen bzw. Diagramme", ["Tabellen bzw. Diagramme"]),
    ("Siehe Nr. 5 und Abb. 3.", ["Siehe Nr. 5 und Abb. 3."]),
    ("Am 1. Januar 2024. Danach", ["Am 1. Januar 2024.", "Danach"]),
    ("Bis 24.12. Heute nicht.", ["Bis 24.12. Heute nicht."]),
    ("Etwa z.B. Dateien", ["Etwa z.B. Dateien"]),
    ("Klicken Sie auf OK. dann weiter", ["Klicken Sie auf OK. dann weiter"]),  # lower case
    ("Er sagte: „Gut.“ Dann ging er.", ["Er sagte: „Gut.“", "Dann ging er."]),
    ("Version 7.4 ist neu. (Siehe unten.)", ["Version 7.4 ist neu.", "(Siehe unten.)"]),
    ("Öffnen. Über. Ändern.", ["Öffnen.", "Über.", "Ändern."]),
    ("Mehrere Leerzeichen.   \n  Neuer Satz", ["Mehrere Leerzeichen.", "Neuer Satz"]),
    ("Kein Satzende", ["Kein Satzende"]),
    ("", []),
    ("  \n ", []),
]

CHINESE = [
    ("打开文件。然后保存！", ["打开文件。", "然后保存！"]),
    ("是吗？好；完", ["是吗？", "好；", "完"]),
    ("他说：“好。”然后走了。", ["他说：“好。”", "然后走了。"]),
    ("选择(A)!再选择(B)?", ["选择(A)!", "再选择(B)?"]),  # ASCII forms after NFKC
    ("版本 7.4 发布", ["版本 7.4 发布"]),  # a period is not a Chinese sentence end
    ("。。", ["。。"]),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), GERMAN)
def test_german(text: str, expected: list[str]) -> None:
    assert split_sentences(text, "de") == expected


@pytest.mark.parametrize(("text", "expected"), CHINESE)
def test_chinese(text: str, expected: list[str]) -> None:
    assert split_sentences(text, "zh") == expected


def test_english_abbreviations() -> None:
    assert split_sentences("Use e.g. Vim. It works.", "en") == ["Use e.g. Vim.", "It works."]


def test_unknown_language() -> None:
    with pytest.raises(ConfigurationError, match=r"'fr'.*de, en, zh"):
        split_sentences("Bonjour. Salut.", "fr")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("das haus ist groß. das auto ist rot.", ["das haus ist groß.", "das auto ist rot."]),
        ("das ist gut? ja sicher", ["das ist gut?", "ja sicher"]),
        ("wählen sie z. b. format. dann ok", ["wählen sie z. b. format.", "dann ok"]),
        # abbreviations, numbers and short tokens never end a lower-case sentence
        ("ca. 5 mal. nr. 3 ist gut", ["ca. 5 mal. nr. 3 ist gut"]),
        ("siehe bzw. dort", ["siehe bzw. dort"]),
        # mixed-case text keeps the capital-letter rule
        ("Siehe den Abschnitt. danach weiter", ["Siehe den Abschnitt. danach weiter"]),
    ],
)
def test_lower_case_queries_split_into_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text, "de") == expected

"""Short queries and their monolingual ceiling, derived from paragraph-length query sets."""

from __future__ import annotations

import pytest

from service.data.querysets import (
    SHORT_CHARS,
    SHORT_TOKENS,
    ceiling_queries,
    mate,
    short_queries,
    short_text,
)
from service.errors import InvalidInputError


def test_german_keeps_the_first_eight_whitespace_tokens() -> None:
    text = "Tabellen einfügen  Sie können eine Tabelle auf verschiedene Arten einfügen."
    assert short_text(text, "de") == "Tabellen einfügen Sie können eine Tabelle auf verschiedene"
    assert len(short_text(text, "de").split()) == SHORT_TOKENS
    assert short_text("Nur drei Wörter", "de") == "Nur drei Wörter"


def test_chinese_keeps_the_first_fourteen_characters_not_counting_spaces() -> None:
    text = "插入表格 在文本文档中插入表格的方法有好几种。"
    short = short_text(text, "zh")
    assert short == "插入表格 在文本文档中插入表格"
    assert len(short.replace(" ", "")) == SHORT_CHARS
    assert short_text("  排序  ", "zh") == "排序"


def test_short_queries_keep_qids_and_refuse_empty_text() -> None:
    assert short_queries({"q1": "a b c d e f g h i j"}, "de") == {"q1": "a b c d e f g h"}
    with pytest.raises(InvalidInputError, match="no text"):
        short_queries({"q1": "   "}, "de")


def test_ceiling_is_the_start_of_the_english_mate() -> None:
    qrels = {"q1": {"lo:a": 3, "lo:b": 2}, "q2": {"lo:b": 3}}
    english = {
        "lo:a": ("Inserting Tables", "There are several ways to insert a table into a document."),
        "lo:b": ("Sort", "Sorts the selected rows."),
    }
    got = ceiling_queries(["q1", "q2"], qrels, english)
    assert got == {
        "q1": "Inserting Tables There are several ways to insert",
        "q2": "Sort Sorts the selected rows.",
    }


def test_a_query_needs_exactly_one_mate() -> None:
    assert mate({"x": 1, "y": 3}) == "y"
    with pytest.raises(InvalidInputError, match="got 0"):
        mate({"x": 2})
    with pytest.raises(InvalidInputError, match="got 2"):
        mate({"x": 3, "y": 3})

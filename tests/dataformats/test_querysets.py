"""Short queries and their monolingual ceiling, derived from paragraph-length query sets."""

from __future__ import annotations

import pytest

from service.data.querysets import (
    SHORT_CHARS,
    SHORT_TOKENS,
    ceiling_queries,
    english_text,
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


@pytest.mark.parametrize(
    ("text", "short"),
    [
        # the 14th character is inside a Latin word: the word is kept whole
        ("文档信息 显示有关活动 LibreOffice 文档的信息。", "文档信息 显示有关活动 LibreOffice"),
        ("FORECAST.ETS.STAT.MULT 函数", "FORECAST.ETS.STAT.MULT"),
        ("文本格式定义编码为的 UTF-8 文本", "文本格式定义编码为的 UTF-8"),  # cut after "-"
        ("快捷方式 (LibreOffice) 键盘", "快捷方式 (LibreOffice"),
        # the cut falls after a whole word: nothing added
        ("公式 定义 UTF-8 编码的文本格式", "公式 定义 UTF-8 编码的文本"),
        ("在文本文档中插入 Basic 宏的方法", "在文本文档中插入 Basic 宏"),
    ],
)
def test_chinese_cut_never_ends_inside_a_latin_word(text: str, short: str) -> None:
    assert short_text(text, "zh") == short
    counted = len(short.replace(" ", ""))
    assert counted >= SHORT_CHARS or counted == len(text.replace(" ", ""))


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


def test_the_ceiling_does_not_repeat_the_title() -> None:
    """The query sets give the title once; an English page opens with it as a heading too."""
    qrels = {"q1": {"lo:a": 3}}
    english = {"lo:a": ("Text Mode", "Text  mode\nSwitches the text mode on or off.\nText Mode")}
    assert ceiling_queries(["q1"], qrels, english) == {
        "q1": "Text Mode Switches the text mode on or"
    }
    assert english_text("Zoom", "Zoom & View Layout\nZoom") == "Zoom Zoom & View Layout"


def test_a_query_needs_exactly_one_mate() -> None:
    assert mate({"x": 1, "y": 3}) == "y"
    with pytest.raises(InvalidInputError, match="got 0"):
        mate({"x": 2})
    with pytest.raises(InvalidInputError, match="got 2"):
        mate({"x": 3, "y": 3})

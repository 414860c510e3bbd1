"""Tokenisation per language: hand-written expected tokens, the registry, jieba's start-up."""

from __future__ import annotations

import pytest

from service.errors import ConfigurationError
from service.text import get_tokenizer, preprocess, tokenize_en
from service.text import tokenize as tok_module
from service.text.tokenize import ChineseTokenizer, MosesWordTokenizer

ENGLISH = [
    (
        "Don't split e-mail addresses, e.g. the user's files.",
        [
            "don",
            "'t",
            "split",
            "e",
            "@-@",
            "mail",
            "addresses",
            ",",
            "e.g.",
            "the",
            "user",
            "'s",
            "files",
            ".",
        ],
    ),
    ("Open the File (Ctrl+O)...", ["open", "the", "file", "(", "ctrl", "+", "o", ")", "..."]),
    ("Version 7.4 costs $5,000.", ["version", "7.4", "costs", "$", "5,000", "."]),
    ("Mr. Smith uses C++", ["mr.", "smith", "uses", "c", "+", "+"]),
    ("", []),
    ("   \t ", []),
]

GERMAN = [
    (
        "Öffnen Sie z. B. die Datei-Manager-Einstellungen, usw.",
        [
            "öffnen",
            "sie",
            "z.",
            "b.",
            "die",
            "datei",
            "@-@",
            "manager",
            "@-@",
            "einstellungen",
            ",",
            "usw.",
        ],
    ),
    ("Das ist's: 50 % weniger!", ["das", "ist", "'", "s", ":", "50", "%", "weniger", "!"]),
    ("Größe „groß“", ["größe", "„", "groß", "“"]),
]

CHINESE = [
    ("我们使用Linux系统", ["我们", "使用", "linux", "系统"]),
    ("打开Firefox浏览器。", ["打开", "firefox", "浏览器", "。"]),
    ("e-mail地址", ["e", "@-@", "mail", "地址"]),
    ("ＡＢＣ，１２３！", ["abc", ",", "123", "!"]),  # full-width forms: NFKC first
    ("Hello World", ["hello", "world"]),  # no Han at all: the English tokenizer
    ("中国 人民", ["中国", "人民"]),  # whitespace is never a token
]


@pytest.mark.parametrize(("text", "expected"), ENGLISH)
def test_english(text: str, expected: list[str]) -> None:
    assert get_tokenizer("en").tokenize(text) == expected
    assert tokenize_en(text) == expected


@pytest.mark.parametrize(("text", "expected"), GERMAN)
def test_german(text: str, expected: list[str]) -> None:
    assert get_tokenizer("de").tokenize(text) == expected


@pytest.mark.parametrize(("text", "expected"), CHINESE)
def test_chinese(text: str, expected: list[str]) -> None:
    assert get_tokenizer("zh").tokenize(text) == expected


def test_latin_words_in_chinese_match_the_english_tokens() -> None:
    english = "Open the file-manager's settings, e.g. Ctrl+O."
    zh = get_tokenizer("zh").tokenize("请" + english)
    assert zh == ["请", *tokenize_en(english)]


def test_marker_text_in_the_input_does_not_confuse_the_chinese_tokenizer() -> None:
    assert get_tokenizer("zh").tokenize("HANSEGMENT 中国") == ["hansegment", "中国"]


def test_registry() -> None:
    assert get_tokenizer("en") is get_tokenizer("en")
    assert isinstance(get_tokenizer("de"), MosesWordTokenizer)
    assert isinstance(get_tokenizer("zh"), ChineseTokenizer)
    assert get_tokenizer("de").lang == "de"
    with pytest.raises(ConfigurationError, match=r"'fr'.*de, en, zh"):
        get_tokenizer("fr")


def test_preprocess_normalises_then_tokenises() -> None:
    assert preprocess("Save _As… <b>%s</b> files", "en") == ["save", "as", "...", "files"]
    assert preprocess("保存文件(_S)", "zh") == ["保存", "文件"]


def test_broken_unicode_is_tokenised_safely() -> None:
    assert tokenize_en("bro\ud83dken\x00 te\u200bxt\ufffd") == ["broken", "text"]
    assert get_tokenizer("zh").tokenize("中\ud800国") == ["中国"]


def test_slow_and_fast_moses_agree_on_the_examples() -> None:
    slow = MosesWordTokenizer("en", fast=False)
    for text, expected in ENGLISH:
        assert slow.tokenize(text) == expected


def test_jieba_loads_lazily_once_and_silently(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import jieba

    calls = []
    original = jieba.Tokenizer.initialize

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(jieba.Tokenizer, "initialize", counting)
    monkeypatch.setattr(tok_module, "_jieba_tokenizer", None)
    tok_module._segment_han.cache_clear()
    zh = ChineseTokenizer()
    assert calls == []  # building the tokenizer loads nothing
    assert zh.tokenize("中国人民") == ["中国", "人民"]
    assert zh.tokenize("我们使用") == ["我们", "使用"]
    assert calls == [1]
    captured = capfd.readouterr()
    assert "Building prefix dict" not in captured.err
    assert "Loading model" not in captured.err
    assert captured.err == ""
    tok_module._segment_han.cache_clear()

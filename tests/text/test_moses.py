"""The cached Moses run (FastMoses) gives exactly sacremoses' output (the reference)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.text.moses import FastMoses

FAST = {lang: FastMoses(lang) for lang in ("en", "de")}

# Strings aimed at the places where a chunk could depend on its neighbours: commas and
# apostrophes at the text's ends and at chunk boundaries, periods before lower/upper case,
# non-breaking prefixes, multi-dots, control characters.
ADVERSARIAL = [
    ",5 starts with a comma",
    "ends with 5,",
    "ends with a,",
    "a ,5 b ,x c, d",
    "'quoted' words and dogs' toys",
    "x' 'y",
    "5' '5",
    "it's 'tis the dogs'",
    "He said.'",
    "Mr. Smith and mr. smith. No. 5 and No. five. etc. Etc.",
    "U.S.A. is big. e.g. this",
    "a...b ... c.... d..",
    "DOTMULTI and DOTDOTMULTI literal",
    "tabs\tand\x00junk \x07 here",
    "\x00 ,5",
    "e-mail--dash - a-b-c -x x-",
    "3.14, 2,5. 1.000,00",
    "'",
    "''",
    "' '",
    ",",
    ",,",
    "a , , b",
    "naïve café's Ünïcödé-wörter",
    "`backtick` ``double''",
    "(parens) [brackets] {braces} <angle>",
    "end.",
    "z. B. und d. h. usw.",
    "",
    "   ",
]


@pytest.mark.parametrize("lang", ["en", "de"])
@pytest.mark.parametrize("text", ADVERSARIAL)
def test_adversarial(lang: str, text: str) -> None:
    fm = FAST[lang]
    assert fm.tokenize(text) == fm.reference(text)


ALPHABET = [*"aAzZ5 .,'`-é(\t\x00", "Mr", "No", "etc", "...", "DOT", "ß", "Ö"]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), max_size=24).map("".join))
def test_random_strings_en(text: str) -> None:
    fm = FAST["en"]
    assert fm.tokenize(text) == fm.reference(text)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), max_size=24).map("".join))
def test_random_strings_de(text: str) -> None:
    fm = FAST["de"]
    assert fm.tokenize(text) == fm.reference(text)


def test_repeated_calls_use_the_cache_and_stay_equal() -> None:
    fm = FastMoses("en")
    text = "The file's name, e.g. foo.txt."
    first = fm.tokenize(text)
    assert fm.tokenize(text) == first == fm.reference(text)

"""Snippets: the best window, marking and escaping."""

from __future__ import annotations

import random

import pytest

from service.api.snippets import best_window, best_window_reference, make_snippet


def test_marks_terms_and_escapes_the_rest() -> None:
    text = "A <b>big</b> House & garden"
    assert make_snippet(text, {"house", "big"}) == (
        "A &lt;b&gt;<mark>big</mark>&lt;/b&gt; <mark>House</mark> &amp; garden"
    )


def test_window_holds_the_most_distinct_terms() -> None:
    text = "car car car x x x x house big x x"
    assert (
        make_snippet(text, {"car", "house", "big"}, width=3)
        == "… x <mark>house</mark> <mark>big</mark> …"
    )


def test_first_window_and_no_ellipsis_when_it_fits() -> None:
    assert make_snippet("a\n\nb   c", {"z"}, width=5) == "a b c"
    assert make_snippet("a b c d", {"z"}, width=2) == "a b …"


def test_text_without_words() -> None:
    assert make_snippet(" <> ", {"x"}) == "&lt;&gt;"


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        make_snippet("a", {"a"}, width=0)


def test_sliding_window_matches_the_reference() -> None:
    rng = random.Random(7)
    for _ in range(300):
        keys = [rng.choice(["a", "b", "c", None, None]) for _ in range(rng.randint(0, 25))]
        width = rng.randint(1, 8)
        assert best_window(keys, width) == best_window_reference(keys, width), (keys, width)

"""Sentence splitting of multi-sentence queries (Hieber & Riezler 2015, §3 "Multi-Sentence
Queries").

A query of several sentences is translated and ranked sentence by sentence and the rankings
are combined as a product of experts (Hieber & Riezler 2015, §3); this module cuts the query into
sentences.

* German (and English): after ``.``, ``!`` or ``?`` (plus closing quotes or brackets) that
  is followed by whitespace and an upper-case letter (after optional opening quotes or
  brackets), or by the end of the text. A period does not end a sentence after a known
  abbreviation (``bzw.``, ``Nr.``, ``usw.``, ``z.B.``; English ``e.g.``, ``etc.``), after a
  single letter (``z. B.``, ``d. h.``, ``u. a.``, initials), or after a one- or two-digit
  number or a dotted date (``1. Januar``, ``24.12. Heute``: German ordinals are written
  ``1.``); ``2024.`` does end a sentence.
* Text typed entirely in lower case (a common way to type a query) also splits before a
  lower-case letter, after ``!``/``?`` or after a period that follows a full word of at least
  four letters (never after an abbreviation, a number or a short token).
* Chinese: after ``。！？；`` (and their ASCII forms ``! ? ;``, which NFKC produces from the
  full-width ones), plus closing quotes or brackets; no space is needed.

Sentences are stripped; empty ones are dropped. Splitting works on raw or normalised text;
run it before lower-casing (normalize keeps case by default).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from service.errors import ConfigurationError, InvalidInputError

_CLOSERS = "\"'»«“”’‘)\\]」』）"
_OPENERS = "\"'„“‚‘»«(\\[「『（"

_WESTERN_END = re.compile(rf"[.!?]+[{_CLOSERS}]*(?=\s|$)")
_NEXT_START = re.compile(rf"\s+[{_OPENERS}]*(\S)")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ABBREVIATIONS_DE = _words(
    """
    abb abs abschn allg anm art aufl bd bspw bzgl bzw ca dipl dr etc evtl fa ff fr gem
    ggf ggfs hr hrsg inkl jh jhd kap max min mind mio mrd nr o.ä od prof rd s.o s.u sog
    st std str tab tel u.a u.ä usw u.u v.a vgl vs z.b z.t zb zzgl d.h
    """
)
_ABBREVIATIONS_EN = _words(
    """
    approx cf dept dr e.g eg esp etc fig i.e ie inc jr ltd max min mr mrs ms no nos pp
    prof resp sr st vol vs
    """
)
_NUMBER = re.compile(r"^(?:\d{1,2}|\d+(?:\.\d+)+)$")  # 1. / 24. / 24.12. (not 2024.)
_DOTTED = re.compile(r"^(?:[^\W\d_]\.)+[^\W\d_]$")  # z.B, u.a, d.h (the last dot is cut off)

_CJK_CLOSERS = "”’」』）》〉)\\]\"'"
_CJK_END = re.compile(rf"[。！？；!?;]+[{_CJK_CLOSERS}]*")


def _is_abbreviation(word: str, abbreviations: frozenset[str]) -> bool:
    word = word.lstrip(_OPENERS)
    if not word:
        return False
    return (
        (len(word) == 1 and word.isalpha())
        or word.lower() in abbreviations
        or bool(_NUMBER.match(word))
        or bool(_DOTTED.match(word))
    )


def _split_western(text: str, abbreviations: frozenset[str]) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _WESTERN_END.finditer(text):
        end = m.end()
        nxt = _NEXT_START.match(text, end)
        at_end = not text[end:].strip()
        if not at_end and nxt is None:
            continue
        marks = m.group(0).rstrip(_CLOSERS)
        words = text[start : m.start()].split()
        if not at_end and nxt is not None and not nxt.group(1).isupper():
            # lower case next: a new sentence only in text typed all in lower case, after
            # "!"/"?" or a full word (not an abbreviation, number or short token)
            lowered = text == text.lower()
            last = words[-1].strip(_CLOSERS + _OPENERS) if words else ""
            full_word = len(last) >= 4 and last.isalpha()
            if not (lowered and nxt.group(1).isalpha() and (marks != "." or full_word)):
                continue
        if not at_end and marks == "." and words and _is_abbreviation(words[-1], abbreviations):
            continue
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return [s for s in (p.strip() for p in out) if s]


def _split_chinese(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _CJK_END.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    return [s for s in (p.strip() for p in out) if s]


SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "de": lambda text: _split_western(text, _ABBREVIATIONS_DE),
    "en": lambda text: _split_western(text, _ABBREVIATIONS_EN),
    "zh": _split_chinese,
}


def split_sentences(text: str, lang: str) -> list[str]:
    """The non-empty sentences of ``text`` in language ``lang`` (``de``, ``en``, ``zh``)."""
    splitter = SPLITTERS.get(lang)
    if splitter is None:
        valid = ", ".join(sorted(SPLITTERS))
        raise ConfigurationError(
            f"no sentence splitter for language {lang!r}; choose one of {valid}"
        )
    if not isinstance(text, str):
        raise InvalidInputError(f"expected text as str, got {type(text).__name__}")
    return splitter(text)

"""Query sets that look like what users type, derived from the paragraph-length CLIR sets.

The LibreOffice query sets of ``../shared/data/clir`` are a page's title plus its first
paragraph (about 50 German words, 95 Chinese characters). Searchers mostly type a few words.
A **short** query keeps the beginning of the paragraph query — the first
:data:`SHORT_TOKENS` whitespace tokens of a German query, the first :data:`SHORT_CHARS`
characters of a Chinese one (a Latin word the cut falls inside kept whole) — which is mostly
the page title; it keeps the qid and so the
judgments of its paragraph query. Its **monolingual ceiling** is the same cut of the English
page's own text built as the query was (:func:`english_text`: the title, then the paragraphs,
a paragraph that repeats the title left out), ranked by the same index: what a perfect
translation of the short query could at best retrieve (Hieber & Riezler 2015, §5, compare their
systems with a monolingual upper bound in the same way).

Natural **questions** ("Wie füge ich eine Tabelle ein?") cannot be derived; they were written
by hand for a sample of dev pages (``bench/querysets/``, documented in its README).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from service.errors import InvalidInputError
from service.records import QrelsDict

SHORT_TOKENS = 8  # German (and any whitespace-separated language): tokens kept
SHORT_CHARS = 14  # Chinese: characters kept

QUERY_SETS: tuple[str, ...] = ("paragraph", "short", "question")


def short_text(text: str, lang: str) -> str:
    """The beginning of ``text`` a searcher would type: its first :data:`SHORT_CHARS`
    non-space characters for Chinese — a Latin word the cut falls inside kept whole
    (:func:`_latin_end`): a searcher types "LibreOffice", not "LibreOffic" —, its first
    :data:`SHORT_TOKENS` whitespace tokens otherwise (English included)."""
    if lang == "zh":
        chars = " ".join(text.split())
        i = n = 0
        while i < len(chars) and n < SHORT_CHARS:
            n += not chars[i].isspace()
            i += 1
        return chars[: _latin_end(chars, i)].strip()
    return " ".join(text.split()[:SHORT_TOKENS])


def _is_latin(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _latin_end(chars: str, i: int) -> int:
    """Where a cut at ``i`` ends once the Latin word it falls inside is completed: the run of
    ASCII letters and digits, with ``.``, ``-`` or ``_`` between two of them
    ("FORECAST.ETS.ADD", "UTF-8")."""
    if not 0 < i < len(chars):
        return i
    inside = _is_latin(chars[i - 1]) or (
        chars[i - 1] in "._-" and i > 1 and _is_latin(chars[i - 2]) and _is_latin(chars[i])
    )
    if not inside:
        return i
    while i < len(chars):
        if _is_latin(chars[i]):
            i += 1
        elif chars[i] in "._-" and i + 1 < len(chars) and _is_latin(chars[i + 1]):
            i += 2
        else:
            break
    return i


def short_queries(queries: Mapping[str, str], lang: str) -> dict[str, str]:
    """The short form of every query (same qids, so the same judgments apply)."""
    out = {qid: short_text(text, lang) for qid, text in queries.items()}
    empty = [qid for qid, text in out.items() if not text]
    if empty:
        raise InvalidInputError(f"{len(empty)} queries have no text to shorten, e.g. {empty[0]}")
    return out


def mate(judgments: Mapping[str, int]) -> str:
    """The document judged 3 (the page the query was made from); there must be one."""
    best = [d for d, rel in judgments.items() if rel == 3]
    if len(best) != 1:
        raise InvalidInputError(f"expected exactly one document judged 3, got {len(best)}")
    return best[0]


def english_text(title: str, text: str) -> str:
    """The English page as its foreign query was built: the title, then the paragraphs
    (``text``, one per line), leaving out a paragraph that repeats the title (case-folded,
    whitespace collapsed). The query sets never repeat the title — 1 of 260 de and 1 of 184
    zh dev queries start with a repeated phrase — while 235 / 175 of their English pages open
    with a heading equal to the title; keeping it would give the ceiling the title twice."""
    same = " ".join(title.split()).casefold()
    kept = [p for p in text.split("\n") if " ".join(p.split()).casefold() != same]
    return " ".join([title, *kept])


def ceiling_queries(
    qids: Iterable[str], qrels: QrelsDict, english: Mapping[str, tuple[str, str]]
) -> dict[str, str]:
    """For each qid, the first :data:`SHORT_TOKENS` tokens of its English mate's
    :func:`english_text` (``english`` maps a document id to ``(title, text)``)."""
    out: dict[str, str] = {}
    for qid in qids:
        out[qid] = short_text(english_text(*english[mate(qrels[qid])]), "en")
    return out

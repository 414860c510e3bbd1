"""Result snippets: a short passage of a document with the matched English terms marked.

The passage is the window of ``width`` words holding the most distinct matched terms (then
the most matched words; the earliest such window), so a searcher sees why the document was
retrieved (Hieber & Riezler 2015, §3: the terms of the derivation that earned BM25 weight). A word
matches when its lower-cased NFKC form is one of the terms — the index's English tokens are
lower-cased words, so this is the index tokenizer without its sentence-level steps. Everything but
the ``<mark>`` tags is HTML-escaped.

:func:`match_key` is that one notion of a matching word; :func:`highlight_spans` applies it to
a whole text for the document view (``GET /v1/documents/{id}?terms=…``), so the words marked
there are exactly the words a snippet of the same text would mark.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Sequence
from functools import lru_cache

_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
ELLIPSIS = "…"


def best_window_reference(keys: Sequence[str | None], width: int) -> int:
    """The start of the best window, by checking every window (the obviously correct one)."""
    best, best_key = 0, (-1, -1)
    for start in range(max(1, len(keys) - width + 1)):
        window = [k for k in keys[start : start + width] if k is not None]
        key = (len(set(window)), len(window))
        if key > best_key:
            best, best_key = start, key
    return best


def best_window(keys: Sequence[str | None], width: int) -> int:
    """The start of the best window in one sliding pass (same answer as the reference)."""
    counts: Counter[str] = Counter()
    matched = 0
    for k in keys[:width]:
        if k is not None:
            counts[k] += 1
            matched += 1
    best, best_key = 0, (len(counts), matched)
    for start in range(1, len(keys) - width + 1):
        out, into = keys[start - 1], keys[start + width - 1]
        if out is not None:
            counts[out] -= 1
            matched -= 1
            if counts[out] == 0:
                del counts[out]
        if into is not None:
            counts[into] += 1
            matched += 1
        key = (len(counts), matched)
        if key > best_key:
            best, best_key = start, key
    return best


@lru_cache(maxsize=1 << 16)
def fold(word: str) -> str:
    """The form a word is compared in: NFKC, lower-cased (memoised: the words of the documents
    repeat, and folding is most of a snippet's cost)."""
    return unicodedata.normalize("NFKC", word).lower()


def match_key(word: str, terms: Collection[str]) -> str | None:
    """The term that ``word`` matches (its folded form, when that is in ``terms``), else None."""
    folded = fold(word)
    return folded if folded in terms else None


def highlight_spans(text: str, terms: Collection[str]) -> list[tuple[int, int]]:
    """``[start, end)`` character offsets of the words of ``text`` that match ``terms``."""
    return [m.span() for m in _WORD.finditer(text) if match_key(m.group(), terms) is not None]


def make_snippet(text: str, terms: Collection[str], width: int = 30) -> str:
    """A ``width``-word passage of ``text`` with the words in ``terms`` wrapped in ``<mark>``."""
    if width < 1:
        raise ValueError(f"snippet width must be at least 1, got {width}")
    words = list(_WORD.finditer(text))
    if not words:
        return html.escape(_SPACE.sub(" ", text.strip()))
    keys = [match_key(m.group(), terms) for m in words]
    start = best_window(keys, width)
    stop = min(len(words), start + width)
    out: list[str] = [ELLIPSIS + " "] if start > 0 else []
    pos = words[start].start()
    for i in range(start, stop):
        m = words[i]
        out.append(html.escape(_SPACE.sub(" ", text[pos : m.start()])))
        word = html.escape(m.group())
        out.append(f"<mark>{word}</mark>" if keys[i] is not None else word)
        pos = m.end()
    if stop < len(words):
        out.append(html.escape(_SPACE.sub(" ", text[pos : words[stop].start()]).rstrip()))
        out.append(" " + ELLIPSIS)
    else:
        out.append(html.escape(_SPACE.sub(" ", text[pos:]).rstrip()))
    return "".join(out).strip()

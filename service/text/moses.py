"""A faster run of the Moses tokenizer (sacremoses) that gives exactly its output.

The English tokenizer also tokenises the ~16k documents of the index (Hieber & Riezler 2015, §3: a
target word of the grammar and an index term must be the same string), so it has to be quick.
``sacremoses.MosesTokenizer.tokenize`` applies a chain of regular expressions with very large
character classes to the whole string; most of the words it sees are frequent. This module
runs the same chain, using sacremoses' own compiled expressions and prefix lists, on one
whitespace-separated chunk at a time and caches the result per chunk. It is identical
because every substitution before the non-breaking-prefix step looks at most one character
beyond a chunk, and that character is always the separating space, which the chunk is
padded with (the text's first and last chunk are not padded, like the text's own ends).
The one exception, an apostrophe on both sides of a chunk boundary (``x' 'y``, where two
English apostrophe rules compete for the same space), is sent to sacremoses whole. The
non-breaking-prefix step, which looks at the next token, runs on the whole token list.
Within a chunk, a substitution is skipped when the character its pattern needs is absent
(no ``,`` → no comma rules), which cannot change the result. The chunk cache holds at most
65,536 entries (about 45 MB) and is emptied when full.

``tests/text/test_moses.py`` checks the equality on real corpus text and on adversarial
strings; :meth:`FastMoses.reference` is sacremoses itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from sacremoses import MosesTokenizer

_CACHE_SIZE = 1 << 16  # inner chunks; about 45 MB when full (~650 bytes an entry)
_LEADING_DIGITS = frozenset("0123456789")


class FastMoses:
    """``MosesTokenizer(lang).tokenize(text, escape=False, aggressive_dash_splits=...)``."""

    def __init__(self, lang: str, aggressive_dash_splits: bool = True) -> None:
        self.lang = lang
        self.aggressive_dash_splits = aggressive_dash_splits
        self._moses: Any = MosesTokenizer(lang=lang)
        m = self._moses
        self._pad: tuple[re.Pattern[str], str] = m.PAD_NOT_ISALNUM
        self._dash: tuple[re.Pattern[str], str] | None = (
            m.AGGRESSIVE_HYPHEN_SPLIT if aggressive_dash_splits else None
        )
        self._comma: list[tuple[re.Pattern[str], str]] = [
            m.COMMA_SEPARATE_1,
            m.COMMA_SEPARATE_2,
            m.COMMA_SEPARATE_3,
        ]
        if lang == "en":
            self._apostrophe: list[tuple[re.Pattern[str], str]] = m.ENGLISH_SPECIFIC_APOSTROPHE
        elif lang in ("fr", "it"):
            self._apostrophe = m.FR_IT_SPECIFIC_APOSTROPHE
        else:
            self._apostrophe = [m.NON_SPECIFIC_APOSTROPHE]
        # PAD_NOT_ISALNUM pads every character outside IsAlnum and ".'`,-": a chunk made of
        # ASCII letters, digits and those only is left alone, if IsAlnum has all of A-Z0-9.
        self._plain = _PLAIN_ASCII if set(m.IsAlnum) >= _ASCII_ALNUM else None
        # Apostrophe rules that consume the character after the apostrophe make a chunk
        # depend on its neighbour when both sides of a space are apostrophes.
        self._boundary_sensitive = lang in ("en", "fr", "it")
        self._replace_multidots: Callable[[str], str] = m.replace_multidots
        self._multidot_marker: re.Pattern[str] = m.MULTIDOT_MARKER
        self._nonbreaking = frozenset(m.NONBREAKING_PREFIXES)
        self._numeric_only = frozenset(m.NUMERIC_ONLY_PREFIXES)
        self._is_alpha = frozenset(m.IsAlpha)
        self._is_lower = frozenset(m.IsLower)
        self._inner_cache: dict[str, _Chunk] = {}
        self._edge = lru_cache(maxsize=_CACHE_SIZE // 4)(self._chunk_uncached)

    # --- the reference ----------------------------------------------------------------------

    def reference(self, text: str) -> list[str]:
        """sacremoses itself (slow, obviously right)."""
        tokens: list[str] = self._moses.tokenize(
            text, escape=False, aggressive_dash_splits=self.aggressive_dash_splits
        )
        return tokens

    # --- the fast path ----------------------------------------------------------------------

    def _chunk_uncached(self, chunk: str, first: bool, last: bool) -> _Chunk:
        """Tokens of one chunk, and the positions of those that end with a period."""
        s = ("" if first else " ") + chunk + ("" if last else " ")
        # The same substitutions as sacremoses, in its order; a step is skipped only when the
        # character its pattern needs is absent, so skipping cannot change the result.
        if self._plain is None or not self._plain.fullmatch(s):
            s = self._pad[0].sub(self._pad[1], s)
        if self._dash is not None and "-" in s:
            s = self._dash[0].sub(self._dash[1], s)
        if ".." in s:
            s = self._replace_multidots(s)
        if "," in s:
            for regexp, repl in self._comma:
                s = regexp.sub(repl, s)
        if "'" in s:
            for regexp, repl in self._apostrophe:
                s = regexp.sub(repl, s)
        tokens = tuple(s.split())
        dots = tuple(i for i, t in enumerate(tokens) if len(t) > 1 and t[-1] == ".")
        return tokens, dots

    def _inner(self, chunk: str) -> _Chunk:
        """A chunk with a space on both sides (all but the text's first and last), cached."""
        entry = self._inner_cache.get(chunk)
        if entry is None:
            if len(self._inner_cache) >= _CACHE_SIZE:
                self._inner_cache.clear()
            entry = self._inner_cache[chunk] = self._chunk_uncached(chunk, False, False)
        return entry

    def tokenize(self, text: str) -> list[str]:
        chunks = text.split()
        if not chunks:
            return []
        if _CONTROL.search(text):  # ASCII junk is deleted after spaces are merged
            text = " ".join(chunks).translate(_ASCII_JUNK)
            chunks = text.split()
            if not chunks:
                return []
        if self._boundary_sensitive and "'" in text and "' '" in " ".join(chunks):
            return self.reference(text)
        if len(chunks) == 1:
            tokens, dots = self._edge(chunks[0], True, True)
            tokens_out = list(tokens)
            candidates = list(dots)
        else:
            tokens_out, candidates = self._join(chunks)
        if candidates:
            self._nonbreaking_prefixes(tokens_out, candidates)
        if tokens_out[-1].endswith(".'"):  # TRAILING_DOT_APOSTROPHE
            tokens_out[-1:] = (tokens_out[-1][:-2] + " . ' ").split()
        if ".." in text or "MULTI" in text:  # restore the multi-dot markers
            marker = self._multidot_marker
            tokens_out = " ".join(marker.sub(_dots, t) for t in tokens_out).split()
        return tokens_out

    def _join(self, chunks: list[str]) -> tuple[list[str], list[int]]:
        tokens, dots = self._edge(chunks[0], True, False)
        out = list(tokens)
        candidates = list(dots)
        cache = self._inner_cache
        for chunk in chunks[1:-1]:
            entry = cache.get(chunk)
            tokens, dots = entry if entry is not None else self._inner(chunk)
            if dots:
                base = len(out)
                candidates.extend(base + d for d in dots)
            out.extend(tokens)
        tokens, dots = self._edge(chunks[-1], False, True)
        if dots:
            base = len(out)
            candidates.extend(base + d for d in dots)
        out.extend(tokens)
        return out, candidates

    def _nonbreaking_prefixes(self, tokens: list[str], candidates: list[int]) -> None:
        """Split the final period off a word unless it is an abbreviation (in place).

        ``candidates`` are the positions of the tokens that end with a period (and have
        something before it), in increasing order.
        """
        n = len(tokens)
        split_at: list[int] = []
        for i in candidates:
            prefix = tokens[i][:-1]
            if (
                ("." in prefix and any(c in self._is_alpha for c in prefix))
                or (prefix in self._nonbreaking and prefix not in self._numeric_only)
                or (i != n - 1 and tokens[i + 1][0] in self._is_lower)
            ):
                continue
            if prefix in self._numeric_only and i + 1 < n and tokens[i + 1][0] in _LEADING_DIGITS:
                continue
            split_at.append(i)
        for i in reversed(split_at):
            tokens[i : i + 1] = [tokens[i][:-1], "."]


_Chunk = tuple[tuple[str, ...], tuple[int, ...]]
_ASCII_ALNUM = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_PLAIN_ASCII = re.compile(r"[A-Za-z0-9.'`,\- ]*")
_ASCII_JUNK = {cp: None for cp in range(32)}
_CONTROL = re.compile(r"[\000-\037]")


def _dots(m: re.Match[str]) -> str:
    return "." * ((m.end() - m.start() - 5) // 3)

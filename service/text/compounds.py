"""Splitting query words the grammar cannot translate into parts it can (Koehn & Knight 2003, §4).

German writes compounds as one word, and users type compounds a help page's grammar never saw
("Textskalierung", "Datenformulare", "Masternotizlayout"). The decoder passes such a word
through untranslated, so a short query loses its most important term. Koehn & Knight 2003, §4
("frequency based metric"), split a word into parts that occur as words of the corpus, choosing
the split ``S`` with the highest geometric mean of the parts' corpus counts,
``argmax_S (Π_{p ∈ S} count(p))^{1/|S|}``; the unsplit word competes with its own count, so a
frequent whole word is never split. Between two parts a filler letter sequence may stand
(German ``s`` and ``es``: "Fehlerbehandlung·s·funktionen").

How the service uses it (:attr:`service.mt.bundle.ModelBundle.compound_splitter`): only words
the grammar does not know are split (the grammar was trained on unsplit text, so a known word
is better translated whole), parts must be known to the grammar with at least ``min_count``
occurrences in the training corpus and at least ``min_part`` characters, and words that the
English side knows are kept (an identifier such as ``scriptbindinglibrary`` passes through the
decoder and matches the documents as it is). Measured on the de dev sets (bench/README.md,
"Queries people type"): 12 of 260 short queries change, and every method gains on them.

:class:`CompoundSplitter` finds the best split exactly: for every number of parts ``n`` a
dynamic programme over suffixes finds the split into ``n`` parts with the largest product of
counts (integers, compared exactly), and the products are compared across ``n`` as
``P_a^{n_b}`` against ``P_b^{n_a}``. Ties go to fewer parts, then to longer parts from the
left. :func:`best_split_reference` enumerates every split and is what the tests compare with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cmp_to_key

# a split: (product of the parts' counts, number of parts, ((part length, filler length), ...))
Split = tuple[int, int, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class CompoundRule:
    """How a language's compounds are split: the filler letters allowed between parts, the
    shortest part (characters), the fewest corpus occurrences a part needs, the most parts and
    the longest word that is tried."""

    fillers: tuple[str, ...] = ("",)
    min_part: int = 4
    min_count: int = 10
    max_parts: int = 4
    max_length: int = 60


#: Languages whose query words are split, and how (Koehn & Knight 2003, §4: fillers s, es).
COMPOUND_RULES: dict[str, CompoundRule] = {"de": CompoundRule(fillers=("", "s", "es"))}


def _compare(a: Split, b: Split) -> int:
    """> 0 if ``a`` is the better split: the higher geometric mean of the counts, then fewer
    parts, then longer parts from the left."""
    left, right = a[0] ** b[1], b[0] ** a[1]
    if left != right:
        return 1 if left > right else -1
    if a[1] != b[1]:
        return 1 if a[1] < b[1] else -1
    return (a[2] > b[2]) - (a[2] < b[2])


_KEY = cmp_to_key(_compare)


def parts_of(word: str, shape: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    """The parts of ``word`` for a split's shape ``((part length, filler length), ...)``."""
    out, at = [], 0
    for length, filler in shape:
        out.append(word[at : at + length])
        at += length + filler
    return tuple(out)


def _pieces(word: str, start: int, rule: CompoundRule) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Every end of a part beginning at ``start``, with the starts of the next part: none when
    the part runs to the end of the word, else one per filler that follows it (with at least
    one more character after the filler)."""
    n = len(word)
    for end in range(start + rule.min_part, n + 1):
        nexts = tuple(end + len(f) for f in rule.fillers
                      if word.startswith(f, end) and end + len(f) < n)  # fmt: skip
        if end == n or nexts:
            yield end, nexts


def best_split(word: str, count: Callable[[str], int], rule: CompoundRule) -> Split | None:
    """The best split of ``word`` into parts of positive ``count`` (None if there is none)."""
    n = len(word)
    # table[i][k]: the best split of word[i:] into k parts, as (product, shape)
    table: list[dict[int, tuple[int, tuple[tuple[int, int], ...]]]] = [{} for _ in range(n + 1)]
    for start in range(n - rule.min_part, -1, -1):
        row = table[start]
        for end, nexts in _pieces(word, start, rule):
            c = count(word[start:end])
            if c <= 0:
                continue
            options: list[tuple[int, int, tuple[tuple[int, int], ...]]]
            if end == n:
                options = [(1, c, ((end - start, 0),))]
            else:
                options = [(k + 1, c * p, ((end - start, nxt - end), *shape))
                           for nxt in nexts for k, (p, shape) in table[nxt].items()
                           if k < rule.max_parts]  # fmt: skip
            for k, p, shape in options:
                old = row.get(k)
                if old is None or (p, shape) > old:
                    row[k] = (p, shape)
    found = [(p, k, shape) for k, (p, shape) in table[0].items()]
    return max(found, key=_KEY) if found else None


def best_split_reference(
    word: str, count: Callable[[str], int], rule: CompoundRule
) -> Split | None:
    """:func:`best_split` by enumerating every split (the obviously correct reference)."""

    def splits(start: int) -> Iterator[tuple[int, tuple[tuple[int, int], ...]]]:
        for end, nexts in _pieces(word, start, rule):
            c = count(word[start:end])
            if c <= 0:
                continue
            if end == len(word):
                yield c, ((end - start, 0),)
            for nxt in nexts:
                for p, shape in splits(nxt):
                    yield c * p, ((end - start, nxt - end), *shape)

    found = [(p, len(shape), shape) for p, shape in splits(0) if len(shape) <= rule.max_parts]
    return max(found, key=_KEY) if found else None


class CompoundSplitter:
    """Splits the words of a tokenised query that the grammar does not know.

    ``known(word)``: the grammar can translate the word (it is never split); ``count(word)``:
    the word's occurrences in the training corpus (a part needs ``rule.min_count`` and must
    be known); ``keep(word)``: True for a word that must stay whole although the grammar does
    not know it (the service keeps words the English language model knows).
    """

    def __init__(
        self,
        known: Callable[[str], bool],
        count: Callable[[str], int],
        keep: Callable[[str], bool],
        rule: CompoundRule,
        cache_size: int = 100_000,
    ) -> None:
        self.rule = rule
        self._known = known
        self._count = count
        self._keep = keep
        self._cache: dict[str, tuple[str, ...]] = {}
        self._cache_size = cache_size

    def part_count(self, word: str) -> int:
        """A part's count: ``count(word)`` for a known word with at least ``rule.min_count``
        occurrences, else 0 (not a part)."""
        if not self._known(word):
            return 0
        c = self._count(word)
        return c if c >= self.rule.min_count else 0

    def split_word(self, word: str) -> tuple[str, ...]:
        """``word``'s parts, or ``(word,)`` when it is known, kept, not a letters-only word of
        2·min_part to max_length characters, or has no split into known parts."""
        rule = self.rule
        if (
            self._known(word)
            or not rule.min_part * 2 <= len(word) <= rule.max_length
            or not word.isalpha()
            or self._keep(word)
        ):
            return (word,)
        hit = self._cache.get(word)
        if hit is None:
            best = best_split(word, self.part_count, rule)
            hit = parts_of(word, best[2]) if best is not None else (word,)
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[word] = hit
        return hit

    def split(self, tokens: Sequence[str]) -> tuple[str, ...]:
        """The tokens with every unknown compound replaced by its parts."""
        return tuple(part for token in tokens for part in self.split_word(token))

    __call__ = split  # a token step (:func:`service.text.tokenize.source_tokens`)

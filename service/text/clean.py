"""Cleaning of the parallel corpus before word alignment and rule extraction.

The translation model is trained on tokenised text (Hieber & Riezler 2015, §5 "Data and
Systems"): both sides of every pair are normalised (:func:`service.text.normalize.normalize`) and
tokenised (:func:`service.text.get_tokenizer`), and a pair is dropped, by the first rule that
applies, when

1. ``empty``: a side has no token left (e.g. a string that was only ``%s`` or markup);
2. ``too_long``: a side has more than ``max_tokens`` tokens (default 80);
3. ``length_ratio``: the longer side has more than ``max_ratio`` times (default 9) as many
   tokens as the shorter one.

The :class:`CleaningReport` counts how many pairs each rule removed and what the
normalisation changed on each side (over all input pairs, dropped ones included); it prints
as a small table and serialises to JSON for the model manifest. Usage::

    cleaner = CorpusCleaner("de", "en")
    for pair in cleaner.clean(read_parallel(path)):
        ...
    print(cleaner.report)           # complete once the iterator is exhausted
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from service.errors import ConfigurationError
from service.records import ParallelPair
from service.text.normalize import NormalizationCounts, normalize
from service.text.tokenize import get_tokenizer

RULES = ("empty", "too_long", "length_ratio")


@dataclass(frozen=True, slots=True)
class TokenizedPair:
    """A cleaned pair: origin and the lower-cased tokens of source and target."""

    origin: str
    source: tuple[str, ...]
    target: tuple[str, ...]


@dataclass(slots=True)
class CleaningReport:
    """Counts of a cleaning run. ``pairs_in == pairs_kept + sum(removed.values())``."""

    src_lang: str
    tgt_lang: str
    max_tokens: int
    max_ratio: float
    pairs_in: int = 0
    pairs_kept: int = 0
    removed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    source_normalised: NormalizationCounts = field(default_factory=NormalizationCounts)
    target_normalised: NormalizationCounts = field(default_factory=NormalizationCounts)
    source_tokens: int = 0  # tokens of the kept pairs
    target_tokens: int = 0
    complete: bool = False  # set when the input is exhausted

    def consistent(self) -> bool:
        return self.pairs_in == self.pairs_kept + sum(self.removed.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "max_tokens": self.max_tokens,
            "max_ratio": self.max_ratio,
            "pairs_in": self.pairs_in,
            "pairs_kept": self.pairs_kept,
            "removed": dict(self.removed),
            "normalised": {
                "source": self.source_normalised.to_dict(),
                "target": self.target_normalised.to_dict(),
            },
            "tokens_kept": {"source": self.source_tokens, "target": self.target_tokens},
            "complete": self.complete,
        }

    def __str__(self) -> str:
        lines = [
            f"corpus cleaning {self.src_lang}-{self.tgt_lang} "
            f"(max_tokens={self.max_tokens}, max_ratio={self.max_ratio:g})"
            + ("" if self.complete else " [incomplete]"),
            f"  pairs in              {self.pairs_in:>10,}",
        ]
        lines += [f"  removed: {rule:<12} {n:>10,}" for rule, n in self.removed.items()]
        lines.append(f"  pairs kept            {self.pairs_kept:>10,}")
        lines.append(
            f"  tokens kept           {self.source_tokens:>10,} {self.src_lang}"
            f"  {self.target_tokens:,} {self.tgt_lang}"
        )
        lines.append(f"  normalised {'':<10} {self.src_lang:>10} {self.tgt_lang:>10}")
        src, tgt = self.source_normalised.to_dict(), self.target_normalised.to_dict()
        lines += [f"    {k:<18} {src[k]:>10,} {tgt[k]:>10,}" for k in src]
        return "\n".join(lines)


class CorpusCleaner:
    """Normalise, tokenise and filter parallel pairs; :attr:`report` holds the counts."""

    def __init__(
        self,
        src_lang: str,
        tgt_lang: str = "en",
        *,
        max_tokens: int = 80,
        max_ratio: float = 9.0,
    ) -> None:
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be at least 1, got {max_tokens}")
        if not max_ratio >= 1.0:
            raise ConfigurationError(f"max_ratio must be at least 1, got {max_ratio}")
        self.src = get_tokenizer(src_lang)
        self.tgt = get_tokenizer(tgt_lang)
        self.report = CleaningReport(src_lang, tgt_lang, max_tokens, max_ratio)

    def clean_pair(self, pair: ParallelPair) -> TokenizedPair | None:
        """The cleaned pair, or ``None`` if a rule drops it (counted in :attr:`report`)."""
        r = self.report
        r.pairs_in += 1
        source = self.src.tokenize(normalize(pair.foreign, counts=r.source_normalised))
        target = self.tgt.tokenize(normalize(pair.english, counts=r.target_normalised))
        ns, nt = len(source), len(target)
        if ns == 0 or nt == 0:
            rule = "empty"
        elif ns > r.max_tokens or nt > r.max_tokens:
            rule = "too_long"
        elif max(ns, nt) > r.max_ratio * min(ns, nt):
            rule = "length_ratio"
        else:
            r.pairs_kept += 1
            r.source_tokens += ns
            r.target_tokens += nt
            return TokenizedPair(pair.origin, tuple(source), tuple(target))
        r.removed[rule] += 1
        return None

    def clean(self, pairs: Iterable[ParallelPair]) -> Iterator[TokenizedPair]:
        """The kept pairs, in input order; marks the report complete at the end."""
        for pair in pairs:
            kept = self.clean_pair(pair)
            if kept is not None:
                yield kept
        self.report.complete = True


def clean_parallel(
    pairs: Iterable[ParallelPair],
    src_lang: str,
    tgt_lang: str = "en",
    *,
    max_tokens: int = 80,
    max_ratio: float = 9.0,
) -> tuple[Iterator[TokenizedPair], CleaningReport]:
    """The kept pairs (lazily) and the report they fill in as they are consumed."""
    cleaner = CorpusCleaner(src_lang, tgt_lang, max_tokens=max_tokens, max_ratio=max_ratio)
    return cleaner.clean(pairs), cleaner.report

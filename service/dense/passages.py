"""A document read as passages: its title before each window of its text.

A dense encoder reads a bounded number of tokens (E5: 512), and a long page read as its
first lines only is judged by its first lines. Following Dai & Callan 2019 (§3.2, "FirstP"
and "MaxP"), a document is cut into passages — windows of at most ``chars`` characters of its
text, each preceded by the document's title — and scores by its best passage (MaxP). The
windows are consecutive, not overlapping, and end at the last line break or space before the
limit when there is one in the window's second half (a word is not cut in two); at most
``max_passages`` windows are read from the start of a page (1: FirstP).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from service.errors import ConfigurationError


@dataclass(frozen=True)
class PassageParams:
    """How documents are cut into passages (stored with the vectors; part of the signature)."""

    chars: int = 600
    max_passages: int = 8

    def __post_init__(self) -> None:
        if self.chars < 50:
            raise ConfigurationError(
                f"passage length must be at least 50 characters, not {self.chars}"
            )
        if self.max_passages < 1:
            raise ConfigurationError(
                f"a document needs at least one passage, not {self.max_passages}"
            )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def signature(self) -> str:
        return f"{self.chars}x{self.max_passages}"


def windows(text: str, chars: int, limit: int) -> list[str]:
    """At most ``limit`` consecutive windows of ``text``, each at most ``chars`` characters,
    cut after the last line break or space of the window's second half when there is one;
    surrounding whitespace stripped, empty windows skipped."""
    out: list[str] = []
    start, n = 0, len(text)
    while start < n and len(out) < limit:
        end = min(start + chars, n)
        if end < n:
            cut = max(
                text.rfind("\n", start + chars // 2, end), text.rfind(" ", start + chars // 2, end)
            )
            if cut > start:
                end = cut + 1
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    return out


def passages(title: str, text: str, params: PassageParams) -> list[str]:
    """The passages of a document: ``title`` before each window of ``text``; at least one
    (the title alone when the text is empty)."""
    head = title.strip()
    pieces = windows(text, params.chars, params.max_passages)
    if not pieces:
        return [head]
    return [f"{head}\n{p}" if head else p for p in pieces]

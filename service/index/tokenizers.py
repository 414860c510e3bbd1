"""Tokenizers for indexing, chosen by name so that the index manifest can record which one
built it and queries are processed the same way at search time.

* ``"en"``: the product's English processing, :func:`service.text.preprocess` with ``"en"``
  (:func:`service.text.normalize`, then lowercased Moses tokens) — exactly what the target
  side of the grammar's training corpus went through, so a target word of a derivation and
  an index term are the same string (Hieber & Riezler 2015, §3, score target words of derivations
  against the index). Its signature ends in ``+normalize-v1`` (:data:`EN_PROCESSING`): indexes built
  by the earlier tokenize-only version have a different signature and are rebuilt as stale.
* ``"regex"``: a dependency-free lowercase ``\\w+`` / punctuation splitter, for tests and for
  checkouts where ``service.text`` is not available.

Multi-line text is tokenised line by line (a document's paragraphs, like the one-line
segments of the parallel data the grammar was trained on) and the tokens concatenated.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from service.errors import ConfigurationError

TokenizeFn = Callable[[str], list[str]]

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def regex_tokenize(text: str) -> list[str]:
    """Lowercased runs of word characters; every other non-space character is a token."""
    return _WORD.findall(text.lower())


# Version tag of the "en" processing, part of its signature: bump it whenever the steps
# before the tokenizer change, so that existing indexes are detected as out of date.
EN_PROCESSING = "normalize-v1"


def _english() -> TokenizeFn:
    try:
        from service.text import get_tokenizer, preprocess
    except ImportError as exc:
        raise ConfigurationError(
            "tokenizer 'en' needs service.text.preprocess, which is not available "
            f"({exc}); build with tokenizer 'regex' or install the text module"
        ) from exc
    get_tokenizer("en")  # fail here, not on the first document, if it cannot load

    def tokenize(text: str) -> list[str]:
        return preprocess(text, "en")

    return tokenize


TOKENIZERS: dict[str, Callable[[], TokenizeFn]] = {
    "en": _english,
    "regex": lambda: regex_tokenize,
}


def get_index_tokenizer(name: str) -> TokenizeFn:
    """The tokenizer registered under ``name``; an unknown name lists the valid ones."""
    factory = TOKENIZERS.get(name)
    if factory is None:
        raise ConfigurationError(
            f"unknown tokenizer {name!r}; choose one of {', '.join(sorted(TOKENIZERS))}"
        )
    return factory()


def tokenizer_signature(name: str) -> str:
    """A description of everything that changes the tokens of tokenizer ``name`` (for the
    manifest: a new tokenizer version makes an existing index out of date)."""
    if name == "regex":
        return f"regex:{_WORD.pattern}:lower"
    if name == "en":
        get_index_tokenizer("en")
        from service.text import get_tokenizer

        return f"{get_tokenizer('en').signature()}+{EN_PROCESSING}"
    get_index_tokenizer(name)  # raises for unknown names
    return name


def tokenize_lines(tokenize: TokenizeFn, text: str) -> list[str]:
    """Tokenise each non-blank line of ``text`` and concatenate the tokens."""
    out: list[str] = []
    for line in text.split("\n"):
        if line.strip():
            out.extend(tokenize(line))
    return out

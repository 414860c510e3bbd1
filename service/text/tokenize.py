"""Tokenisation per language behind one base class and a registry by language code.

The translation model is trained on tokenised text (Hieber & Riezler 2015, §5 "Data and Systems"),
and target words of derivations are matched against index terms (§3), so English is tokenised by
the same code for the grammar and for the documents of the index.

* ``en``, ``de``: the Moses tokenizer (sacremoses), ``escape=False`` (tokens are the text's
  own characters, not ``&amp;``), with aggressive dash splitting: ``Datei-Manager`` →
  ``datei @-@ manager``. Hyphenated compounds are frequent in German UI strings and their
  parts align one-to-one with English words (``Datei-Manager`` / ``file manager``), and in
  retrieval ``command-line`` then matches documents that write ``command line``. The
  ``@-@`` token is Moses' standard, reversible marker; it carries no meaning for retrieval
  (the index may treat it as a stop word). English and German run through
  :class:`service.text.moses.FastMoses` (identical output, cached per word).
* ``zh``: runs of Han characters are segmented by jieba in precise mode (HMM on); every other
  character goes through the English tokenizer, so Latin words, numbers and punctuation
  inside Chinese text are split and lower-cased exactly like English and meet the same
  index terms. jieba's dictionary is loaded lazily, once per process, with its start-up
  logging silenced. (Dictionary words that mix Han and Latin, like 卡拉OK, are split at the
  script boundary.)

Every tokenizer first applies :func:`service.text.normalize.clean_unicode` (broken Unicode,
NFKC) and returns lower-cased tokens; markup and placeholders are the job of
:func:`service.text.normalize.normalize` (compose the two with :func:`preprocess`).
"""

from __future__ import annotations

import logging
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from typing import Any

from service.errors import ConfigurationError
from service.text.moses import FastMoses
from service.text.normalize import NormalizationCounts, clean_unicode, normalize


class Tokenizer(ABC):
    """Text → lower-cased tokens for one language. Subclasses fill :meth:`_segment`."""

    lang: str

    def tokenize(self, text: str) -> list[str]:
        """Lower-cased tokens of ``text`` (Unicode-cleaned and NFKC-normalised first)."""
        text = clean_unicode(text)
        if not text or text.isspace():
            return []
        # one lower() over the joined tokens: lower-casing never creates whitespace
        return " ".join(self._segment(text)).lower().split()

    __call__ = tokenize

    @abstractmethod
    def _segment(self, text: str) -> list[str]:
        """Tokens of clean, NFKC-normalised text, in their original case."""

    def signature(self) -> str:
        """A short description of everything that changes the tokens (for manifests)."""
        return f"{self.lang}:{type(self).__name__}"


class MosesWordTokenizer(Tokenizer):
    """Moses tokenization (sacremoses), ``escape=False``, aggressive dash splitting."""

    def __init__(self, lang: str, *, fast: bool = True) -> None:
        self.lang = lang
        self._moses = FastMoses(lang, aggressive_dash_splits=True)
        self._fast = fast

    def _segment(self, text: str) -> list[str]:
        return self._moses.tokenize(text) if self._fast else self._moses.reference(text)

    def signature(self) -> str:
        import sacremoses

        version = getattr(sacremoses, "__version__", "?")
        return f"{self.lang}:moses(sacremoses {version}, escape=False, aggressive_dash_splits)"


# --- Chinese ---------------------------------------------------------------------------------

_HAN = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_MARKER = "HANSEGMENT"

_jieba_lock = threading.Lock()
_jieba_tokenizer: Any = None


def _jieba() -> Any:
    """The process's jieba tokenizer, its dictionary loaded on first use (about 1 s)."""
    global _jieba_tokenizer
    if _jieba_tokenizer is None:
        with _jieba_lock:
            if _jieba_tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                tk = jieba.Tokenizer()
                tk.initialize()
                _jieba_tokenizer = tk
    return _jieba_tokenizer


@lru_cache(maxsize=1 << 16)
def _segment_han(run: str) -> tuple[str, ...]:
    words: list[str] = _jieba().lcut(run, cut_all=False, HMM=True)
    return tuple(w for w in words if w and not w.isspace())


class ChineseTokenizer(Tokenizer):
    """jieba (precise mode) for Han runs, the English tokenizer for everything else."""

    def __init__(self, english: MosesWordTokenizer | None = None) -> None:
        self.lang = "zh"
        self._english = english if english is not None else _moses("en")

    def _segment(self, text: str) -> list[str]:
        runs = _HAN_RUN.findall(text)
        if not runs:
            return self._english._segment(text)
        marker = _MARKER
        while marker in text:  # a marker that cannot come from the text itself
            marker += "X"
        skeleton = _HAN_RUN.sub(f" {marker} ", text)
        out: list[str] = []
        it = iter(runs)
        for token in self._english._segment(skeleton):
            if token == marker:
                out.extend(_segment_han(next(it)))
            else:
                out.append(token)
        return out

    def signature(self) -> str:
        import jieba

        return f"zh:jieba({jieba.__version__}, precise, HMM)+{self._english.signature()}"


# --- registry ------------------------------------------------------------------------------


@cache
def _moses(lang: str) -> MosesWordTokenizer:
    return MosesWordTokenizer(lang)


@cache
def _chinese() -> ChineseTokenizer:
    return ChineseTokenizer()


TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "en": lambda: _moses("en"),
    "de": lambda: _moses("de"),
    "zh": _chinese,
}


def get_tokenizer(lang: str) -> Tokenizer:
    """The (shared, cached) tokenizer for a language code; unknown codes list the valid ones."""
    factory = TOKENIZERS.get(lang)
    if factory is None:
        valid = ", ".join(sorted(TOKENIZERS))
        raise ConfigurationError(f"no tokenizer for language {lang!r}; choose one of {valid}")
    return factory()


def tokenize_en(text: str) -> list[str]:
    """English tokens: the target side of the grammar and the terms of the index."""
    return _moses("en").tokenize(text)


def preprocess(text: str, lang: str, counts: NormalizationCounts | None = None) -> list[str]:
    """:func:`normalize` then tokenize: the processing of corpus sides and of queries."""
    return get_tokenizer(lang).tokenize(normalize(text, counts=counts))


TokenStep = Callable[[Sequence[str]], Sequence[str]]


def source_tokens(sentence: str, lang: str, *steps: TokenStep | None) -> list[str]:
    """``sentence`` preprocessed like the grammar's source side (:func:`preprocess`), then
    passed through ``steps`` in order (None: skipped) — the query's analysis before decoding:
    a how-to question rewritten (:mod:`service.text.questions`, search only), unknown compounds
    split (:mod:`service.text.compounds`)."""
    tokens = preprocess(sentence, lang)
    for step in steps:
        if step is not None:
            tokens = list(step(tokens))
    return tokens

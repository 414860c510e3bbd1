"""The analysis chain: which English tokens are index terms, and under which form.

Hieber & Riezler (2015, §1) note that retrieval systems apply stopword filtering and stemming
to the words of a query before matching them against the index; their BOW-FD model scores the
target words of a derivation against the index (§3), so whatever the index does to a word of
a document, the query side must do to a target word of the forest. This module is that one
place: a chain of named steps applied to each token of the index tokenizer
(:mod:`service.index.tokenizers`) when the index is built, and to every English token a method
produces at search time — DT's 1-best words, PSQ's translation alternatives, BOW-FD's
per-hyperedge target words, the explanation and the document view's highlighting — through
:meth:`service.index.inverted.InvertedIndex.term_id`.

Steps (applied in this order, whatever order they are named in):

* ``word``: drop tokens without a letter or digit (``?``, ``,``, ``(``, ``--``, ``&`` …).
  Punctuation carries no topic; ``?`` is dense in FAQs and rare in help pages, so as an index
  term it pulls every question towards FAQs.
* ``min2``: drop one-character tokens (``i``, ``a``, ``s`` of "'s", single digits).
* ``stop``: drop the 33 English stopwords of :data:`STOPWORDS` (Lucene's English set).
* ``stop-long``: drop the ~180 words of :data:`LONG_STOPWORDS` (Snowball's English list:
  also pronouns, auxiliaries and question words — "how do i", "can", "why").
* ``stem``: the Snowball English (Porter 2) stemmer, via PyStemmer.

A chain is written as its step names joined by ``+`` (``"word+min2"``); ``"none"`` keeps every
token as it is (the translation-retrieval pool, whose Levenshtein reranking compares full
token sequences). The chain's :func:`analysis_signature` (its steps and :data:`VERSION`) is
recorded in the index manifest and in every scorer signature; an index built with another
version of a chain is refused when it is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from service.errors import ConfigurationError

# Bump when a step's behaviour changes: indexes built with an older version are refused.
VERSION = 1

# The classic English stop set of the Lucene/Elasticsearch "english" analyzer (33 words).
_STOP_TEXT = """a an and are as at be but by for if in into is it no not of on or such that the
their then there these they this to was will with"""
STOPWORDS: frozenset[str] = frozenset(_STOP_TEXT.split())

# The Snowball project's English stop list (function words, pronouns, auxiliaries, question
# words), in the pieces the Moses tokenizer splits contractions into ("don't" -> don 't).
_LONG_STOP_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he
him his himself she her hers herself it its itself they them their theirs themselves what which
who whom this that these those am is are was were be been being have has had having do does did
doing would should could ought a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each few
more most other some such no nor not only own same so than too very can cannot will shall must
let 's 't 'm 're 've 'd 'll n't don doesn didn isn aren wasn weren hasn haven hadn won wouldn
shan shouldn couldn mustn"""
LONG_STOPWORDS: frozenset[str] = frozenset(_LONG_STOP_TEXT.split())

STEPS: tuple[str, ...] = ("word", "min2", "stop", "stop-long", "stem")


def is_word(token: str) -> bool:
    """Whether ``token`` has a letter or digit (the ``word`` step keeps only those)."""
    return any(c.isalnum() for c in token)


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigurationError(
            f"analysis step 'stem' needs PyStemmer, which is not installed ({exc})"
        ) from exc
    stem: Callable[[str], str] = Stemmer.Stemmer("english").stemWord
    return stem


def parse_chain(spec: str) -> tuple[str, ...]:
    """The steps of chain ``spec`` (``"word+min2"``, ``"none"``) in canonical order."""
    text = spec.strip().lower()
    if text in ("", "none"):
        return ()
    names = [s.strip() for s in text.replace(",", "+").split("+") if s.strip()]
    unknown = [s for s in names if s not in STEPS]
    if unknown:
        raise ConfigurationError(
            f"unknown analysis step(s) {', '.join(map(repr, unknown))} in {spec!r}; "
            f"steps are {', '.join(STEPS)} (joined by '+'), or 'none'"
        )
    return tuple(s for s in STEPS if s in names)


@dataclass(frozen=True)
class Analyzer:
    """Maps an index-tokenizer token to its index term, or to ``None`` when it is no term."""

    steps: tuple[str, ...]
    _memo: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_spec(cls, spec: str) -> Analyzer:
        return cls(parse_chain(spec))

    @property
    def name(self) -> str:
        return "+".join(self.steps) if self.steps else "none"

    @property
    def signature(self) -> str:
        return analysis_signature(self.name)

    def term(self, token: str) -> str | None:
        """The index term of ``token`` (memoised: a vocabulary is small, tokens repeat); an
        empty token is never a term."""
        if not self.steps:
            return token or None
        try:
            return self._memo[token]
        except KeyError:
            pass
        out = self._term(token)
        if len(self._memo) < 1_000_000:
            self._memo[token] = out
        return out

    def _term(self, token: str) -> str | None:
        steps = self.steps
        if not token:
            return None
        if "word" in steps and not is_word(token):
            return None
        if "min2" in steps and len(token) < 2:
            return None
        if "stop" in steps and token in STOPWORDS:
            return None
        if "stop-long" in steps and token in LONG_STOPWORDS:
            return None
        if "stem" in steps:
            token = _stemmer()(token)
        return token

    def terms(self, tokens: Iterable[str]) -> list[str]:
        """The index terms of ``tokens``, in order, dropped tokens left out."""
        out: list[str] = []
        for t in tokens:
            term = self.term(t)
            if term is not None:
                out.append(term)
        return out


def analysis_signature(spec: str) -> str:
    """What the manifest and the scorer signatures record for chain ``spec``."""
    steps = parse_chain(spec)
    return f"{'+'.join(steps) if steps else 'none'}-v{VERSION}"


@lru_cache(maxsize=16)
def get_analyzer(spec: str) -> Analyzer:
    """The (shared, memoising) analyzer of chain ``spec``."""
    return Analyzer.from_spec(spec)

"""The searcher's say in the query's translation: the English alternatives the forest holds for
each source word, with their posteriors, and the choices that restrict the forest to some.

User-assisted query translation (Oard, He & Wang 2008, "User-assisted query translation for
interactive cross-language information retrieval", IP&M 44(1), §3): the searcher sees each
query term's candidate translations and keeps or drops them. Here the candidates are read off
the +LM translation forest itself (Hieber & Riezler 2015, §3: the hypergraph every method
ranks with), weighted by the posterior of the hyperedges that translate the word — inside and
outside scores in the log semiring, :func:`~service.forest.inference.edge_posteriors`.

* **Alternatives.** In every derivation each source position is translated by the own words
  of exactly one hyperedge (:func:`~service.forest.inference.covered_positions`), so the
  posteriors of the edges covering a position sum to one. The edges that translate one source
  word on its own give its options: their English with the function words at either end
  dropped ("a table" is "table"), the posteriors of the edges giving the same option summed and
  divided by the mass of the word translated on its own (``alone``: how often the forest
  translates it so, rather than inside a longer phrase). A word is listed when two options or
  more reach :data:`MIN_P` and it is translated on its own at least :data:`MIN_ALONE` of the
  time.
* **Pins** (``Tabelle=table``): every hyperedge whose own words translate a position of the
  pinned word must say the pinned English (as consecutive words), so "insert a table" for
  "fügen Sie eine Tabelle ein" stays and "sheet" goes. **Blocks** (``sheet``): no hyperedge may
  say the blocked word. The forest is cut to the derivations left before any method reads it,
  so DT's 1-best, PSQ's n-best and BOW-FD's forest all honour the choices. A pin holds at
  each occurrence of its word the forest can translate so (another keeps its own readings);
  where the cube-pruned forest holds no derivation saying it at all of them together, it holds
  at each in turn where the others allow. A pin that matches no source word, that no
  occurrence can say, or choices that leave no derivation, are refused naming them. Both the
  cut (:func:`~service.forest.inference.fast_restrict`) and the edges it keeps are computed
  over the forest's arrays; ``engine="reference"`` is the object-by-object version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.core.jit import Engine
from service.errors import InvalidInputError
from service.forest.hypergraph import Hypergraph
from service.forest.inference import (
    covered_positions,
    covering_edges,
    derives,
    edge_posteriors,
    fast_edge_posteriors,
    fast_restrict,
    restrict,
    single_positions,
    viterbi_scores,
)
from service.index.analysis import LONG_STOPWORDS, is_word
from service.retrieval.base import DecodedQuery

MIN_P = 0.05  # an option below this share of its word's own translations is not offered
MIN_ALONE = 0.1  # a word translated on its own less often than this is not offered
MAX_OPTIONS = 5
MAX_CHOICES = 20  # pins and blocks a request may carry


@dataclass(frozen=True, slots=True)
class Option:
    english: str
    p: float

    def to_json(self) -> dict[str, Any]:
        return {"english": self.english, "p": round(self.p, 4)}


@dataclass(frozen=True, slots=True)
class Alternative:
    """A source word (``span``: its position in sentence ``sentence``, end exclusive) the
    forest translates in several ways."""

    source: str
    sentence: int
    span: tuple[int, int]
    alone: float  # the posterior of the word translated on its own
    options: tuple[Option, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sentence": self.sentence,
            "span": list(self.span),
            "alone": round(self.alone, 4),
            "options": [o.to_json() for o in self.options],
        }


@dataclass(frozen=True, slots=True)
class Choices:
    """What the searcher chose: source word → the English it must be translated as, and
    English words no translation may use. Normalised (lower case, sorted), so that equal
    choices have equal signatures and cache keys."""

    pins: tuple[tuple[str, tuple[str, ...]], ...] = ()
    blocks: tuple[str, ...] = ()

    @classmethod
    def of(cls, pins: Mapping[str, str] | None, blocks: Sequence[str] | None) -> Choices:
        pins, blocks = dict(pins or {}), list(blocks or [])
        if len(pins) + len(blocks) > MAX_CHOICES:
            raise InvalidInputError(
                f"{len(pins) + len(blocks)} pins and blocks; at most {MAX_CHOICES} are allowed"
            )
        norm_pins: dict[str, tuple[str, ...]] = {}
        for source, english in pins.items():
            src, eng = _words(source), _words(english)
            if len(src) != 1 or not eng:
                raise InvalidInputError(
                    f"pin {_show(source)}={_show(english)}: a pin is one source word and the "
                    "English it must be translated as"
                )
            norm_pins[src[0]] = eng
        norm_blocks: set[str] = set()
        for word in blocks:
            w = _words(word)
            if len(w) != 1:
                raise InvalidInputError(f"block {_show(word)}: a block is one English word")
            norm_blocks.add(w[0])
        return cls(tuple(sorted(norm_pins.items())), tuple(sorted(norm_blocks)))

    def __bool__(self) -> bool:
        return bool(self.pins or self.blocks)

    def chosen(self) -> dict[str, str]:
        """Source word → the English pinned for it, as the answers show it."""
        return {source: " ".join(english) for source, english in self.pins}

    def signature(self) -> str:
        """``pin:tabelle=table,block:sheet`` (empty without choices)."""
        parts = [f"pin:{s}={'_'.join(e)}" for s, e in self.pins]
        parts += [f"block:{b}" for b in self.blocks]
        return ",".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"pins": {s: " ".join(e) for s, e in self.pins}, "blocks": list(self.blocks)}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.lower().split())


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


@lru_cache(maxsize=65536)
def _content(words: tuple[str, ...]) -> tuple[str, ...]:
    """``words`` without the function words and punctuation at either end."""
    keep = [is_word(w) and w.lower() not in LONG_STOPWORDS for w in words]
    if not any(keep):
        return ()
    first = keep.index(True)
    last = len(keep) - keep[::-1].index(True)
    return words[first:last]


def word_options(
    hg: Hypergraph, weights: Mapping[str, float], length: int, engine: Engine = "compiled"
) -> list[tuple[float, dict[str, float]]]:
    """For each source position: the posterior of it translated on its own, and the posterior
    of each option (content English) it is then translated as (not yet divided).
    ``engine="reference"``: edge by edge over the forest's objects (the slow, obviously correct
    version); ``"compiled"``: compiled inside–outside and positions over its arrays."""
    alone = [0.0] * length
    options: list[dict[str, float]] = [defaultdict(float) for _ in range(length)]
    if engine == "reference":
        mu = edge_posteriors(hg, weights)
        for e, covered in enumerate(covered_positions(hg)):
            if len(covered) == 1 and 0 <= covered[0] < length:
                english = _content(hg.edges[e].target_terminals)
                alone[covered[0]] += float(mu[e])
                if english:
                    options[covered[0]][" ".join(english)] += float(mu[e])
    else:
        a = hg.arrays()
        positions = single_positions(hg)
        edges = np.flatnonzero((positions >= 0) & (positions < length))
        mu = fast_edge_posteriors(hg, weights)
        ptr, ids, vocab = a.term_ptr.tolist(), a.term_ids.tolist(), a.vocabulary
        for e, pos, m in zip(edges.tolist(), positions[edges].tolist(), mu[edges].tolist(),
                             strict=True):  # fmt: skip
            alone[pos] += m
            english = _content(tuple(vocab[t] for t in ids[ptr[e] : ptr[e + 1]]))
            if english:
                options[pos][" ".join(english)] += m
    return [(alone[i], dict(options[i])) for i in range(length)]


def alternatives(query: DecodedQuery, min_p: float = MIN_P) -> list[Alternative]:
    """The source words of ``query`` its forests translate in more than one way (see the
    module docstring), in sentence and word order."""
    found: list[Alternative] = []
    for s, (tokens, forest) in enumerate(zip(query.sentences, query.forests, strict=True)):
        if not any(_content((t,)) for t in tokens):
            continue
        for i, (alone, opts) in enumerate(word_options(forest.hypergraph, query.weights,
                                                       len(tokens))):  # fmt: skip
            if alone < MIN_ALONE or not is_word(tokens[i]):
                continue
            ranked = sorted(((p / alone, e) for e, p in opts.items()), key=lambda x: (-x[0], x[1]))
            shown = [Option(e, p) for p, e in ranked[:MAX_OPTIONS] if p >= min_p]
            if len(shown) >= 2:
                found.append(Alternative(tokens[i], s, (i, i + 1), alone, tuple(shown)))
    return found


def _says(terminals: Sequence[str], english: Sequence[str]) -> bool:
    n = len(english)
    words = [t.lower() for t in terminals]
    return any(tuple(words[k : k + n]) == tuple(english) for k in range(len(words) - n + 1))


def apply_choices(
    query: DecodedQuery, choices: Choices, engine: Engine = "compiled"
) -> DecodedQuery:
    """``query`` with each forest cut to the derivations the choices allow (see the module
    docstring); the query itself without choices. ``engine="reference"`` checks edge by edge
    over the forest's objects (the slow, obviously correct version); ``"compiled"`` reads the
    arrays (the same cut, without making the forest's objects)."""
    if not choices:
        return query
    pinned = {src for src, _ in choices.pins}
    seen = {t.lower() for tokens in query.sentences for t in tokens}
    missing = sorted(pinned - seen)
    if missing:
        raise InvalidInputError(
            f"pin {_show(missing[0])}: no word of the query is {_show(missing[0])} "
            f"(its words: {', '.join(_show(t) for t in sorted(seen)[:12])})"
        )
    masks_of = _masks if engine == "compiled" else _masks_reference
    cut_by = fast_restrict if engine == "compiled" else restrict

    def derivable(hg: Hypergraph, keep: NDArray[np.bool_]) -> bool:
        return derives(hg, keep) if engine == "compiled" else restrict(hg, keep) is not None

    # a pin holds where its word can say it: a word twice in the query, one occurrence of
    # which the forest translates only otherwise, keeps that one's own translations
    masks = [
        masks_of(forest.hypergraph, tokens, choices)
        for tokens, forest in zip(query.sentences, query.forests, strict=True)
    ]
    for source, english in choices.pins:
        if not any(tokens[i].lower() == source for tokens, (_, held) in
                   zip(query.sentences, masks, strict=True) for i in held):  # fmt: skip
            raise InvalidInputError(
                f"pin {source}={' '.join(english)}: no translation of {_show(source)} in the "
                "forest says it (see the alternatives)"
            )
    forests = []
    for tokens, forest, (unblocked, held) in zip(query.sentences, query.forests, masks,
                                                 strict=True):  # fmt: skip
        hg = forest.hypergraph
        keep = unblocked.copy()
        for ok in held.values():
            keep &= ok
        cut = cut_by(hg, keep)
        if cut is None and len(held) > 1:
            # each occurrence can say the pin, but the (pruned) forest holds no derivation
            # saying it at all of them together: held at each in turn where the others allow
            keep = unblocked.copy()
            for ok in held.values():
                if derivable(hg, keep & ok):
                    keep &= ok
            cut = cut_by(hg, keep)
        if cut is None:
            raise InvalidInputError(
                f"the choices {choices.signature()} leave no translation of "
                f"{_show(' '.join(tokens))}: the forest has none that says them"
            )
        best = float(viterbi_scores(cut, query.weights)[0][cut.goal])
        forests.append(replace(forest, hypergraph=cut, best_score=best))
    return replace(query, forests=tuple(forests))


Masks = tuple[NDArray[np.bool_], dict[int, NDArray[np.bool_]]]


def _masks_reference(hg: Hypergraph, tokens: Sequence[str], choices: Choices) -> Masks:
    """Which edges say no blocked word, and for each position of a pinned word that some edge
    translates as pinned (where the pin holds), which edges leave it to others or say the pin:
    edge by edge, over the forest's objects."""
    pins = dict(choices.pins)
    blocks = set(choices.blocks)
    covered = covered_positions(hg)
    terminals = [hg.edges[e].target_terminals for e in range(hg.num_edges)]
    unblocked = [not any(w.lower() in blocks for w in terms) for terms in terminals]
    held = {}
    for i, token in enumerate(tokens):
        if (word := token.lower()) in pins:
            ok = [
                i not in covered[e] or _says(terminals[e], pins[word]) for e in range(len(covered))
            ]
            if any(i in covered[e] and ok[e] for e in range(len(covered))):
                held[i] = np.array(ok, dtype=np.bool_)
    return np.array(unblocked, dtype=np.bool_).reshape(-1), held


def _masks(hg: Hypergraph, tokens: Sequence[str], choices: Choices) -> Masks:
    """:func:`_masks_reference` over the forest's arrays."""
    pins = dict(choices.pins)
    a = hg.arrays()
    lower = [w.lower() for w in a.vocabulary]
    owner = np.repeat(np.arange(hg.num_edges), np.diff(a.term_ptr))  # each target word's edge

    def having(words: set[str]) -> NDArray[np.bool_]:  # edges with one of ``words``
        ids = [i for i, w in enumerate(lower) if w in words]
        hit = np.isin(a.term_ids, ids)
        return np.bincount(owner[hit], minlength=hg.num_edges) > 0

    unblocked = ~having(set(choices.blocks))
    saying: dict[str, NDArray[np.bool_]] = {}
    held = {}
    for i, token in enumerate(tokens):
        word = token.lower()
        if word not in pins:
            continue
        if word not in saying:
            english = pins[word]
            says = having({english[0]})
            if len(english) > 1:  # consecutive words: checked on the edges that have the first
                ptr, ids = a.term_ptr, a.term_ids
                for e in np.flatnonzero(says).tolist():
                    terms = [lower[t] for t in ids[ptr[e] : ptr[e + 1]].tolist()]
                    says[e] = _says(terms, english)
            saying[word] = says
        covering = covering_edges(hg, i)
        if (covering & saying[word]).any():
            held[i] = ~covering | saying[word]
    return unblocked, held

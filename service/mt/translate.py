"""Sentence translation with a bundle: 1-best and n-best lists (``clir translate``).

The text is split into sentences, preprocessed like the training corpus (compounds the grammar
does not know split into words it knows, :mod:`service.text.compounds`), decoded into the +LM
forest (:mod:`service.mt.decoder`) and read out by Viterbi or by unique k-best extraction
(:mod:`service.forest.kbest`, Huang & Chiang 2005 Algorithm 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.errors import InvalidInputError
from service.forest.hypergraph import Derivation
from service.forest.inference import fast_viterbi
from service.forest.kbest import UNIQUE_KBEST_TIME_BUDGET_S, unique_kbest
from service.mt.bundle import ModelBundle
from service.mt.decoder import DecoderConfig, Forest
from service.text import split_sentences
from service.text.tokenize import source_tokens


@dataclass(frozen=True)
class SentenceTranslation:
    source: tuple[str, ...]
    nbest: list[Derivation]

    @property
    def best(self) -> Derivation:
        return self.nbest[0]


def translate_text(
    bundle: ModelBundle,
    text: str,
    *,
    nbest: int = 1,
    config: DecoderConfig | None = None,
    split: bool = True,
    time_budget: float = UNIQUE_KBEST_TIME_BUDGET_S,
) -> list[SentenceTranslation]:
    """Translate ``text`` sentence by sentence; each entry holds up to ``nbest`` translations
    (``time_budget``: seconds per sentence for the distinct strings, see
    :func:`service.forest.kbest.unique_kbest`)."""
    if nbest < 1:
        raise InvalidInputError(f"nbest must be at least 1, got {nbest}")
    if not text.strip():
        raise InvalidInputError("nothing to translate: the text is empty")
    decoder = bundle.decoder(config)
    sentences = split_sentences(text, bundle.src) if split else [text]
    out: list[SentenceTranslation] = []
    for sentence in sentences:
        tokens = source_tokens(sentence, bundle.src, decoder.splitter)
        if tokens:
            forest = decoder.forest(tokens)
            out.append(forest_translations(tokens, forest, decoder.weights, nbest, time_budget))
    return out


def forest_translations(
    source: Sequence[str],
    forest: Forest,
    weights: Mapping[str, float],
    nbest: int = 1,
    time_budget: float = UNIQUE_KBEST_TIME_BUDGET_S,
) -> SentenceTranslation:
    """The ``nbest`` best distinct translations of one decoded sentence (a forest decoded
    once, here or in the service's query cache, is read out here), looked for during at most
    ``time_budget`` seconds (:func:`service.forest.kbest.unique_kbest`)."""
    if nbest < 1:
        raise InvalidInputError(f"nbest must be at least 1, got {nbest}")
    if nbest == 1:
        entries = [fast_viterbi(forest.hypergraph, weights)]
    else:
        entries = unique_kbest(forest.hypergraph, weights, nbest, time_budget=time_budget)
    return SentenceTranslation(tuple(source), entries)

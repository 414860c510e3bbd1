"""From query text to a :class:`~service.retrieval.base.DecodedQuery` (Hieber & Riezler 2015, §3).

The query is split into sentences (Hieber & Riezler 2015, §3 "Multi-Sentence Queries"), each
normalised and tokenised exactly like the grammar's source side (:func:`service.text.preprocess`),
a German how-to question rewritten as the instruction that answers it (the decoder's
``questions``, :mod:`service.text.questions`), its compounds that the grammar does not know
split into words it knows (the decoder's ``splitter``, Koehn & Knight 2003, §4;
:mod:`service.text.compounds`), and decoded into its +LM forest. Sentences that normalise to
nothing are dropped; a query with no sentence left is an error.
"""

from __future__ import annotations

from service.errors import InvalidInputError
from service.mt.decoder import Decoder
from service.retrieval.base import DecodedQuery
from service.text import split_sentences
from service.text.compounds import CompoundSplitter
from service.text.questions import QuestionRewriter
from service.text.tokenize import source_tokens


def query_sentences(
    text: str,
    lang: str,
    max_words: int = 200,
    splitter: CompoundSplitter | None = None,
    questions: QuestionRewriter | None = None,
) -> list[tuple[str, ...]]:
    """Tokenised sentences of a query, how-to questions rewritten by ``questions``, unknown
    compounds split by ``splitter``; long sentences are cut into ``max_words`` pieces."""
    out: list[tuple[str, ...]] = []
    for sentence in split_sentences(text, lang):
        tokens = source_tokens(sentence, lang, questions, splitter)
        for start in range(0, len(tokens), max_words):
            piece = tuple(tokens[start : start + max_words])
            if piece:
                out.append(piece)
    return out


def decoder_sentences(
    decoder: Decoder, text: str, lang: str, *, search: bool = True
) -> list[tuple[str, ...]]:
    """:func:`query_sentences` as ``decoder`` reads a query: its compound splitter, and — for
    document search (``search``), not for translation retrieval, whose suggestions must
    translate the question as asked — its question rewriter."""
    questions = decoder.questions if search else None
    return query_sentences(text, lang, decoder.config.max_words, decoder.splitter, questions)


def decode_query(
    decoder: Decoder,
    text: str,
    lang: str,
    *,
    qid: str = "q",
    weights_version: str = "default",
    search: bool = True,
) -> DecodedQuery:
    """Split, tokenise and decode ``text`` into one +LM forest per sentence. ``search``: a
    how-to question is decoded as the instruction that answers it (document search); False
    decodes it as asked (translation retrieval, whose suggestions translate the question)."""
    if not text or not text.strip():
        raise InvalidInputError("the query is empty")
    sentences = decoder_sentences(decoder, text, lang, search=search)
    if not sentences:
        raise InvalidInputError("the query has no words left after normalisation")
    forests = tuple(decoder.forest(s) for s in sentences)
    return DecodedQuery(
        qid=qid,
        text=text,
        lang=lang,
        sentences=tuple(sentences),
        forests=forests,
        weights=decoder.weights,
        weights_version=weights_version,
    )

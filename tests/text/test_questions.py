"""German how-to questions searched as instructions: the rewrite by hand-worked cases, the
choice of the infinitive by counts, the sentences it leaves alone, and the bundle's rewriter on
the search path only (translation keeps the question)."""

from __future__ import annotations

import random

import pytest

from service.mt.bundle import ModelBundle
from service.mt.translate import translate_text
from service.retrieval.query import decode_query, decoder_sentences, query_sentences
from service.text.questions import QuestionRewriter, infinitive_candidates

COUNTS = {"fügen": 50, "ändern": 40, "änderen": 12, "wechseln": 30, "arbeiten": 20,
          "zeigen": 25, "finden": 15, "selten": 9}  # fmt: skip
REWRITE = QuestionRewriter(lambda w: COUNTS.get(w, 0))


@pytest.mark.parametrize(
    ("question", "searched"),
    [
        ("wie füge ich eine tabelle ein ?", "fügen sie eine tabelle ein ."),
        ("wie ändere ich meine farbe ?", "ändern sie ihre farbe ."),  # ändern beats änderen
        ("wie wechsle ich das laufwerk ?", "wechseln sie das laufwerk ."),
        ("wie fügt man eine tabelle ein ?", "fügen sie eine tabelle ein ."),
        ("wie arbeitet man mit meinen vorlagen", "arbeiten sie mit ihren vorlagen ."),
        ("wie zeige ich ein fenster an ? ?", "zeigen sie ein fenster an ."),
        ("wie kann ich eine tabelle einfügen ?", "eine tabelle einfügen ."),
        ("wie kann man werte anzeigen lassen ?", "werte anzeigen lassen ."),
        ("wo finde ich die hilfe ?", "finden sie die hilfe ."),
        ("kann ich nur meine änderungen anzeigen ?", "nur ihre änderungen anzeigen ."),
        ("darf man das ?", "das ."),
    ],
)
def test_questions_become_instructions(question: str, searched: str) -> None:
    assert REWRITE.rewrite(question.split()) == searched.split()


@pytest.mark.parametrize(
    "sentence",
    [
        "warum kann ich das dokument nicht ändern ?",  # not a how/where question
        "welche farbe kann ich wählen ?",
        "kann das sein ?",  # a modal without ich/man
        "wie viele seiten hat das dokument ?",  # no subject ich/man
        "wie selte ich das ?",  # the infinitive is too rare (9 < 10)
        "wie blorpe ich das ?",  # unknown verb
        "wie kann ich ?",  # nothing left to search
        "wie füge ich",  # too short
        "fügen sie eine tabelle ein .",  # already an instruction
        "wie schön ist das ?",
    ],
)
def test_other_sentences_stay_as_they_are(sentence: str) -> None:
    tokens = sentence.split()
    assert REWRITE.rewrite(tokens) is None
    assert REWRITE(tokens) == tokens


def test_the_most_counted_known_infinitive_wins() -> None:
    assert infinitive_candidates("ändere", "ich") == ["änderen", "ändern", "ändeern"]
    assert infinitive_candidates("wechsle", "ich") == ["wechslen", "wechseln"]
    assert infinitive_candidates("arbeitet", "man") == ["arbeiteen", "arbeiten"]
    assert infinitive_candidates("füge", "man") == []  # "man" takes the third person
    assert REWRITE.infinitive("ändere", "ich") == "ändern"
    swapped = QuestionRewriter(lambda w: {"änderen": 41, "ändern": 40}.get(w, 0))
    assert swapped.infinitive("ändere", "ich") == "änderen"
    assert QuestionRewriter(lambda w: 0).infinitive("füge", "ich") is None


@pytest.mark.parametrize("seed", range(50))
def test_only_how_and_where_questions_change(seed: int) -> None:
    rng = random.Random(seed)
    vocab = ["wie", "wo", "füge", "ich", "man", "kann", "eine", "tabelle", "ein", "?", ".",
             "meine"]  # fmt: skip
    tokens = [rng.choice(vocab) for _ in range(rng.randint(0, 8))]
    out = REWRITE(tokens)
    if out != tokens:
        asks = tokens[0] in ("wie", "wo") and tokens[2] in ("ich", "man")
        assert asks or (tokens[0] in ("kann",) and tokens[1] in ("ich", "man"))
        assert out[-1] == "." and "ich" not in out[:2]
    else:
        assert REWRITE.rewrite(tokens) is None


def test_the_bundle_rewrites_questions_for_search_only(toy_bundle: ModelBundle) -> None:
    rw = toy_bundle.question_rewriter
    assert rw is not None
    decoder = toy_bundle.decoder()
    assert decoder.questions is rw
    assert query_sentences("Wie kann ich das Haus?", "de", 200, None, rw) == [("das", "haus", ".")]
    dq = decode_query(decoder, "Wie kann ich das Haus?", "de")
    assert dq.sentences == (("das", "haus", "."),)
    assert dq.forests[0].tokens == ("das", "haus", ".")
    # translation answers the question as asked
    (sentence,) = translate_text(toy_bundle, "Wie kann ich das Haus?")
    assert sentence.source == ("wie", "kann", "ich", "das", "haus", "?")
    # a tuning decoder rewrites nothing
    assert toy_bundle.make_decoder(decoder.weights).questions is None


def test_translation_retrieval_decodes_the_question_as_asked(toy_bundle: ModelBundle) -> None:
    decoder = toy_bundle.decoder()
    asked = decode_query(decoder, "Wie kann ich das Haus?", "de", search=False)
    assert asked.sentences == (("wie", "kann", "ich", "das", "haus", "?"),)


def test_search_reads_a_query_through_its_decoder(toy_bundle: ModelBundle) -> None:
    """``decoder_sentences`` is what search and serving read: the decoder's rewriter and
    splitter for search, the splitter alone for translation retrieval."""
    decoder = toy_bundle.decoder()
    text = "Wie kann ich das Hausauto? Das Haus ist rot."
    assert decoder_sentences(decoder, text, "de") == [
        ("das", "haus", "auto", "."),
        ("das", "haus", "ist", "rot", "."),
    ]
    assert decoder_sentences(decoder, text, "de", search=False) == [
        ("wie", "kann", "ich", "das", "haus", "auto", "?"),
        ("das", "haus", "ist", "rot", "."),
    ]

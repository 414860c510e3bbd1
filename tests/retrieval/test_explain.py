"""The explanation records: the JSON each one gives the API (the page's script reads these
shapes) and the terms each says matched."""

from __future__ import annotations

import json

from service.retrieval.explain import (
    BowFdExplanation,
    DtExplanation,
    FoundByTranslation,
    FoundTranslations,
    MatchedTerm,
    PsqExplanation,
    SentenceDerivation,
    TrExplanation,
    explanation_json,
)


def test_bowfd_json_and_terms() -> None:
    one = SentenceDerivation(0, "the house", (MatchedTerm("house", 2, 1.5),), -4.0, 3.0)
    two = SentenceDerivation(1, "is big", (MatchedTerm("big", 1, 0.5),), -2.0, 0.5, False)
    expl = BowFdExplanation((one, two))
    assert json.dumps(expl.to_json()) == json.dumps(
        {
            "sentences": [
                {
                    "translation": "the house",
                    "matched": [{"term": "house", "count": 2, "bm25": 1.5}],
                    "smt": -4.0,
                    "ir": 3.0,
                    "score": -1.0,
                    "sentence": 0,
                },
                {
                    "translation": "is big",
                    "matched": [{"term": "big", "count": 1, "bm25": 0.5}],
                    "smt": -2.0,
                    "ir": 0.5,
                    "score": -1.5,
                    "sentence": 1,
                    "in_sentence_list": False,
                },
            ]
        }
    )  # the same keys in the same order
    assert expl.matched_terms() == ["house", "big"]


def test_dt_psq_and_tr_json_and_terms() -> None:
    dt = DtExplanation("big house", ("big", "house"))
    assert dt.to_json() == {"translation": "big house", "matched": ["big", "house"]}
    assert dt.matched_terms() == ["big", "house"]
    psq = PsqExplanation(
        (
            FoundTranslations("haus", (("house", 0.7), ("home", 0.2))),
            FoundTranslations("groß", (("big", 0.9),)),
        )
    )
    assert json.dumps(psq.to_json()) == json.dumps(
        {"terms": {"haus": {"house": 0.7, "home": 0.2}, "groß": {"big": 0.9}}}
    )
    assert psq.matched_terms() == ["house", "home", "big"]
    tr = TrExplanation((FoundByTranslation(1, "the house", 0.75, 0.5, 1.0, 0.25),))
    assert json.dumps(tr.to_json()) == json.dumps(
        {
            "found_by": [
                {
                    "rank": 1,
                    "translation": "the house",
                    "pr_t": 0.75,
                    "cosine": 0.5,
                    "levenshtein": 1.0,
                    "pr_d_given_t": 0.25,
                }
            ]
        }
    )
    assert tr.matched_terms() == []
    assert explanation_json(None) is None
    assert explanation_json(dt) == dt.to_json()

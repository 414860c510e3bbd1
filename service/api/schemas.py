"""Request and response schemas of the REST API (they become the OpenAPI docs at ``/docs``).

Range limits that are fixed by the API (``k`` 1–1000, ``nbest``) are declared here and fail
with 422; limits that are settings (``max_query_chars`` → 413, ``max_k``, ``ranking_depth``)
are checked by the handlers, so that tests and deployments can change them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Method = Literal["bowfd", "dt", "psq"]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


class Timings(BaseModel):
    """Wall-clock milliseconds of one request's stages."""

    decode_ms: float = Field(description="Decoding into forests (0 when the cache had them).")
    rank_ms: float = Field(description="Ranking with the chosen method, snippets included.")
    total_ms: float


class Served(BaseModel):
    """Fields every decoded-query response carries."""

    signature: str = Field(description="Every parameter that changes the scores.")
    weights_version: str
    timings: Timings
    cached: bool = Field(description="The query's forests came from the cache.")
    degraded: bool = Field(description="Decoding was cut short by the time budget.")
    degraded_reason: str | None = Field(None, description="What was cut short, when degraded.")


# --- search ------------------------------------------------------------------------------------


class SearchRequest(BaseModel):
    """A German or Chinese query against the English document collection."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"query": "das haus ist groß", "lang": "de", "method": "bowfd", "k": 10}]
        },
    )

    query: str = Field(description="Query text; several sentences are decoded separately.")
    lang: str = Field(description="Source language: a loaded model's language (de, zh).")
    method: Method = Field("bowfd", description="bowfd (forced decoding), dt (1-best), psq.")
    k: int = Field(10, ge=1, le=1000, description="Results per page.")
    offset: int = Field(0, ge=0, description="Results to skip (pagination).")
    explain: bool = Field(False, description="Add how each document was retrieved.")

    _query_not_blank = field_validator("query")(_not_blank)


class SearchHit(BaseModel):
    id: str
    title: str
    score: float
    snippet: str = Field(
        description="A passage of the document; matched English terms in <mark>, rest escaped."
    )
    explanation: dict[str, Any] | None = Field(
        None, description="(explain) The derivation or terms that retrieved the document."
    )


class SearchResponse(Served):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "id": "d1",
                            "title": "Houses",
                            "score": -3.2,
                            "snippet": "the <mark>house</mark> is <mark>big</mark> .",
                            "explanation": None,
                        }
                    ],
                    "translation": "the house is big",
                    "signature": "method:bowfd|v:1.0|...",
                    "weights_version": "v0001",
                    "timings": {"decode_ms": 41.0, "rank_ms": 3.5, "total_ms": 45.1},
                    "cached": False,
                    "degraded": False,
                    "degraded_reason": None,
                }
            ]
        }
    )

    results: list[SearchHit]
    translation: str = Field(description="The query's 1-best translation.")


# --- translate ---------------------------------------------------------------------------------


class TranslateRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"text": "das haus ist groß", "lang": "de", "nbest": 3}]},
    )

    text: str = Field(description="Text to translate, split into sentences.")
    lang: str = Field(description="Source language: a loaded model's language (de, zh).")
    nbest: int = Field(1, ge=1, le=100, description="Translations per sentence.")

    _text_not_blank = field_validator("text")(_not_blank)


class ScoredTranslation(BaseModel):
    text: str
    score: float = Field(description="Model score w·Φ of the derivation (log domain).")


class SentenceTranslations(BaseModel):
    source: str = Field(description="The sentence as the decoder saw it (tokenised).")
    nbest: list[ScoredTranslation]


class TranslateResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "sentences": [
                        {
                            "source": "das haus ist groß",
                            "nbest": [{"text": "the house is big", "score": -4.1}],
                        }
                    ],
                    "weights_version": "v0001",
                    "timings": {"decode_ms": 40.2, "rank_ms": 0.0, "total_ms": 40.3},
                }
            ]
        }
    )

    sentences: list[SentenceTranslations]
    weights_version: str
    timings: Timings


# --- suggest -----------------------------------------------------------------------------------


class SuggestRequest(BaseModel):
    """A sentence to translate; the answer is similar English sentences of the pool."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"sentence": "das haus ist groß", "lang": "de", "nbest": 5, "k": 5}]
        },
    )

    sentence: str
    lang: str = Field(description="Source language: a loaded model's language (de, zh).")
    nbest: Literal[1, 5, 10] = Field(5, description="Translations used to search (002's N).")
    k: int = Field(10, ge=1, le=100, description="Reference sentences returned.")
    levenshtein: bool = Field(True, description="Weigh candidates by edit similarity (002).")

    _sentence_not_blank = field_validator("sentence")(_not_blank)


class FoundBy(BaseModel):
    rank: int = Field(description="Rank of the translation in the n-best list.")
    translation: str
    pr_t: float = Field(description="Pr(t|s), the translation's posterior.")
    cosine: float
    levenshtein: float
    pr_d_given_t: float


class Suggestion(BaseModel):
    id: str
    text: str
    score: float = Field(description="Σ_t Pr(t|s)·Pr(d|t) (002 Algorithm 1).")
    found_by: list[FoundBy]


class PoolTranslation(BaseModel):
    text: str
    pr_t: float


class SuggestResponse(Served):
    results: list[Suggestion]
    translations: list[PoolTranslation] = Field(description="The n-best used to search.")


# --- documents ---------------------------------------------------------------------------------


MAX_HIGHLIGHT_TERMS = 1000  # terms one document request may ask to highlight

Span = tuple[int, int]


class DocumentPublic(BaseModel):
    """A stored document; with ``terms``, the character spans of the words that match them."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "lo:text/swriter/guide/x.html",
                    "title": "Inserting a table",
                    "text": "To insert a table ...",
                    "source": "lohelp",
                    "highlights": [[3, 9], [12, 17]],
                    "title_highlights": [[12, 17]],
                }
            ]
        }
    )

    id: str
    title: str
    text: str = Field(description="The full text, one paragraph per line (\\n).")
    source: str
    highlights: list[Span] = Field(
        default_factory=list,
        description="(terms) [start, end) offsets in Unicode code points of the words of `text` "
        "that match one of the requested terms, as the search snippets mark them (a word "
        "matches when its NFKC lower-cased form is a term). Present only when terms were given.",
    )
    title_highlights: list[Span] = Field(
        default_factory=list,
        description="(terms) The same spans for `title`. Present only when terms were given.",
    )

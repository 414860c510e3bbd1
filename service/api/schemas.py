"""Request and response schemas of the REST API (they become the OpenAPI docs at ``/docs``).

One vocabulary across the endpoints: ``query`` is the input text of every request (search,
translate, suggest: each is decoded into the same cached forests), ``results`` the ranked
items of a response and ``id`` an item's id, which ``GET /v1/documents/{id}`` resolves. The
names an input text had before (``text`` in translate, ``sentence`` in suggest) are accepted
as deprecated aliases until version 0.2 (:class:`RequestBody`): the OpenAPI schema lists them
with ``deprecated: true``, and a body giving both names is 422.

Range limits that are fixed by the API (``k`` 1–1000, ``nbest``) are declared here and fail
with 422; limits that are settings (``max_query_chars`` → 413, ``max_k``, ``ranking_depth``)
are checked by the handlers, so that tests and deployments can change them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from service.retrieval.base import document_methods
from service.retrieval.choices import Alternative, Choices
from service.text.languages import normalize_language

if TYPE_CHECKING:
    Method = str
else:  # the scorers that rank documents, as the registry knows them
    Method = Literal[document_methods()]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


def _language(value: Any) -> Any:
    return normalize_language(value) if isinstance(value, str) else value


Language = Annotated[
    str,
    BeforeValidator(_language),
    Field(description="Source language: a loaded model's language (de, zh; any case, or a tag "
          "such as de-DE)."),
]  # fmt: skip


ALIASES_REMOVED_IN = "0.2"  # the version that stops accepting the deprecated input names


class RequestBody(BaseModel):
    """A request body: unknown fields are 422, and the renamed fields of ``renamed`` (old name
    → new name) accept their old name until :data:`ALIASES_REMOVED_IN` — declare them with
    :func:`renamed_field` — but never both names at once."""

    model_config = ConfigDict(extra="forbid")
    renamed: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _one_name_per_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in cls.renamed.items():
                if old in data and new in data:
                    raise ValueError(
                        f"`{old}` is the deprecated name of `{new}`: give `{new}`, not both"
                    )
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The schema of the new names, plus each old name as a deprecated property."""
        json_schema = handler(schema)
        target = handler.resolve_ref_schema(json_schema)
        props = target.get("properties", {})
        for old, new in cls.renamed.items():
            props[old] = {
                "type": props[new].get("type", "string"),
                "deprecated": True,
                "description": f"Deprecated alias of `{new}`, accepted until version "
                f"{ALIASES_REMOVED_IN}; give `{new}` instead (not both).",
            }
        return json_schema


def renamed_field(new: str, old: str, *, description: str) -> Any:
    """A field named ``new`` that also accepts its former name ``old`` (list it in the
    model's ``renamed``)."""
    return Field(
        validation_alias=AliasChoices(new, old),
        description=f"{description} (Formerly `{old}`, still accepted until version "
        f"{ALIASES_REMOVED_IN}.)",
    )


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
    degraded: bool = Field(
        description="Decoding was cut short by the time budget, or a shard of the collection "
        "did not answer (its documents are missing)."
    )
    degraded_reason: str | None = Field(None, description="What was cut short, when degraded.")


# --- search ------------------------------------------------------------------------------------


PINS = (
    'Source word → the English it must be translated as ({"Tabelle": "table"}): every '
    "translation read from the forest says it there (one of a response's `alternatives`, or "
    "any English the forest has for the word)."
)
BLOCKS = 'English words no translation may use (["sheet"]).'


class SearchRequest(RequestBody):
    """A German or Chinese query against the English document collection."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"query": "das haus ist groß", "lang": "de", "method": "bowfd", "k": 10}]
        },
    )

    query: str = Field(description="Query text; several sentences are decoded separately.")
    lang: Language
    method: Method = Field("bowfd", description="bowfd (forced decoding), dt (1-best), psq.")
    k: int = Field(10, ge=1, le=1000, description="Results per page.")
    offset: int = Field(0, ge=0, description="Results to skip (pagination).")
    explain: bool = Field(False, description="Add how each document was retrieved.")
    feedback: bool | None = Field(
        None,
        description="Expand the query with pseudo-relevance feedback (RM3): the method's top "
        "documents add English terms to the translation, and the expanded query ranks the "
        "documents by BM25. Unset: the service's default (CLIR_FEEDBACK).",
    )

    dense: bool | None = Field(
        None,
        description="Read the translation with the dense encoder too and fuse the two "
        "rankings (CLIR_DENSE_FUSION: normalised scores added, or reciprocal rank fusion). "
        "Unset: the service's default (CLIR_DENSE), when the index has vectors.",
    )
    pins: dict[str, str] = Field(default_factory=dict, description=PINS)
    blocks: list[str] = Field(default_factory=list, description=BLOCKS)

    _query_not_blank = field_validator("query")(_not_blank)


class ExpansionTerm(BaseModel):
    term: str
    weight: float = Field(description="The term's weight P'(w) in the expanded query.")


class Expansion(BaseModel):
    """The query the results were ranked with when feedback expanded it."""

    feedback: str = Field(description="RM3's parameters: rm3(documents,terms,original weight).")
    terms: list[ExpansionTerm] = Field(description="Every term of the expanded query.")
    added: list[str] = Field(description="The terms feedback added to the translation's.")


class TranslationOption(BaseModel):
    english: str
    p: float = Field(description="Its posterior when the word is translated on its own.")
    cue: str | None = Field(
        None, description="The title of a document that uses it (where its words weigh most)."
    )


class Alternatives(BaseModel):
    """A source word the query's translation forest translates in several ways."""

    source: str = Field(description="The word, as the decoder read it (lower case).")
    sentence: int = Field(description="Which sentence of the query (from 0).")
    span: list[int] = Field(description="Its position in the sentence: [start, end).")
    alone: float = Field(description="How often the forest translates it on its own.")
    options: list[TranslationOption] = Field(description="Its English options, likeliest first.")
    chosen: str | None = Field(None, description="The option the request pinned, if any.")

    @classmethod
    def listed(
        cls,
        offered: Sequence[Alternative],
        choices: Choices,
        cue: Callable[[str], str | None] | None = None,
    ) -> list[Alternatives]:
        """The offered alternatives, each option with its ``cue`` (the title of a document
        that uses it), the pinned one chosen."""
        pins = choices.chosen()
        cues: dict[str, str | None] = {}
        shown = []
        for a in offered:
            fields = a.to_json()
            for o in fields["options"]:
                if cue is not None and o["english"] not in cues:
                    cues[o["english"]] = cue(o["english"])
                o["cue"] = cues.get(o["english"])
            shown.append(cls(**fields, chosen=pins.get(a.source)))
        return shown


class SearchHit(BaseModel):
    id: str
    title: str
    origin: str = Field(
        "",
        description='The manual the document belongs to ("LibreOffice Calc help", "man '
        'page, section 1 (commands)"): what tells same-titled results apart.',
    )
    score: float
    snippet: str = Field(
        description="A passage of the document; matched English terms in <mark>, rest escaped."
    )
    explanation: dict[str, Any] | None = Field(
        None, description="(explain) The derivation or terms that retrieved the document."
    )
    readers: dict[str, int] = Field(
        default_factory=dict,
        description="The document's rank (from 1) in each reader's ranking that found it: "
        "`lexical` (the method's) and `dense` (the encoder reading the translation).",
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
                    "total": 37,
                    "total_relation": "eq",
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
    total: int = Field(
        description="How many documents the method retrieved for the query, i.e. would rank "
        "if `k` had no limit: for dt, the documents holding a word of the 1-best translation "
        "that has a non-zero BM25 weight (RSJ); for psq, the documents holding an English "
        "translation of a query word with a non-zero weight; for bowfd, the documents whose "
        "score beats the query's SMT Viterbi score (their best derivation earned BM25 weight). "
        "Exact when `total_relation` is `eq`; when it is `gte` it is a lower bound: BOW-FD "
        "scores only as deep as the page needs (`offset + k`), so a full page tells it only "
        "that at least that many were retrieved. Pages reach `offset + k` ≤ the service's "
        "ranking depth (CLIR_RANKING_DEPTH, default 1000) whatever the total."
    )
    total_relation: Literal["eq", "gte"] = Field(
        description="`eq`: `total` is the exact count; `gte`: `total` is a lower bound "
        "(as Elasticsearch's `hits.total.relation`)."
    )
    total_max: int | None = Field(
        None,
        description="When `total` is a lower bound (`gte`), an upper bound of it: the documents "
        "sharing a weighted English word with the query's translations (BOW-FD's candidates), "
        "so a page can say 'of up to N' rather than only 'of 10+'.",
    )
    translation: str = Field(description="The query's 1-best translation.")
    expansion: Expansion | None = Field(
        None, description="With feedback: the expanded query the results were ranked with."
    )
    dense: str = Field(
        "off",
        description="`on` when the dense reader's ranking was fused with the method's; "
        "otherwise why not (`off`: the request or the service turned it off; the index has no "
        "vectors).",
    )
    alternatives: list[Alternatives] = Field(
        default_factory=list,
        description="The query's words its translation forest translates in several ways, "
        "with the posteriors of their English options: pin one (`pins`) to search again.",
    )
    choices: dict[str, Any] = Field(
        default_factory=dict, description="The pins and blocks the results honour."
    )
    empty_reason: str | None = Field(
        None,
        description="Why there are no results, in words for the searcher: the translation "
        "holds only common words (a lone 'wie' is 'as': nothing to search for), or names the "
        "words of it no document holds.",
    )


# --- translate ---------------------------------------------------------------------------------


class TranslateRequest(RequestBody):
    """Text to translate into English, sentence by sentence."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"query": "das haus ist groß", "lang": "de", "nbest": 3}]},
    )
    renamed: ClassVar[dict[str, str]] = {"text": "query"}

    query: str = renamed_field(
        "query", "text", description="Text to translate, split into sentences."
    )
    lang: Language
    nbest: int = Field(1, ge=1, le=100, description="Translations per sentence.")
    pins: dict[str, str] = Field(default_factory=dict, description=PINS)
    blocks: list[str] = Field(default_factory=list, description=BLOCKS)

    _query_not_blank = field_validator("query")(_not_blank)


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
                    "timings": {"decode_ms": 40.2, "rank_ms": 0.4, "total_ms": 40.7},
                    "cached": False,
                    "degraded": False,
                    "degraded_reason": None,
                }
            ]
        }
    )

    sentences: list[SentenceTranslations]
    alternatives: list[Alternatives] = Field(
        default_factory=list,
        description="The text's words its forest translates in several ways (see search).",
    )
    weights_version: str
    timings: Timings = Field(description="rank_ms: reading the n-best lists off the forests.")
    cached: bool = Field(description="The text's forests came from the cache.")
    degraded: bool = Field(description="Decoding was cut short by the time budget.")
    degraded_reason: str | None = Field(None, description="What was cut short, when degraded.")


# --- suggest -----------------------------------------------------------------------------------


class SuggestRequest(RequestBody):
    """A sentence to translate; the answer is similar English sentences of the pool."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"query": "das haus ist groß", "lang": "de", "nbest": 5, "k": 5}]
        },
    )
    renamed: ClassVar[dict[str, str]] = {"sentence": "query"}

    query: str = renamed_field(
        "query", "sentence", description="The sentence to translate (one sentence)."
    )
    lang: Language
    nbest: Literal[1, 5, 10] = Field(
        5, description="Translations used to search (N of the TR paper)."
    )
    k: int = Field(10, ge=1, le=100, description="Reference sentences returned.")
    levenshtein: bool = Field(True, description="Weigh candidates by edit similarity (TR paper).")
    dense: bool | None = Field(
        None,
        description="Reread the first sentences with the dense encoder (the 1-best "
        "translation's meaning against each sentence's) and order them by score · cos^power. "
        "Unset: the service's default (CLIR_SUGGEST_DENSE).",
    )

    _query_not_blank = field_validator("query")(_not_blank)


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
    score: float = Field(
        description="Σ_t Pr(t|s)·Pr(d|t) (TR paper, Algorithm 1), times cos^power when the "
        "dense reader reread it."
    )
    dense: float | None = Field(
        None,
        description="The dense reader's cosine of the 1-best translation and the sentence "
        "(unset: not reread).",
    )
    found_by: list[FoundBy]
    page_id: str | None = Field(
        None, description="The document-index page the sentence is on, when the index holds it."
    )
    page_title: str | None = Field(None, description="That page's title.")


class PoolTranslation(BaseModel):
    text: str
    pr_t: float


class SuggestResponse(Served):
    results: list[Suggestion]
    translations: list[PoolTranslation] = Field(description="The n-best used to search.")
    dense: str = Field(
        "off",
        description="`on` when the dense reader reordered the first sentences; `off` when "
        "the request or the service turned it off.",
    )


# --- documents ---------------------------------------------------------------------------------


MAX_HIGHLIGHT_TERMS = 1000  # terms one document request may ask to highlight

Span = tuple[int, int]


class DocumentPublic(BaseModel):
    """A stored document, or a sentence of the pool (``source`` "pool", with its page's title
    and ``page_id`` when the document index holds the page); with ``terms``, the character
    spans of the words that match them."""

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
                },
                {
                    "id": "lop:text/swriter/guide/x.html#par_id3150",
                    "title": "Inserting a table",
                    "text": "Choose Table - Insert Table.",
                    "source": "pool",
                    "page_id": "lo:text/swriter/guide/x.html",
                },
            ]
        }
    )

    id: str
    title: str = Field(
        description="The document's title; for a pool sentence the title of its page when "
        "the document index holds that page, else empty."
    )
    text: str = Field(description="The full text, one paragraph per line (\\n).")
    source: str = Field(
        description="The collection the document comes from (`pool` for a sentence of the "
        "translators' sentence pool, as /v1/suggest returns them)."
    )
    page_id: str | None = Field(
        None,
        description="(pool sentences) The id of the page document the sentence comes from, "
        "when the document index holds it: GET /v1/documents/{page_id} shows the sentence in "
        "context. Present only for pool sentences of such a page.",
    )
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

"""``GET /v1/documents/{id}``: a stored document of the index (ids may hold ``:`` and ``/``).

With ``?terms=table&terms=insert`` the answer also has the character spans of the words of the
text and of the title that match those terms, by the one word matcher of the search snippets
(:func:`service.api.snippets.highlight_spans`), so that the web page's document view marks the
same words a result's snippet marks (the terms of the derivation that retrieved the document,
Hieber & Riezler 2015, §3). Without ``terms`` the answer is what it always was.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import DocIndexDep
from service.api.schemas import MAX_HIGHLIGHT_TERMS, DocumentPublic
from service.api.snippets import fold, highlight_spans
from service.errors import InvalidInputError

router = APIRouter(prefix="/v1", tags=["documents"])

TermsQuery = Annotated[
    list[str] | None,
    Query(
        description="English terms to highlight (repeat the parameter for several; compared "
        "case-insensitively, after NFKC). Adds `highlights` and `title_highlights` to the "
        f"answer. At most {MAX_HIGHLIGHT_TERMS}.",
        examples=[["table", "insert"]],
    ),
]


@router.get(
    "/documents/{doc_id:path}",
    response_model=DocumentPublic,
    response_model_exclude_unset=True,  # no highlight fields unless terms were asked for
)
def get_document(doc_id: str, index: DocIndexDep, terms: TermsQuery = None) -> DocumentPublic:
    """One document of the collection by its id (404 if the index has no such id)."""
    if terms is not None and len(terms) > MAX_HIGHLIGHT_TERMS:
        raise InvalidInputError(
            f"{len(terms)} terms to highlight: at most {MAX_HIGHLIGHT_TERMS} are allowed"
        )
    doc = index.doc(doc_id)
    spans: dict[str, list[tuple[int, int]]] = {}
    if terms is not None:
        folded = {fold(t) for t in terms}
        spans["highlights"] = highlight_spans(doc.text, folded)
        spans["title_highlights"] = highlight_spans(doc.title, folded)
    return DocumentPublic(id=doc.id, title=doc.title, text=doc.text, source=doc.source, **spans)

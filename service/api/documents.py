"""``GET /v1/documents/{id}``: a stored document of the index (ids may hold ``:`` and ``/``).

With ``?terms=table&terms=insert`` the answer also has the character spans of the words of the
text and of the title that match those terms, by the one word matcher of the search snippets
(:func:`service.api.snippets.highlight_spans`), so that the web page's document view marks the
same words a result's snippet marks (the terms of the derivation that retrieved the document,
Hieber & Riezler 2015, §3). Without ``terms`` the answer is what it always was.

Every id the API returns resolves here, the ids of ``POST /v1/suggest`` too: an id that is not
in the document index is looked up in the sentence pool, and the answer is that sentence
(``source`` "pool"), the resource the id names. What a translator who opens a reference
sentence wants next is where it comes from, so the answer also names its page: a pool id
``lop:<path>#<par_id>`` is a paragraph of the LibreOffice help page ``lo:<path>`` (the data's
id scheme; ``<doc id>#<fragment>`` of a document in general), and when the document index holds
that page the sentence carries its ``title`` and ``page_id``, itself resolvable here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import ResourcesDep, get_doc_index
from service.api.resources import Resources
from service.api.schemas import MAX_HIGHLIGHT_TERMS, DocumentPublic
from service.api.snippets import fold, highlight_spans
from service.collection.docstore import Store
from service.errors import InvalidInputError, NotFoundError
from service.records import Doc

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


POOL_SOURCE = "pool"  # the `source` of a pool sentence

# pool id prefix -> the prefix of its page's id (lop:<path>#<par_id> is on the page lo:<path>)
POOL_PAGE_PREFIXES = {"lop:": "lo:"}


def page_ids(sentence_id: str) -> list[str]:
    """The ids the page of a pool sentence may have: ``<page>#<fragment>`` is on ``<page>``,
    or on the page its prefix maps to (:data:`POOL_PAGE_PREFIXES`); none without ``#``."""
    base, sep, _ = sentence_id.partition("#")
    if not sep or not base:
        return []
    out = [base]
    for pool_prefix, page_prefix in POOL_PAGE_PREFIXES.items():
        if base.startswith(pool_prefix):
            out.append(page_prefix + base.removeprefix(pool_prefix))
    return out


def _find(index: Store | None, doc_id: str) -> Doc | None:
    if index is None:
        return None
    try:
        return index.doc(doc_id)
    except NotFoundError:
        return None


def find_page(docs: Store | None, sentence_id: str) -> Doc | None:
    """The document-index page a pool sentence is on (:func:`page_ids`), if it holds it."""
    for page_id in page_ids(sentence_id):
        page = _find(docs, page_id)
        if page is not None:
            return page
    return None


def find_document(resources: Resources, doc_id: str) -> DocumentPublic:
    """The document ``doc_id`` of the document index, else the pool sentence of that id
    (with its page's title and id when the document index holds the page). Each store is
    read at its current commit or build (a commit, a rebuild since the last request)."""
    docs, pool = resources.doc_index, resources.pool_index
    for store in (docs, pool):
        if store is not None:
            store.refresh()
    doc = _find(docs, doc_id)
    if doc is not None:
        return DocumentPublic(id=doc.id, title=doc.title, text=doc.text, source=doc.source)
    sentence = _find(pool, doc_id)
    if sentence is not None:
        page = find_page(docs, doc_id)
        if page is not None:
            return DocumentPublic(
                id=sentence.id, title=page.title, text=sentence.text, source=POOL_SOURCE,
                page_id=page.id,
            )  # fmt: skip
        return DocumentPublic(id=sentence.id, title="", text=sentence.text, source=POOL_SOURCE)
    index = get_doc_index(resources)  # none loaded: 503, the id may be in the missing index
    where = f"the index {index.path}"
    if pool is not None:
        where += f" or the sentence pool {pool.path}"
    raise NotFoundError(f"no document {doc_id!r} in {where}")


@router.get(
    "/documents/{doc_id:path}",
    response_model=DocumentPublic,
    response_model_exclude_unset=True,  # no highlight fields unless terms were asked for
)
def get_document(doc_id: str, resources: ResourcesDep, terms: TermsQuery = None) -> DocumentPublic:
    """One document of the collection, or a sentence of the pool, by its id (404 if neither
    has it)."""
    if terms is not None and len(terms) > MAX_HIGHLIGHT_TERMS:
        raise InvalidInputError(
            f"{len(terms)} terms to highlight: at most {MAX_HIGHLIGHT_TERMS} are allowed"
        )
    doc = find_document(resources, doc_id)
    if terms is not None:
        folded = {fold(t) for t in terms}
        doc.highlights = highlight_spans(doc.text, folded)
        doc.title_highlights = highlight_spans(doc.title, folded)
    return doc

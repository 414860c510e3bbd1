"""``GET /v1/documents/{id}``: a stored document of the index (ids may hold ``:`` and ``/``)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import DocIndexDep
from service.api.schemas import DocumentPublic

router = APIRouter(prefix="/v1", tags=["documents"])


@router.get("/documents/{doc_id:path}", response_model=DocumentPublic)
def get_document(doc_id: str, index: DocIndexDep) -> DocumentPublic:
    """One document of the collection by its id (404 if the index has no such id)."""
    doc = index.doc(doc_id)
    return DocumentPublic(id=doc.id, title=doc.title, text=doc.text, source=doc.source)

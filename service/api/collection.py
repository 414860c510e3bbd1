"""The admin API of a live collection: ``POST /v1/admin/documents`` adds (or replaces)
documents, ``DELETE /v1/admin/documents`` deletes them, ``GET /v1/admin/collection`` says
what the collection holds.

Each request is one commit (:class:`service.collection.writer.CollectionWriter`): its
documents are written as new segments and tombstones, the global statistics are updated, and
the manifest is replaced — visible to the next search, which refreshes its snapshot when the
manifest changed (one ``stat`` per search). A request that fails (a bad document, a full disk)
changes nothing; a document over ``CLIR_MAX_DOC_BYTES`` fails the whole request with 413 before
anything is written, and the body as a whole is bounded by ``CLIR_MAX_DOCUMENTS_BODY_BYTES``.
Merging the segments a commit left runs after the response, in the background (its own
commit). One writer holds the collection at a time, across processes: a request that cannot get
it within ``CLIR_COLLECTION_LOCK_TIMEOUT_S`` gets 409. The document index must be a collection
(``clir build-index --shards S``); one index built whole gives 409.
Every route needs the admin token (see :mod:`service.api.admin`).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Query
from pydantic import BaseModel, Field

from service.api.admin import require_admin
from service.api.deps import ResourcesDep, SettingsDep, get_doc_index
from service.api.resources import Resources
from service.collection import Collection, CollectionWriter
from service.collection.docstore import writable
from service.core.settings import Settings
from service.data import doc_size_problem
from service.errors import ClirError, InputTooLargeError
from service.records import Doc

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])

MAX_DOCUMENTS = 10_000  # per request; clir docs add streams any number


class DocumentIn(BaseModel):
    """A document to add: an id already in the collection is replaced."""

    id: str = Field(min_length=1, max_length=2048, pattern=r"\S")
    title: str = Field("", max_length=10_000)
    text: str  # its size is bounded by CLIR_MAX_DOC_BYTES (413 naming it), not the schema
    source: str = Field("", max_length=200)


class DocumentsAddRequest(BaseModel):
    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS)


class CollectionChange(BaseModel):
    """What a commit changed, and the collection after it."""

    generation: int
    added: int
    replaced: int
    deleted: int
    not_found: list[str] = Field(default_factory=list)
    n_docs: int
    segments: int
    seconds: float
    visible: str = "to the next search"


class CollectionPublic(BaseModel):
    path: str
    generation: int
    n_docs: int
    shards: int
    segments: list[int]  # per shard
    deleted: int  # tombstones not yet merged away


def _collection(resources: Resources) -> Collection:
    return writable(get_doc_index(resources))


def _writer(coll: Collection, settings: Settings) -> CollectionWriter:
    return CollectionWriter(
        coll.path,
        buffer_mb=settings.segment_buffer_mb,
        lock_timeout=settings.collection_lock_timeout_s,
    )


def _merge(coll: Collection, settings: Settings) -> None:
    """Merge after a commit (in the background; a busy collection is merged next time)."""
    try:
        with _writer(coll, settings) as writer:
            merged = writer.merge(max_segments=settings.collection_max_segments)
        if merged:
            coll.refresh()
            log.info("merged segments of %s into %s", coll.path, merged)
    except ClirError as exc:
        log.warning("merge of %s skipped: %s", coll.path, exc)


def check_sizes(documents: list[DocumentIn], max_doc_bytes: int) -> None:
    """413 before anything is written when a document is over ``max_doc_bytes``: the request
    is refused whole, naming the first such document (its position and id) and the limit."""
    for i, d in enumerate(documents):
        problem = doc_size_problem(d.id, d.title, d.text, max_doc_bytes)
        if problem is not None:
            raise InputTooLargeError(f"documents[{i}]: {problem}; nothing was added")


def _change(coll: Collection, summary_fields: dict[str, object]) -> CollectionChange:
    coll.refresh()
    return CollectionChange.model_validate(summary_fields)


@router.post("/documents", response_model=CollectionChange)
def add_documents(
    body: DocumentsAddRequest,
    resources: ResourcesDep,
    settings: SettingsDep,
    background: BackgroundTasks,
) -> CollectionChange:
    """Add or replace documents in one commit (visible to the next search)."""
    coll = _collection(resources)
    check_sizes(body.documents, settings.max_doc_bytes)
    docs = [Doc(d.id, d.title, d.text, d.source) for d in body.documents]
    with _writer(coll, settings) as writer:
        writer.add(docs)
        s = writer.commit()
    background.add_task(_merge, coll, settings)
    return _change(coll, {**s.__dict__, "segments": s.segments})


@router.delete("/documents", response_model=CollectionChange)
def delete_documents(
    resources: ResourcesDep,
    settings: SettingsDep,
    background: BackgroundTasks,
    ids: Annotated[list[str], Query(alias="id", min_length=1, max_length=MAX_DOCUMENTS)],
) -> CollectionChange:
    """Delete documents by id (``?id=a&id=b``) in one commit; unknown ids are listed."""
    coll = _collection(resources)
    with _writer(coll, settings) as writer:
        missing = writer.delete(ids)
        s = writer.commit()
    background.add_task(_merge, coll, settings)
    return _change(coll, {**s.__dict__, "not_found": missing})


@router.get("/collection", response_model=CollectionPublic)
def collection_status(resources: ResourcesDep) -> CollectionPublic:
    """The collection's current commit: documents, shards, segments."""
    coll = _collection(resources)
    coll.refresh()
    snap = coll.snapshot
    return CollectionPublic(
        path=str(coll.path),
        generation=snap.generation,
        n_docs=snap.n_docs,
        shards=snap.commit.shards,
        segments=[len(s) for s in snap.shards],
        deleted=sum(e.n_deleted for e in snap.commit.segments),
    )

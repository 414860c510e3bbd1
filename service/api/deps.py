"""Dependencies of the routers: settings, loaded resources and the query service, all read
from ``app.state`` (loaded once by the lifespan)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.api.resources import Resources
from service.api.serving import QueryService
from service.collection.docstore import Store
from service.core.settings import Settings
from service.errors import NotReadyError

DocumentIndex = Store  # the documents: one index, or a live collection


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_resources(request: Request) -> Resources:
    resources: Resources | None = getattr(request.app.state, "resources", None)
    if resources is None:
        raise NotReadyError("the service is still loading its models and indexes; retry shortly")
    return resources


def get_service(request: Request) -> QueryService:
    service: QueryService = request.app.state.service
    return service


def get_doc_index(resources: Annotated[Resources, Depends(get_resources)]) -> DocumentIndex:
    if resources.doc_index is None:
        raise NotReadyError("no document index is loaded (see /readyz for what is missing)")
    return resources.doc_index


def get_pool_index(resources: Annotated[Resources, Depends(get_resources)]) -> DocumentIndex:
    if resources.pool_index is None:
        raise NotReadyError(
            "no sentence-pool index is loaded, so there is nothing to suggest from "
            "(build one with clir build-index --pool FILE --out DIR; see /readyz)"
        )
    return resources.pool_index


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
ResourcesDep = Annotated[Resources, Depends(get_resources)]
ServiceDep = Annotated[QueryService, Depends(get_service)]
DocIndexDep = Annotated[DocumentIndex, Depends(get_doc_index)]
PoolIndexDep = Annotated[DocumentIndex, Depends(get_pool_index)]

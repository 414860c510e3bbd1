"""The admin API under ``/v1/admin``: submit a retraining job, follow and
cancel jobs, list the loaded models' weights versions and activate one.

Every route needs ``Authorization: Bearer <CLIR_ADMIN_TOKEN>``, compared in constant time
(``hmac.compare_digest``): missing → 401 with ``WWW-Authenticate: Bearer``, wrong → 403, no
token configured → 503 (the admin API is disabled). The token is never logged or echoed.

Jobs live in the SQLite job store (:mod:`service.jobs.store`, opened on first use and kept on
``app.state``); the worker (embedded or ``clir worker``) runs them. Activation
(:func:`service.retrieval.versions.activate_version`) validates the version file (JSON, finite
weights, known feature names: else 422) and that the service can score with it (a probe query
decoded with it and ranked by every document method: else 409) before it rewrites the
bundle's active pointer atomically, in the weights state directory (the bundle itself is
read-only); the query service reads the active version on every request and keys its decoders
and cached forests by version, so the swap needs no restart and requests in flight finish with
the version they started with. A refused file leaves the old version serving.

The request body of ``POST /train`` is :class:`service.ltr.task.LtrParams`; the web's path
policy (:func:`job_params`) keeps data files under ``settings.data_dir`` (a relative path is
taken relative to it) and the model and index among the configured ones, so a request cannot
make the worker read files elsewhere.
"""

from __future__ import annotations

import hmac
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import ResourcesDep, SettingsDep
from service.api.serving import language_bundle
from service.collection.docstore import probe_index
from service.core.settings import Settings
from service.errors import ClirError, InvalidInputError, NotFoundError, NotReadyError
from service.jobs.store import JOB_STATES, MAX_LIMIT, Job, JobState, JobStore
from service.jobs.tasks import ltr_setup
from service.ltr.task import LtrParams
from service.mt.bundle import ModelBundle
from service.retrieval.versions import NotOfferedError, activate_version, active_version_or_none

log = logging.getLogger(__name__)

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="The admin token (CLIR_ADMIN_TOKEN) as a bearer token.",
)


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """401 without a bearer token, 403 with a wrong one, 503 when no token is configured."""
    if settings.admin_token is None:
        raise HTTPException(503, "admin API disabled: set CLIR_ADMIN_TOKEN")
    if credentials is None:
        raise HTTPException(
            401,
            "admin token required: send Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    given = credentials.credentials.encode("utf-8", "surrogatepass")
    expected = settings.admin_token.get_secret_value().encode("utf-8")
    if not hmac.compare_digest(given, expected):
        raise HTTPException(403, "the admin token is not valid")


router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])

# --- the job store --------------------------------------------------------------------------------

_store_lock = threading.Lock()


def get_job_store(request: Request) -> JobStore:
    """The app's job store, opened on first use (503 naming the problem if it cannot be)."""
    store: JobStore | None = getattr(request.app.state, "job_store", None)
    if store is not None:
        return store
    with _store_lock:
        store = getattr(request.app.state, "job_store", None)
        if store is None:
            path = request.app.state.settings.job_store
            try:
                store = JobStore(path)
            except ClirError as exc:
                raise NotReadyError(f"the job store is unavailable: {exc}") from exc
            request.app.state.job_store = store
        return store


JobStoreDep = Annotated[JobStore, Depends(get_job_store)]


def job_gauges(app: FastAPI) -> str:
    """``clir_jobs{state=...}`` in the Prometheus text format (zeros before any job exists)."""
    counts: dict[str, int] = dict.fromkeys(JOB_STATES, 0)
    store: JobStore | None = getattr(app.state, "job_store", None)
    path = app.state.settings.job_store
    try:
        if store is None and path.exists():
            store = JobStore(path)
            app.state.job_store = store
        if store is not None:
            counts = store.counts()
    except ClirError as exc:
        log.warning("job gauges unavailable: %s", exc)
        return ""
    lines = ["# HELP clir_jobs Background jobs by state.", "# TYPE clir_jobs gauge"]
    lines += [f'clir_jobs{{state="{state}"}} {n}' for state, n in counts.items()]
    return "\n".join(lines) + "\n"


# --- schemas -------------------------------------------------------------------------------------


def _iso(t: float | None) -> datetime | None:
    return None if t is None else datetime.fromtimestamp(t, UTC)


class EpochPublic(BaseModel):
    epoch: int
    metrics: dict[str, float]
    recorded_at: datetime


class JobPublic(BaseModel):
    """A background job as the admin API shows it."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "3f2c9d0a4b6e4f1d8a7c5e2b1d0f9a8c",
                    "kind": "ltr",
                    "model": "models/de-en",
                    "state": "running",
                    "progress": 0.4,
                    "message": "epoch 2/5",
                    "error": None,
                    "result": None,
                    "weights_version": None,
                    "cancel_requested": False,
                    "params": {"lang": "de", "objective": "listmle-te", "epochs": 5},
                    "epochs": [
                        {
                            "epoch": 1,
                            "metrics": {"map": 0.31},
                            "recorded_at": "2025-01-01T10:01:00Z",
                        }
                    ],
                    "created_at": "2025-01-01T10:00:00Z",
                    "started_at": "2025-01-01T10:00:01Z",
                    "finished_at": None,
                }
            ]
        }
    )

    id: str
    kind: str
    model: str | None = Field(description="The model bundle the job trains (one job at a time).")
    state: JobState
    progress: float = Field(ge=0, le=1)
    message: str
    error: str | None = Field(description="Why the job failed (no traceback).")
    result: dict[str, Any] | None
    weights_version: str | None = Field(description="The weights version the job wrote.")
    cancel_requested: bool
    params: dict[str, Any]
    epochs: list[EpochPublic] = Field(description="Metrics recorded after each epoch.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> JobPublic:
        return cls(
            id=job.id,
            kind=job.kind,
            model=job.model,
            state=job.state,
            progress=job.progress,
            message=job.message,
            error=job.error,
            result=job.result,
            weights_version=job.weights_version,
            cancel_requested=job.cancel_requested,
            params=job.params,
            epochs=[
                EpochPublic(epoch=e.epoch, metrics=e.metrics, recorded_at=_iso(e.recorded_at))
                for e in job.epochs
            ],
            created_at=_iso(job.created_at),
            started_at=_iso(job.started_at),
            finished_at=_iso(job.finished_at),
        )


class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int


class SelftestRequest(BaseModel):
    """A diagnostic job: ``steps`` steps of ``seconds`` each (checks that a worker runs)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"steps": 3, "seconds": 0.1}]}
    )

    steps: int = Field(3, ge=1, le=100)
    seconds: float = Field(0.1, ge=0, le=10)
    lang: str | None = Field(
        None,
        max_length=20,
        description="Also write a copy of this language model's active weights as a new "
        "(inactive) version, like a training job; one such job per model at a time.",
    )


class VersionPublic(BaseModel):
    version: str
    active: bool
    origin: Literal["bundle", "state"] = Field(
        "state",
        description="bundle: shipped with the (read-only) model bundle; state: written since, "
        "in the weights state directory (CLIR_WEIGHTS_STATE_DIR).",
    )
    source: str = ""
    created: str = ""
    parent: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    error: str | None = Field(None, description="Why the version file cannot be used.")


class ModelPublic(BaseModel):
    """A loaded model bundle and its weights versions."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "de-en",
                    "lang": "de",
                    "active_version": "v20250101-100000-000000",
                    "versions": [
                        {
                            "version": "v20250101-100000-000000",
                            "active": True,
                            "origin": "state",
                            "source": "ltr hinge",
                            "created": "2025-01-01T10:00:00+00:00",
                            "parent": "default",
                            "metrics": {"map": 0.33},
                            "error": None,
                        }
                    ],
                }
            ]
        }
    )

    name: str
    lang: str
    active_version: str | None
    versions: list[VersionPublic]


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
    count: int


class ActivatedPublic(BaseModel):
    """The outcome of an activation."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "de-en",
                    "lang": "de",
                    "version": "v20250101-100000-000000",
                    "previous": "default",
                    "metrics": {"map": 0.33},
                }
            ]
        }
    )

    model: str
    lang: str
    version: str
    previous: str | None
    metrics: dict[str, float]


# --- jobs ----------------------------------------------------------------------------------------


DATA_FILES = ("queries", "qrels", "dev_queries", "dev_qrels", "groups")


def job_params(body: LtrParams, settings: Settings) -> LtrParams:
    """A job's parameters as a client over HTTP may give them, resolved: a data file lies
    under ``settings.data_dir`` (a relative path is taken relative to it), the model and the
    index are among the configured ones."""
    root = settings.data_dir.resolve()
    update: dict[str, Path] = {}
    for name in DATA_FILES:
        given: Path | None = getattr(body, name)
        if given is None:
            continue
        path = (root / given if not given.is_absolute() else given).resolve()
        if not path.is_relative_to(root):
            raise InvalidInputError(f"{name} must be a file under the data directory {root}")
        update[name] = path
    for name, setting in (("model", "model_bundles"), ("index", "doc_indexes")):
        chosen: Path | None = getattr(body, name)
        options: list[Path] = getattr(settings, setting)
        if chosen is not None and chosen.resolve() not in {p.resolve() for p in options}:
            raise InvalidInputError(
                f"{name} {str(chosen)[:200]!r} is not one of the configured {setting}"
            )
    return body.model_copy(update=update).resolved(ltr_setup(settings))


@router.post("/train", status_code=202, response_model=JobPublic)
def train(body: LtrParams, settings: SettingsDep, store: JobStoreDep) -> JobPublic:
    """Queue a learning-to-rank job for a model (409 while that model has one queued/running)."""
    params = job_params(body, settings)
    job = store.submit("ltr", params.model_dump(mode="json"), model=str(params.model))
    log.info("queued ltr job %s for %s", job.id, job.model)
    return JobPublic.of(job)


@router.post("/selftest", status_code=202, response_model=JobPublic)
def selftest(body: SelftestRequest, store: JobStoreDep, resources: ResourcesDep) -> JobPublic:
    """Queue a diagnostic job that sleeps, reports progress and may write a weights version."""
    params: dict[str, Any] = {"steps": body.steps, "seconds": body.seconds}
    model = None
    if body.lang is not None:
        model = str(_pick_bundle(resources.models, body.lang, None).path)
        params["model"] = model
    return JobPublic.of(store.submit("selftest", params, model=model))


@router.get("/jobs", response_model=JobsPublic)
def list_jobs(
    store: JobStoreDep,
    state: Annotated[JobState | None, Query(description="Only jobs in this state.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
) -> JobsPublic:
    """Jobs, newest first."""
    jobs = store.list(state=state, limit=limit)
    return JobsPublic(data=[JobPublic.of(j) for j in jobs], count=len(jobs))


@router.get("/jobs/{job_id}", response_model=JobPublic)
def get_job(job_id: str, store: JobStoreDep) -> JobPublic:
    """One job: state, progress, per-epoch metrics, error and result."""
    return JobPublic.of(store.get(job_id))


@router.delete(
    "/jobs/{job_id}",
    response_model=JobPublic,
    responses={202: {"description": "Cancellation requested; the running job stops soon."}},
)
def cancel_job(job_id: str, store: JobStoreDep, response: Response) -> JobPublic:
    """Cancel a job: a queued one at once (200), a running one after its current step (202)."""
    job = store.request_cancel(job_id)
    response.status_code = 200 if job.finished else 202
    return JobPublic.of(job)


# --- models --------------------------------------------------------------------------------------


def _version_public(bundle: ModelBundle, version: str, active: str | None) -> VersionPublic:
    origin = bundle.weights_store.origin(version)
    try:
        record = bundle.weights_store.load(version)
    except ClirError as exc:
        return VersionPublic(
            version=version, active=version == active, origin=origin, error=str(exc)
        )
    return VersionPublic(
        version=version,
        active=version == active,
        origin=origin,
        source=record.source,
        created=record.created,
        parent=record.parent,
        metrics=record.metrics,
    )


@router.get("/models", response_model=ModelsPublic)
def list_models(resources: ResourcesDep) -> ModelsPublic:
    """The loaded model bundles with their weights versions and which one is active."""
    data = []
    for lang, bundle in sorted(resources.models.items()):
        active = active_version_or_none(bundle)
        versions = [_version_public(bundle, v, active) for v in bundle.weights_store.versions()]
        data.append(
            ModelPublic(name=bundle.name, lang=lang, active_version=active, versions=versions)
        )
    return ModelsPublic(data=data, count=len(data))


def _pick_bundle(
    models: dict[str, ModelBundle], lang: str | None, model: str | None
) -> ModelBundle:
    loaded = ", ".join(f"{b.name} ({lang})" for lang, b in sorted(models.items())) or "none"
    if lang is not None:
        bundle = language_bundle(models, lang)  # 422 naming the loaded ones, as a search
        if model is not None and model not in (bundle.name, str(bundle.path)):
            raise InvalidInputError(f"model {model[:80]!r} is not the {lang} model ({loaded})")
        return bundle
    if model is not None:
        for bundle in models.values():
            if model in (bundle.name, str(bundle.path)):
                return bundle
        raise NotFoundError(f"no loaded model is named {model[:80]!r}; loaded: {loaded}")
    if len(models) == 1:
        return next(iter(models.values()))
    raise InvalidInputError(f"say which model with ?lang= or ?model=; loaded: {loaded}")


@router.post("/models/{version}/activate", response_model=ActivatedPublic)
def activate(
    version: str,
    resources: ResourcesDep,
    lang: Annotated[str | None, Query(max_length=20, description="The model's language.")] = None,
    model: Annotated[
        str | None, Query(max_length=300, description="The model's name or path.")
    ] = None,
    force: Annotated[
        bool,
        Query(description="Activate a learned version that did not gain on its held-out queries."),
    ] = False,
) -> ActivatedPublic:
    """Make a weights version the one the service uses (no restart; validated first: 422 for a
    malformed file, 409 for one the service cannot score with or, without ``force``, for a
    learned version that was not offered for activation)."""
    bundle = _pick_bundle(resources.models, lang, model)
    try:
        done = activate_version(bundle, version, probe_index(resources.doc_index), force=force)
    except NotOfferedError as exc:
        raise NotOfferedError(
            f"{exc} (to activate it anyway, add force=true to the query: "
            f"POST /v1/admin/models/{version}/activate?force=true)"
        ) from exc
    log.info("activated weights %s of %s (was %s)", version, bundle.name, done.previous)
    return ActivatedPublic(
        model=bundle.name,
        lang=bundle.src,
        version=version,
        previous=done.previous,
        metrics=done.record.metrics,
    )

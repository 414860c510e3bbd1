"""Warm-up before readiness: no request pays for compilation or first-touch loading.

The decoder's kernel, the LM table, the retrieval kernels (BOW-FD, Viterbi, k-best, the
index's scoring) are compiled or loaded from numba's on-disk cache the first time they run, and
the memory-mapped model files are paged in on first touch. The app's lifespan calls
:func:`warm_up` after loading its resources and before it accepts requests: one search with
every method, one translation and one suggestion per loaded language, through the same
functions the endpoints call, with and without the language model. The query cache is emptied
afterwards so that the warm-up leaves no trace a user could see.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

from service.api.resources import Resources
from service.api.schemas import SearchRequest, SuggestRequest, TranslateRequest
from service.api.serving import QueryService
from service.api.telemetry import UncountedMetrics
from service.collection.docstore import Store
from service.core.settings import Settings
from service.errors import ClirError
from service.mt.bundle import ModelBundle
from service.retrieval.base import document_methods

log = logging.getLogger(__name__)

# a short query per language: a word the demo and the full models know
WARM_UP_TEXT = {"de": "Tabelle sortieren", "zh": "排序表格"}
# how long readiness waits for Ray shard workers to start (each loads the model bundle)
RAY_WORKERS_START_S = 300.0


def warm_up(service: QueryService, resources: Resources, settings: Settings) -> dict[str, float]:
    """Run every request path once per loaded language; seconds per part, by name."""
    seconds: dict[str, float] = {}
    counted, service.metrics = service.metrics, UncountedMetrics()  # the warm-up is not traffic
    try:
        _run(service, resources, settings, seconds)
    finally:
        service.metrics = counted
        service.cache.clear()
    log.info(
        "warm-up done in %.1f s (%s)",
        sum(seconds.values()),
        ", ".join(f"{k} {v:.2f}s" for k, v in seconds.items()),
    )
    return seconds


def _run(
    service: QueryService, resources: Resources, settings: Settings, seconds: dict[str, float]
) -> None:
    from service.api.search import run_search
    from service.api.suggest import run_suggest
    from service.api.translate import run_translate

    for kind, store in (("docs", resources.doc_index), ("pool", resources.pool_index)):
        if store is not None:
            t0 = time.perf_counter()
            _document_ids(store)
            seconds[f"ids-{kind}"] = time.perf_counter() - t0
    for lang, bundle in sorted(resources.models.items()):
        text = WARM_UP_TEXT.get(lang, "test")
        parts: dict[str, Callable[[], object]] = {
            "decode": partial(_decode, service, bundle),
            "translate": partial(
                run_translate, TranslateRequest(query=text, lang=lang, nbest=5), service, bundle
            ),
        }
        if settings.search_backend == "ray" and resources.doc_index is not None:
            parts["ray-workers"] = partial(_start_ray_workers, service, resources.doc_index, bundle)
        if resources.doc_index is not None:
            for method in document_methods():
                req = SearchRequest(query=text, lang=lang, method=method, k=10, explain=True)
                parts[f"search-{method}"] = partial(
                    run_search, req, service, bundle, resources.doc_index, settings
                )
            # feedback: an index's term vectors, a collection's per segment, built once
            req = SearchRequest(query=text, lang=lang, method="dt", explain=True, feedback=True)
            parts["search-feedback"] = partial(
                run_search, req, service, bundle, resources.doc_index, settings
            )
        if resources.pool_index is not None:
            req_s = SuggestRequest(query=text, lang=lang)
            parts["suggest"] = partial(run_suggest, req_s, service, bundle, resources.pool_index)
        for name, run in parts.items():
            t0 = time.perf_counter()
            try:
                run()
            except ClirError as exc:  # a broken part is reported by its requests, not here
                log.warning("warm-up %s/%s failed: %s", lang, name, exc)
            seconds[f"{lang}/{name}"] = time.perf_counter() - t0


def _document_ids(store: Store) -> None:
    """Each segment's table of documents by id, made now: a collection's is stored, an index
    built whole reads its ids into a dictionary once (about half a second for the 450,000
    sentences of the pool), which the first document asked for by id would otherwise wait
    for."""
    for view in store.snapshot.views():
        view.segment.find("")  # builds the table the lookup reads; no document has id ""


def _start_ray_workers(service: QueryService, store: Store, bundle: ModelBundle) -> None:
    """Start a collection's shard workers and wait until they answer (or the start timeout),
    so that the first searches are not degraded by workers still loading."""
    down = service.searchers.start_shard_workers(store, bundle, RAY_WORKERS_START_S)
    if down:
        log.warning("shard workers not up after warm-up: %s", down)


def _decode(service: QueryService, bundle: ModelBundle) -> None:
    for use_lm in (True, False):
        service.decoder(bundle, use_lm).forest(("warm", "up"))

"""Serving behaviour shared by the query endpoints: the decoded-query cache, the per-request
time budget, scorer reuse and the concurrency limit.

* **Cache.** A bounded LRU of :class:`~service.retrieval.base.DecodedQuery` keyed by (language,
  the query's tokenised sentences, weights version, use_lm): the tokenised sentences are
  exactly what the decoder sees, so two texts that normalise alike share their forests, and
  repeated or paginated queries decode once. An ``OrderedDict`` behind a lock.
* **Time budget.** Sentences of a query are decoded in order; the first always with the full
  pop limit. Before each further sentence the time spent so far and the seconds per word
  measured so far predict its cost: if it fits in what is left of ``request_time_budget_s``
  after the request's wait for a slot it is decoded
  normally; if not but budget is left it is decoded with pop limit :data:`DEGRADED_POP_LIMIT`
  (cube pruning's cost grows with the pop limit, Hieber & Riezler 2015, §5); with no budget left the
  remaining sentences are skipped. The answer then says ``degraded`` and why. Degraded decodes are
  not cached (a later request with time to spare decodes the query fully). Ranking is not cut.
* **No shared mutable state.** The decoder keeps per-sentence search state in its kernel's own
  arrays (the reference engine in a fresh search object); its own caches are dicts whose only race
  is recomputation. A cached forest does carry caches (edge-weight vectors), so each cache entry has
  a lock held while a request ranks with it: two requests never touch one forest at once, different
  queries run in parallel. At most ``max_concurrency`` requests decode or rank at a time; a request
  that finds no slot free queues while it can still finish within ``request_time_budget_s``
  and is refused otherwise (:mod:`service.api.admission`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

from service.api.admission import AdmissionQueue
from service.api.logs import note_request
from service.api.telemetry import CACHE_HITS, CACHE_MISSES, DEGRADED, Metrics
from service.collection.docstore import Store
from service.core.settings import Settings
from service.errors import (
    InputTooLargeError,
    InvalidInputError,
)
from service.mt.bundle import ModelBundle
from service.mt.decoder import Decoder, DecoderConfig, Forest
from service.mt.weights import WeightsVersion
from service.retrieval.base import DecodedQuery, Scorer, configured_params
from service.retrieval.query import decoder_sentences
from service.search.pipeline import SearchPipeline
from service.search.stores import Backend, StoreSearchers
from service.text.languages import SUPPORTED_LANGUAGES, normalize_language

log = logging.getLogger(__name__)

DEGRADED_POP_LIMIT = 20


def language_bundle(models: dict[str, ModelBundle], lang: str) -> ModelBundle:
    """The loaded bundle translating from ``lang`` (in any case, or a tag such as ``de-DE``).
    A language without a loaded model is the same client error (422) on every endpoint,
    whether the service could load one or not; the message names the loaded languages."""
    code = normalize_language(lang)
    bundle = models.get(code)
    if bundle is not None:
        return bundle
    loaded = ", ".join(sorted(models)) or "none"
    why = (
        "no model is loaded for language"
        if code in SUPPORTED_LANGUAGES
        else f"unknown language (the service supports {', '.join(SUPPORTED_LANGUAGES)}):"
    )
    raise InvalidInputError(f"{why} {code[:20]!r}; loaded languages: {loaded}")


Plan = Literal["full", "reduced", "skip"]
CacheKey = tuple[str, tuple[tuple[str, ...], ...], str, bool]


def plan_sentence(elapsed: float, budget: float, seconds_per_word: float, words: int) -> Plan:
    """How to decode the next sentence, given the time spent and the cost measured so far."""
    remaining = budget - elapsed
    if remaining <= 0:
        return "skip"
    if seconds_per_word * words <= remaining:
        return "full"
    return "reduced"


@dataclass(frozen=True)
class Decoded:
    """A decoded query with how it was obtained."""

    query: DecodedQuery
    cached: bool
    decode_seconds: float
    lock: threading.Lock

    def response_fields(self, start: float, ranked: float, end: float) -> dict[str, Any]:
        """The fields every decoding endpoint returns: timings, cache use, degradation."""
        from service.api.schemas import Timings

        timings = Timings(
            decode_ms=self.decode_seconds * 1000,
            rank_ms=(end - ranked) * 1000,
            total_ms=(end - start) * 1000,
        )
        degraded = self.query.degraded is not None
        note_request(
            decode_ms=timings.decode_ms,
            rank_ms=timings.rank_ms,
            cached=self.cached,
            degraded=degraded,
            weights_version=self.query.weights_version,
        )
        return {
            "weights_version": self.query.weights_version,
            "timings": timings,
            "cached": self.cached,
            "degraded": degraded,
            "degraded_reason": self.query.degraded,
        }


# Memory held by a decoded query, per hyperedge of its forests, measured with tracemalloc on
# five lohelp-de dev queries of 5–74 words with the demo bundle, after a BOW-FD ranking:
# forests of Python objects (the reference decoder; nodes, target tuples, feature dicts and the
# flat arrays): 713–806 bytes per edge; array-backed forests of the compiled decoder (edge
# objects made on demand): 202–256 bytes per edge. Since the decoders drop the +LM nodes the
# goal cannot reach (a tenth of the edges are left), 195–222 bytes per edge on 10 dev queries
# per full bundle (de-en, zh-en) and 197–225 on the demo bundle (bench_decoder_prune.py).
BYTES_PER_EDGE = 800
BYTES_PER_ARRAY_EDGE = 230


def query_bytes(query: DecodedQuery) -> int:
    """Approximate memory held by ``query``'s forests (see :data:`BYTES_PER_EDGE`)."""
    return sum(
        (BYTES_PER_ARRAY_EDGE if f.hypergraph.array_backed else BYTES_PER_EDGE)
        * f.hypergraph.num_edges
        for f in query.forests
    )


class QueryCache:
    """A thread-safe LRU of decoded queries bounded by entry count and by approximate bytes
    (:func:`query_bytes`): a 50-word query's forests hold about 2 MB (pruned to what the
    goal reaches) but a long or degenerate one far more, so a count alone does not bound
    memory. ``size`` 0 disables it; a query larger than ``max_bytes`` is not kept."""

    def __init__(self, size: int, max_bytes: int | None = None) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: OrderedDict[Hashable, tuple[DecodedQuery, threading.Lock, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0

    def get(self, key: Hashable) -> tuple[DecodedQuery, threading.Lock] | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            self._data.move_to_end(key)
            return entry[0], entry[1]

    def put(self, key: Hashable, query: DecodedQuery) -> threading.Lock:
        """Store ``query``; returns the lock of the stored entry (an existing one wins)."""
        with self._lock:
            entry = self._data.get(key)
            if entry is not None:
                return entry[1]
            lock = threading.Lock()
            nbytes = query_bytes(query)
            if self.size <= 0 or (self.max_bytes is not None and nbytes > self.max_bytes):
                return lock
            self._data[key] = (query, lock, nbytes)
            self.bytes += nbytes
            while len(self._data) > self.size or (
                self.max_bytes is not None and self.bytes > self.max_bytes
            ):
                _, (_, _, dropped) = self._data.popitem(last=False)
                self.bytes -= dropped
            return lock


def decode_sentences(
    decoder: Decoder,
    sentences: list[tuple[str, ...]],
    budget: float,
    clock: Callable[[], float] = time.perf_counter,
    pool: Executor | None = None,
    waited: float = 0.0,
) -> tuple[list[Forest], str | None]:
    """The forests of ``sentences`` within ``budget`` seconds, and why it degraded (if it did).

    With ``pool``, the sentences after the first decode in its threads (the compiled kernel
    releases the GIL); each plans its decode when it starts, from the time spent so far and
    the seconds per word of the first sentence. ``waited``: seconds of the budget the request
    already spent waiting for its slot.
    """
    if pool is not None and len(sentences) > 1:
        return _decode_parallel(decoder, sentences, budget, clock, pool, waited)
    start = clock()
    forests: list[Forest] = []
    reduced: list[int] = []
    words_done = 0
    for i, tokens in enumerate(sentences):
        plan: Plan = "full"
        if i > 0:
            elapsed = clock() - start
            per_word = elapsed / max(words_done, 1)
            plan = plan_sentence(waited + elapsed, budget, per_word, len(tokens))
        if plan == "skip":
            break
        if plan == "reduced":
            reduced.append(i + 1)
        forests.append(decoder.forest(tokens, pop_limit=_pop_limit(plan, decoder)))
        words_done += len(tokens)
    return forests, _degraded_reason(budget, len(sentences), len(forests), reduced, waited)


def _pop_limit(plan: Plan, decoder: Decoder) -> int | None:
    """The pop limit of a planned decode (None: the decoder's own)."""
    if plan == "reduced" and decoder.config.pop_limit > DEGRADED_POP_LIMIT:
        return DEGRADED_POP_LIMIT
    return None


def _decode_parallel(
    decoder: Decoder,
    sentences: list[tuple[str, ...]],
    budget: float,
    clock: Callable[[], float],
    pool: Executor,
    waited: float,
) -> tuple[list[Forest], str | None]:
    start = clock()
    first = decoder.forest(sentences[0])
    seconds_per_word = (clock() - start) / max(len(sentences[0]), 1)
    plans: list[Plan] = ["full"] * len(sentences)

    def one(i: int) -> Forest | None:
        tokens = sentences[i]
        plan = plan_sentence(waited + clock() - start, budget, seconds_per_word, len(tokens))
        plans[i] = plan
        if plan == "skip":
            return None
        return decoder.forest(tokens, pop_limit=_pop_limit(plan, decoder))

    rest = list(pool.map(one, range(1, len(sentences))))
    forests = [first]
    for forest in rest:  # a prefix of the sentences: stop at the first skipped one
        if forest is None:
            break
        forests.append(forest)
    reduced = [i + 1 for i in range(len(forests)) if plans[i] == "reduced"]
    return forests, _degraded_reason(budget, len(sentences), len(forests), reduced, waited)


def _degraded_reason(
    budget: float, n: int, decoded: int, reduced: list[int], waited: float = 0.0
) -> str | None:
    reasons = []
    if reduced:
        reasons.append(
            f"sentences {_ranges(reduced)} of {n} decoded with pop limit {DEGRADED_POP_LIMIT}"
        )
    if decoded < n:
        reasons.append(f"sentences {_ranges(list(range(decoded + 1, n + 1)))} of {n} skipped")
    if not reasons:
        return None
    queued = f" ({waited:.2f} s of it waiting for a slot)" if waited >= 0.005 else ""
    return f"time budget of {budget:g} s exceeded{queued}: " + "; ".join(reasons)


def _ranges(numbers: list[int]) -> str:
    return str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}–{numbers[-1]}"


def backend_of(settings: Settings) -> Backend:
    """Where the settings say collections are searched, and how."""
    return Backend(
        kind=settings.search_backend, threads=settings.search_threads,
        ray_address=settings.ray_address, shard_timeout_s=settings.search_shard_timeout_s,
        state_root=settings.weights_state_dir, concurrency=settings.max_concurrency,
        replicas=settings.shard_replicas, spares=settings.shard_spares,
    )  # fmt: skip


class QueryService:
    """Decodes (through the cache) and ranks; one per app, on ``app.state.service``."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.cache = QueryCache(settings.forest_cache_size, settings.forest_cache_mb * 1024 * 1024)
        self.admission = AdmissionQueue(
            settings.max_concurrency, settings.queue_size, settings.request_time_budget_s,
            retry_after_s=settings.retry_after_s, max_wait_s=settings.queue_timeout_s,
            on_refused=metrics.count_refused,
        )  # fmt: skip
        self._request = threading.local()  # the wait of the request this thread serves
        if settings.queue_timeout_s is not None:
            log.warning(
                "CLIR_QUEUE_TIMEOUT_S is deprecated (removed in 0.2): requests queue while they "
                "can finish within CLIR_REQUEST_TIME_BUDGET_S, up to CLIR_QUEUE_SIZE; it still "
                "caps the wait at %g s",
                settings.queue_timeout_s,
            )
        self.searchers = StoreSearchers(
            backend_of(settings), on_shard_event=metrics.count_shard_event
        )
        self._decode_threads = settings.decode_threads or os.cpu_count() or 1
        self.pool: Executor | None = self._decode_pool()

    def close(self) -> None:
        """Release what the service holds: the decode threads, the Ray fan-outs (their
        driver processes), the cached forests, scorers and pipelines (and so the indexes and
        bundles they map: every memory-mapped array holds a file descriptor). The app's
        lifespan calls it at shutdown; the service stays usable and builds them again."""
        self.searchers.close()
        self.cache.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._decode_pool()

    def _decode_pool(self) -> Executor | None:
        threads = self._decode_threads
        return ThreadPoolExecutor(threads, thread_name_prefix="decode") if threads > 1 else None

    # --- checks -----------------------------------------------------------------------------

    def bundle(self, models: dict[str, ModelBundle], lang: str) -> ModelBundle:
        """The bundle for ``lang`` (:func:`language_bundle`)."""
        note_request(lang=lang)
        return language_bundle(models, lang)

    def check_text(self, text: str, what: str) -> None:
        """413 for text longer than ``max_query_chars``, 422 for blank text."""
        limit = self.settings.max_query_chars
        if len(text) > limit:
            raise InputTooLargeError(
                f"the {what} has {len(text)} characters; at most {limit} are accepted: shorten it"
            )
        if not text.strip():
            raise InvalidInputError(f"the {what} is empty")

    # --- work -------------------------------------------------------------------------------

    def run(self, fn: Callable[[], Any], kind: str = "query") -> Any:
        """Run ``fn`` holding one of ``max_concurrency`` slots.

        A request of ``kind`` (its service time is estimated per kind) queues for a slot while
        it can still finish within ``request_time_budget_s``, else is refused with
        :class:`~service.errors.OverloadedError` (503 + Retry-After), or with
        :class:`~service.errors.QueueFullError` (429) past ``queue_size`` waiting."""
        with self.admission.slot(kind) as waited:
            self._request.waited = waited
            try:
                return fn()
            finally:
                del self._request.waited

    def queue_wait(self) -> float:
        """Seconds this thread's request waited for its slot, spent of its time budget (0
        outside :meth:`run`, e.g. in the warm-up)."""
        waited: float = getattr(self._request, "waited", 0.0)
        return waited

    def decoder(
        self, bundle: ModelBundle, use_lm: bool = True, weights: WeightsVersion | None = None
    ) -> Decoder:
        """The bundle's decoder for ``weights`` (default: the active version)."""
        s = self.settings
        config = DecoderConfig(
            pop_limit=s.pop_limit, max_span=s.max_span, use_lm=use_lm, engine=s.decoder_engine
        )
        return bundle.decoder(config, weights)

    def decode(
        self, bundle: ModelBundle, text: str, *, use_lm: bool = True, search: bool = True
    ) -> Decoded:
        """The query's forests, from the cache or decoded within the time budget. ``search``:
        a how-to question is decoded as the instruction that answers it (document search);
        False decodes it as asked (a translator's sentence, whose suggestions must translate
        the question)."""
        active = bundle.active_weights()  # read once: the version and the decoder agree
        decoder = self.decoder(bundle, use_lm, active)
        version = active.version
        sentences = decoder_sentences(decoder, text, bundle.src, search=search)
        if not sentences:
            raise InvalidInputError("the query has no words left after normalisation")
        key: CacheKey = (bundle.src, tuple(sentences), version, use_lm)
        hit = self.cache.get(key)
        if hit is not None:
            self.metrics.inc(CACHE_HITS)
            return Decoded(replace(hit[0], text=text), True, 0.0, hit[1])
        self.metrics.inc(CACHE_MISSES)
        t0 = time.perf_counter()
        forests, degraded = decode_sentences(
            decoder, sentences, self.settings.request_time_budget_s, pool=self.pool,
            waited=self.queue_wait(),
        )  # fmt: skip
        seconds = time.perf_counter() - t0
        self.metrics.observe_decode(seconds)
        query = DecodedQuery(
            qid="q",
            text=text,
            lang=bundle.src,
            sentences=tuple(sentences[: len(forests)]),
            forests=tuple(forests),
            weights=decoder.weights,
            weights_version=version,
            degraded=degraded,
        )
        if degraded is not None:
            self.metrics.inc(DEGRADED)
            return Decoded(query, False, seconds, threading.Lock())
        return Decoded(query, False, seconds, self.cache.put(key, query))

    def pipeline(self, index: Store, bundle: ModelBundle) -> SearchPipeline:
        """The search pipeline over ``index`` for ``bundle``, built once (the backend the
        ``search_backend`` setting names: :class:`~service.search.stores.StoreSearchers`)."""
        return self.searchers.pipeline(index, bundle)

    def method_params(self, method: str) -> dict[str, Any]:
        """The parameters of ``method`` that the settings set (its scorer names them,
        :func:`~service.retrieval.base.configured_params`): PSQ's n-best size, BOW-FD's
        cascade, TR's n-best time budget."""
        return configured_params(method, partial(getattr, self.settings))

    def scorer(self, method: str, index: Store, bundle: ModelBundle, **params: Any) -> Scorer:
        """A scorer per (method, index, bundle, params), built once and reused (over a
        collection, one that searches its current commit in this process)."""
        note_request(method=method)
        return self.searchers.scorer(method, index, bundle, **params)

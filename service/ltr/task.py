"""The learning-to-rank task: its parameters and the run behind the job and ``clir train-ltr``
(Hieber & Riezler 2015, §4).

:class:`LtrParams` (pydantic; also the admin API's request body) names the model bundle, the
index, the training and dev queries and qrels, the objective and the learning settings;
:meth:`LtrParams.resolved` fills in every default from an :class:`LtrSetup` — what the service
is configured with: its model bundles, document indexes, data directory, backend, pop limit,
decoder and weights state (:func:`service.jobs.tasks.ltr_setup` builds it from the settings) —
and checks that every path exists. What a client over HTTP may name is the web's policy
(:func:`service.api.admin.job_params`).

:func:`train_ltr` runs the whole job: start weights = the bundle's active weights with
``IR_BM25 = v`` unless they already carry one; ``holdout`` (20 %) of the training queries are
set aside, whole pages (or whole groups of a given ``qid<TAB>group`` file) at a time
(:mod:`service.ltr.protocol`); training (:mod:`service.ltr.trainer`) on shards of the rest,
stopped early on dev; the held-out queries are then ranked by the start and the learned weights
and compared (MAP gain, paired randomization test, detectable difference: dev, where the epoch
was chosen, cannot say whether it carries over). The best epoch's weights are stored as a new
version ``ltr-<objective>-<UTC timestamp>`` with its dev and held-out metrics, whether
activation is offered (``activation_offered``: only for a positive held-out MAP gain) and the
starting version as parent (:class:`service.mt.weights.WeightsStore`: atomic, never
overwriting, in the weights state directory); it is activated only if asked, offered, and
the service can score with it (:func:`service.retrieval.versions.activate_version`).
Cancellation (``ctx.cancelled()``) raises :class:`~service.errors.JobCancelled` and writes
nothing. The job worker runs it as the task ``ltr`` (:mod:`service.jobs.tasks`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from service.core.jit import Engine
from service.core.progress import JobContext, ScaledContext
from service.data import load_queries
from service.errors import ClirError, ConflictError, InvalidInputError, MissingResourceError
from service.ltr.backends import BACKENDS, make_backend
from service.ltr.examples import (
    Decoding,
    DevSet,
    Selection,
    select_queries,
)
from service.ltr.objectives import OBJECTIVES
from service.ltr.protocol import compare_runs, holdout_split, page_groups
from service.ltr.shard import shard_specs
from service.ltr.trainer import (
    NullContext,
    Reporter,
    TrainOutcome,
    train,
)
from service.mt.weights import DEFAULT_STATE_DIR
from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature
from service.retrieval.lex import is_lex_feature
from service.text.languages import normalize_language

__all__ = ["LtrParams", "LtrResult", "LtrSetup", "train_ltr", "validate_params"]

HELDOUT_SHARE = 0.1  # share of the progress bar for measuring on the held-out queries

# The names the registries know (the API's validation and its OpenAPI enums come from them).
if TYPE_CHECKING:
    from service.index.inverted import InvertedIndex
    from service.mt.bundle import ModelBundle

    Objective = str
    BackendName = str
else:
    Objective = Literal[tuple(OBJECTIVES)]
    BackendName = Literal[tuple(BACKENDS)]


@dataclass(frozen=True)
class LtrSetup:
    """What a run draws on besides its parameters: the model bundles and document indexes a
    job may default to (the first that exists), the data directory of the default query files,
    where several shards run (``backend``, for ``shards > 1``; Ray at ``ray_address``), the
    decoder's pop limit and search, and the weights state root. The defaults suit a library
    caller that names the model and the index."""

    data_dir: Path = Path("../shared/data")
    model_bundles: tuple[Path, ...] = ()
    doc_indexes: tuple[Path, ...] = ()
    backend: Literal["local", "ray"] = "local"
    pop_limit: int = 200
    engine: Engine = "compiled"
    weights_state_dir: Path = DEFAULT_STATE_DIR
    ray_address: str | None = None


class LtrParams(BaseModel):
    """Parameters of a learning-to-rank job (``clir train-ltr``, ``POST /v1/admin/train``)."""

    model_config = ConfigDict(extra="forbid")

    lang: Literal["de", "zh"] | None = Field(
        None,
        description="Source language (any case, or a tag such as de-DE); default: the "
        "model bundle's.",
    )
    model: Path | None = Field(
        None, description="Model bundle; default: the first configured bundle of `lang`."
    )
    index: Path | None = Field(None, description="Document index; default: the first existing.")
    queries: Path | None = Field(None, description="Training queries (qid<TAB>text).")
    qrels: Path | None = Field(None, description="Training qrels (TREC).")
    dev_queries: Path | None = Field(None, description="Dev queries for early stopping.")
    dev_qrels: Path | None = Field(None, description="Dev qrels.")
    objective: Objective = Field(
        "listmle-te",
        description="Loss / update rule. Default: ListMLE-TE, the one objective that gained on "
        "held-out queries in the pooled cross-validation (bench/README.md, 'Learning to rank, "
        "pooled'); the pairwise hinge of Hieber & Riezler 2015, §4, never gained significantly.",
    )
    epochs: int = Field(10, ge=1, le=1000)
    shards: int = Field(1, ge=1, le=64, description="Shards for iterative parameter mixing.")
    backend: BackendName | None = Field(
        None, description="Where shards run; default inline for 1 shard, else settings.ltr_backend."
    )
    freeze_smt: bool = Field(
        True, description="Learn only the IR (and LEX) weights; the tuned SMT weights stay."
    )
    lex: bool = Field(True, description="Add and learn the sparse LEX features.")
    ir_terms: bool = Field(
        True,
        description="Learn a weight per English term (the sparse IR features of Hieber & "
        "Riezler 2015, §3, added to the default weight v, which then stays fixed); false: learn "
        "the single IR weight v.",
    )
    v: float = Field(1.0, description="IR weight to start from if the weights carry none.")
    candidates: int = Field(100, ge=1, le=1000, description="Top BOW-FD documents per query.")
    limit: int | None = Field(None, ge=1, description="Use the first N training queries.")
    dev_limit: int | None = Field(None, ge=1, description="Use the first N dev queries.")
    patience: int = Field(3, ge=1, le=1000, description="Epochs without a new best dev MAP.")
    seed: int = Field(0, ge=0, description="Seed of the fixed cyclic query order.")
    holdout: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="Share of the judged training queries held out (whole groups) to measure "
        "the learned weights on; activation is offered only if they gain there. 0: no hold-out "
        "(then the dev gain decides).",
    )
    groups: Path | None = Field(
        None,
        description="qid<TAB>group file: queries of one group are held out together; default: "
        "a query's page (its most relevant judged document).",
    )
    activate: bool = Field(
        False, description="Activate the new weights version if activation is offered."
    )
    pop_limit: int | None = Field(None, ge=1, le=100_000, description="Decoder pop limit.")
    rho: float = Field(0.95, gt=0, lt=1, description="Adadelta decay ρ (gradient objectives).")
    eps: float = Field(1e-6, gt=0, le=1, description="Adadelta ε (gradient objectives).")
    rate: float = Field(
        0.01, gt=0, le=10, description="Perceptron step, relative to the trainable weights' norm."
    )
    tau: float = Field(
        1.0, gt=0, le=1e6, description="Perceptron margin τ (Shen & Joshi 2004, Algorithm 2)."
    )

    def objective_options(self) -> dict[str, float]:
        """The learning settings that apply to the chosen objective."""
        if self.objective == "perceptron":
            return {"rate": self.rate, "tau": self.tau}
        return {"rho": self.rho, "eps": self.eps}

    @field_validator("lang", mode="before")
    @classmethod
    def _language(cls, value: Any) -> Any:
        return normalize_language(value) if isinstance(value, str) else value

    @field_validator("v")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("v must be a finite number")
        return value

    def resolved(self, setup: LtrSetup) -> LtrParams:
        """These parameters with every path filled in from ``setup``, absolute and checked
        to exist, and the backend chosen."""
        from service.mt.bundle import read_manifest

        model = self._model(setup)
        src = str(read_manifest(model).get("src"))
        if self.lang is not None and src != self.lang:
            raise InvalidInputError(
                f"the model {model} translates from {src!r}, not {self.lang!r}; "
                "choose a bundle of that language"
            )
        if src not in ("de", "zh"):
            raise InvalidInputError(f"the model {model} has source language {src!r}")
        index = _existing(self.index, setup.doc_indexes, "index", "doc_indexes")
        data = setup.data_dir / "clir" / f"lohelp-{src}"
        defaults = {
            "queries": data / "queries.train.tsv",
            "qrels": data / "qrels.train.txt",
            "dev_queries": data / "queries.dev.tsv",
            "dev_qrels": data / "qrels.dev.txt",
        }
        paths: dict[str, Path] = {}
        for name, default in defaults.items():
            given: Path | None = getattr(self, name)
            paths[name] = _data_file(given if given is not None else default, name)
        if self.groups is not None:
            paths["groups"] = _data_file(self.groups, "groups")
        backend = self.backend or ("inline" if self.shards == 1 else setup.backend)
        return self.model_copy(
            update={"lang": src, "model": model, "index": index, "backend": backend, **paths}
        )

    def _model(self, setup: LtrSetup) -> Path:
        from service.mt.bundle import read_manifest

        if self.model is not None:
            return _existing(self.model, setup.model_bundles, "model", "model_bundles")
        for p in setup.model_bundles:
            if p.exists():
                try:
                    src = read_manifest(p).get("src")
                except Exception:
                    continue
                if self.lang is None or src == self.lang:
                    return p.resolve()
        if self.lang is not None:  # a client's choice this service cannot serve: as a search
            raise InvalidInputError(
                f"no model is configured for language {self.lang!r}; the configured bundles "
                f"are {[str(p) for p in setup.model_bundles]}"
            )
        raise MissingResourceError(
            f"no model bundle for {self.lang or 'any language'} among the configured "
            f"{[str(p) for p in setup.model_bundles]}; build one with clir train-model"
        )


def _existing(given: Path | None, options: tuple[Path, ...], what: str, setting: str) -> Path:
    """``given``, or the first of the configured ``options`` that exists, absolute."""
    if given is None:
        found = next((p for p in options if p.exists()), None)
        if found is None:
            raise MissingResourceError(
                f"no {what}: none of the configured {setting} {[str(p) for p in options]} exists"
            )
        return found.resolve()
    path = Path(given).resolve()
    if not path.exists():
        raise MissingResourceError(f"the {what} {path} does not exist")
    return path


def _data_file(path: Path, name: str) -> Path:
    """``path`` absolute, if it is a file."""
    path = Path(path).resolve()
    if not path.is_file():
        raise MissingResourceError(f"{name}: the file {path} does not exist")
    return path


@dataclass(frozen=True)
class Offer:
    """Whether the learned weights may be activated, and why."""

    offered: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"offered": self.offered, "reason": self.reason}


@dataclass(frozen=True)
class LtrResult:
    """What a run produced."""

    version: str | None
    model: str
    metrics: dict[str, float]
    activated: bool
    offer: Offer
    outcome: TrainOutcome
    train: Selection
    dev_failed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "model": self.model,
            "metrics": self.metrics,
            "activated": self.activated,
            "activation": self.offer.to_json(),
        }


def _hold_out(sel: Selection, p: LtrParams) -> tuple[Selection, Selection | None]:
    """(training, held out): ``p.holdout`` of the queries, whole groups at a time
    (:func:`service.ltr.protocol.holdout_split`; groups from ``p.groups`` or the pages)."""
    if p.holdout == 0.0:
        return sel, None
    if p.groups is not None:
        given = load_queries(p.groups)
        missing = [q for q in sel.queries if q not in given]
        if missing:
            raise InvalidInputError(
                f"the groups file {p.groups} names no group for {len(missing)} training "
                f"queries, e.g. {missing[0]!r}"
            )
        groups = {q: given[q] for q in sel.queries}
    else:
        groups = page_groups({q: sel.qrels[q] for q in sel.queries})
    try:
        kept, held = holdout_split(groups, p.holdout)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{exc}; send more queries or set holdout to 0") from None
    return sel.subset(kept), sel.subset(held)


def _heldout_comparison(
    bundle: ModelBundle,
    index: InvertedIndex,
    held: Selection,
    start: Mapping[str, float],
    learned: Mapping[str, float],
    pop_limit: int,
    engine: Engine,
    p: LtrParams,
    ctx: JobContext,
) -> dict[str, float]:
    """The held-out queries ranked (BOW-FD, depth 1000) by the start and the learned weights:
    :func:`service.ltr.protocol.compare_runs`' figures."""
    rep = Reporter(ctx)
    n = len(held.queries)

    def progress(done: int, total: int) -> None:
        frac = 1.0 - HELDOUT_SHARE * (1.0 - 0.8 * done / total)
        rep.progress(frac, f"decoding held-out queries {done}/{n}")

    dec = Decoding(bundle, index, start, pop_limit=pop_limit, lex=p.lex, engine=engine)
    dev = DevSet.build(dec, held, check=rep.check, progress=progress)
    if len(dev.queries) < 2:
        raise InvalidInputError(
            f"only {len(dev.queries)} held-out queries could be decoded; send more queries "
            "or set holdout to 0"
        )
    out = compare_runs(dev.run(learned, rep.check), dev.run(start, rep.check), held.qrels)
    out["failed"] = len(dev.failed)
    return {k: float(v) for k, v in out.items()}


def _offer(metrics: Mapping[str, float]) -> Offer:
    """Activation is offered when the learned weights gain MAP on the held-out queries (or,
    without a hold-out, on dev — where early stopping chose them, so only a weak check)."""
    if metrics["best_epoch"] == 0:
        return Offer(False, "no change: no epoch beat the starting weights on dev, so they "
                     "were kept and no new version was stored: nothing to activate")  # fmt: skip
    if "heldout_map_gain" in metrics:
        gain = metrics["heldout_map_gain"]
        figures = (
            f"MAP gain {gain:+.4f} on {int(metrics['heldout_queries'])} held-out training "
            f"queries (p {metrics['heldout_p_map']:.3f}, detectable "
            f"{metrics['heldout_detectable']:.4f})"
        )
    else:
        gain = metrics["dev_map"] - metrics["baseline_dev_map"]
        figures = f"MAP gain {gain:+.4f} on dev (no hold-out)"
    if gain > 0.0:
        return Offer(True, figures)
    return Offer(False, f"{figures}: not positive, so activation is not offered")


def _version_name(objective: str, existing: set[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    name = f"ltr-{objective}-{stamp}"
    k = 2
    while name in existing:
        name = f"ltr-{objective}-{stamp}-{k}"
        k += 1
    return name


def start_weights(active: Mapping[str, float], v: float) -> dict[str, float]:
    """The active weights, with ``IR_BM25 = v`` unless they carry it."""
    out = dict(active)
    out.setdefault(IR_FEATURE, float(v))
    return out


def train_ltr(
    params: LtrParams | Mapping[str, Any],
    ctx: JobContext | None = None,
    *,
    setup: LtrSetup | None = None,
) -> LtrResult:
    """Run learning to rank and store (and maybe activate) the new weights version
    (``setup``: what the run draws on besides ``params``, default :class:`LtrSetup`)."""
    from service.index.inverted import load_index
    from service.mt.bundle import load_bundle

    t0 = time.perf_counter()
    setup = setup or LtrSetup()
    p = params if isinstance(params, LtrParams) else validate_params(params)
    p = p.resolved(setup)
    assert p.model and p.index and p.queries and p.qrels and p.dev_queries and p.dev_qrels
    ctx = ctx or NullContext()
    bundle = load_bundle(p.model, state_root=setup.weights_state_dir)
    index = load_index(p.index)
    active = bundle.active_weights()
    start = start_weights(active.weights, p.v)
    pop_limit = p.pop_limit or setup.pop_limit
    engine = setup.engine
    train_sel = select_queries(p.queries, p.qrels, index, p.limit)
    train_sel, held_sel = _hold_out(train_sel, p)
    dev_sel = select_queries(p.dev_queries, p.dev_qrels, index, p.dev_limit,
                             require_relevant=False)  # fmt: skip
    specs = shard_specs(
        train_sel, p.shards, model=str(p.model), index=str(p.index), start=start, seed=p.seed,
        objective=p.objective, objective_options=p.objective_options(), candidates=p.candidates,
        pop_limit=pop_limit, lex=p.lex, freeze_smt=p.freeze_smt, ir_terms=p.ir_terms,
        engine=engine, state_root=str(setup.weights_state_dir),
    )  # fmt: skip

    built: list[DevSet] = []

    def build_dev(rep: Reporter) -> DevSet:
        dec = Decoding(bundle, index, start, pop_limit=pop_limit, lex=p.lex, engine=engine)

        def progress(done: int, total: int) -> None:
            rep.within(done / total, f"decoding dev {done}/{total}")

        built.append(DevSet.build(dec, dev_sel, check=rep.check, progress=progress))
        return built[0]

    assert p.backend is not None
    backend = make_backend(p.backend, bundle=bundle, index=index, ray_address=setup.ray_address)
    share = HELDOUT_SHARE if held_sel is not None else 0.0
    with backend:
        n_dev, n_train = len(dev_sel.queries), len(train_sel.queries)
        outcome = train(backend, specs, start, build_dev=build_dev, epochs=p.epochs,
                        patience=p.patience, ctx=ScaledContext(ctx, 1.0 - share),
                        dev_share=n_dev / max(1, n_dev + n_train))  # fmt: skip
    Reporter(ctx).check()
    heldout = _heldout_metrics(bundle, index, held_sel, start, outcome, pop_limit, engine, p, ctx)
    metrics = _metrics(outcome, train_sel, len(built[0].queries), len(specs), heldout)
    offer = _offer(metrics)
    metrics["activation_offered"] = float(offer.offered)
    ctx.progress(1.0, offer.reason)
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    # the starting weights kept: a copy of them is no new version
    version = None
    if outcome.best_epoch != 0:
        version = _store(bundle, outcome.weights, p, len(specs), metrics, active.version)
    activated = p.activate and offer.offered and version is not None
    if activated and version is not None:
        _activate(bundle, version, index)
    return LtrResult(
        version=version,
        model=str(p.model),
        metrics=metrics,
        activated=activated,
        offer=offer,
        outcome=outcome,
        train=train_sel,
        dev_failed=len(built[0].failed),
    )


def _heldout_metrics(
    bundle: ModelBundle,
    index: InvertedIndex,
    held: Selection | None,
    start: Mapping[str, float],
    outcome: TrainOutcome,
    pop_limit: int,
    engine: Engine,
    p: LtrParams,
    ctx: JobContext,
) -> dict[str, float] | None:
    """The held-out comparison when queries were held out (:func:`_heldout_comparison`), or
    no gain at all when training kept the starting weights."""
    if held is None:
        return None
    if outcome.best_epoch == 0:
        # the starting weights were kept: they rank the held-out queries as they did
        n = float(len(held.queries))
        return {"queries": n, "map_gain": 0.0, "p_map": 1.0, "detectable": 0.0}
    learned = outcome.weights
    return _heldout_comparison(bundle, index, held, start, learned, pop_limit, engine, p, ctx)


def _activate(bundle: ModelBundle, version: str, index: InvertedIndex) -> None:
    """Activate the stored ``version``; ConflictError if the service cannot score with it."""
    from service.retrieval.versions import activate_version

    try:
        activate_version(bundle, version, index)
    except ClirError as exc:
        raise ConflictError(
            f"stored weights version {version} but did not activate it: {exc}"
        ) from exc


def _metrics(
    outcome: TrainOutcome,
    train_sel: Selection,
    dev_queries: int,
    shards: int,
    heldout: Mapping[str, float] | None,
) -> dict[str, float]:
    """The version's metrics: dev at the best epoch and at the start, the run, and the
    held-out comparison (``heldout_*``) when queries were held out."""
    best, base = outcome.best_metrics, outcome.baseline
    metrics: dict[str, float] = {
        "dev_map": best["map"],
        "dev_ndcg": best["ndcg"],
        "dev_pres": best["pres"],
        "baseline_dev_map": base["map"],
        "baseline_dev_ndcg": base["ndcg"],
        "baseline_dev_pres": base["pres"],
        "best_epoch": float(outcome.best_epoch),
        "epochs": float(outcome.epochs_run),
        "train_queries": float(outcome.train_queries),
        "skipped_queries": float(train_sel.no_relevant_in_index),
        "dev_queries": float(dev_queries),
        "shards": float(shards),
    }
    if heldout is not None:
        metrics.update({f"heldout_{k}": float(v) for k, v in heldout.items()})
    return metrics


def _store(
    bundle: ModelBundle,
    learned: Mapping[str, float],
    p: LtrParams,
    shards: int,
    metrics: dict[str, float],
    parent: str,
) -> str:
    """Save the learned weights as a new version (sparse LEX and per-term IR weights that
    stayed 0 are left out: absent means 0); returns its name."""
    weights = {
        n: w
        for n, w in learned.items()
        if w != 0.0 or not (is_lex_feature(n) or is_ir_term_feature(n))
    }
    store = bundle.weights_store
    name = _version_name(p.objective, set(store.versions()))
    source = (
        f"ltr objective={p.objective} shards={shards} backend={p.backend} "
        f"freeze_smt={p.freeze_smt} lex={p.lex} ir_terms={p.ir_terms} "
        f"candidates={p.candidates} seed={p.seed} "
        + " ".join(f"{k}={v:g}" for k, v in p.objective_options().items())
    )
    record = store.save(weights, version=name, source=source, metrics=metrics, parent=parent)
    return record.version


def validate_params(params: Mapping[str, Any]) -> LtrParams:
    """``params`` (a job's, as stored) as :class:`LtrParams`, or InvalidInputError naming
    every invalid field."""
    try:
        return LtrParams.model_validate(dict(params))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInputError(f"invalid learning-to-rank parameters: {problems}") from None

"""Training end to end on the toy bundle and index: parameter mixing, the task, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.api.admin import job_params
from service.core.settings import Settings
from service.errors import DataFormatError, InvalidInputError, JobCancelled, MissingResourceError
from service.index.inverted import InvertedIndex
from service.jobs.tasks import ltr, ltr_setup
from service.ltr.backends import InlineBackend
from service.ltr.examples import (
    Decoding,
    DevSet,
    select_queries,
)
from service.ltr.objectives import make_objective
from service.ltr.shard import Shard, ShardSpec, mix, shard_specs
from service.ltr.task import LtrParams, start_weights, train_ltr
from service.ltr.trainer import train
from service.mt.bundle import ModelBundle
from service.retrieval.bowfd import IR_FEATURE, is_ir_term_feature
from tests.ltr.conftest import DEV_QRELS, TRAIN_QUERIES, write_qrels


class Recorder:
    """A JobContext that records, and cancels after ``cancel_after`` progress reports."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.reports: list[tuple[float, str]] = []
        self.epochs: list[tuple[int, dict[str, float]]] = []
        self.cancel_after = cancel_after

    def progress(self, fraction: float, message: str) -> None:
        self.reports.append((fraction, message))

    def epoch_metrics(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append((epoch, metrics))

    def cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.reports) >= self.cancel_after


def make_specs(
    bundle: ModelBundle,
    index: InvertedIndex,
    data: dict[str, Path],
    shards: int,
    objective: str = "hinge",
    **options: object,
) -> tuple[list[ShardSpec], dict[str, float]]:
    sel = select_queries(data["queries"], data["qrels"], index)
    start = start_weights(bundle.active_weights().weights, 1.0)
    specs = shard_specs(
        sel, shards, model=str(bundle.path), index=str(index.path), start=start,
        objective=objective, candidates=5, pop_limit=50, **options,
    )  # fmt: skip
    return specs, start


def dev_builder(bundle: ModelBundle, index: InvertedIndex, data: dict[str, Path], start):
    def build(_rep: object) -> DevSet:
        sel = select_queries(data["dev_queries"], data["dev_qrels"], index, require_relevant=False)
        dec = Decoding(bundle, index, start, pop_limit=50, lex=False)
        return DevSet.build(dec, sel)

    return build


def test_one_shard_mixing_equals_plain_training(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> None:
    specs, start = make_specs(toy_bundle, toy_index, ltr_data, 1)
    outcome = train(
        InlineBackend(toy_bundle, toy_index),
        specs,
        start,
        build_dev=dev_builder(toy_bundle, toy_index, ltr_data, start),
        epochs=3,
        patience=10,
        keep_epoch_weights=True,
    )
    assert len(outcome.epoch_weights) == 3
    # plain training: the same examples, the same cyclic order, one objective, no mixing
    shard = Shard(specs[0], toy_bundle, toy_index)
    shard.build()
    space = shard.space
    obj = make_objective("hinge", len(space), space.trainable(smt=True, lex=False))
    w = space.vector(start)
    for epoch in range(3):
        for ex in shard.examples:
            w, _ = obj.update(w, ex.features(w, len(space)), ex.relevance)
        mixed = outcome.epoch_weights[epoch]
        assert space.weights(w) == {n: mixed[n] for n in space.names}
    assert not np.allclose(w, space.vector(start))  # training moved the weights


@pytest.mark.parametrize("dev_share", [0.2, 0.8])
def test_the_dev_pass_fills_its_share_of_the_progress_bar(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path], dev_share: float
) -> None:
    # decoding 260 dev queries after 50 training queries is most of a short job: its share of
    # the building phase follows the queries' counts, so the bar moves while it runs
    from service.ltr.trainer import BUILD_SHARE, Reporter

    specs, start = make_specs(toy_bundle, toy_index, ltr_data, 1)
    inner = dev_builder(toy_bundle, toy_index, ltr_data, start)
    spans: list[tuple[float, float]] = []

    def build(rep: Reporter) -> DevSet:
        spans.append(rep.span)
        for i in range(5):
            rep.within(i / 4, f"decoding dev {i}/4", force=True)
        return inner(rep)

    ctx = Recorder()
    train(InlineBackend(toy_bundle, toy_index), specs, start, build_dev=build, epochs=1,
          patience=1, ctx=ctx, dev_share=dev_share)  # fmt: skip
    low = BUILD_SHARE * (1 - dev_share)  # the inline backend decodes the training queries first
    assert spans == [(pytest.approx(low), pytest.approx(BUILD_SHARE))]
    dev = [f for f, m in ctx.reports if m.startswith("decoding dev")]
    assert dev == pytest.approx([low + (BUILD_SHARE - low) * i / 4 for i in range(5)])
    fractions = [f for f, _ in ctx.reports]
    assert fractions == sorted(fractions)


def test_two_shards_average_the_shards_trained_alone(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> None:
    specs, start = make_specs(toy_bundle, toy_index, ltr_data, 2)
    assert [len(s.queries) for s in specs] == [3, 3]
    backend = InlineBackend(toy_bundle, toy_index)
    backend.launch(specs)
    backend.built()
    results = backend.epoch(start)
    mixed = mix([r.weights for r in results], start)
    alone = []
    for spec in specs:
        shard = Shard(spec, toy_bundle, toy_index)
        shard.build()
        alone.append(shard.epoch(start).weights)
    for name in start:
        assert mixed[name] == pytest.approx((alone[0][name] + alone[1][name]) / 2, abs=0)
    assert mixed != start


def test_train_ltr_writes_a_version_with_metrics(
    ltr_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_a_learned_epoch(monkeypatch)  # an epoch that won: a new version (else: no change)
    ctx = Recorder()
    params = LtrParams(lang="de", epochs=3, patience=3, candidates=5, activate=True)
    result = train_ltr(params, ctx, setup=ltr_setup(ltr_settings))
    # the default: ListMLE-TE with the SMT weights frozen and LEX features learned
    assert result.version is not None and result.version.startswith("ltr-listmle-te-")
    from service.mt.bundle import weights_store

    store = weights_store(Path(result.model), ltr_settings.weights_state_dir)
    saved = store.load(result.version)
    assert "freeze_smt=True lex=True" in saved.source
    # activated only if offered: the held-out queries decide (the toy's gain is 0)
    assert result.activated == bool(saved.metrics["activation_offered"])
    assert (store.active_version() == result.version) == result.activated
    assert saved.parent == "default" or saved.parent in store.versions()
    assert saved.weights == pytest.approx(result.outcome.weights)
    assert IR_FEATURE in saved.weights
    m = saved.metrics
    for key in ("dev_map", "dev_ndcg", "dev_pres", "baseline_dev_map", "best_epoch", "epochs",
                "heldout_map_gain", "heldout_p_map", "heldout_detectable"):  # fmt: skip
        assert key in m
    # 20 % of the six queries held out, whole pages: two (ceil of 1.2 queries)
    assert m["heldout_queries"] == 2 and m["train_queries"] == len(TRAIN_QUERIES) - 2
    assert m["dev_map"] >= m["baseline_dev_map"]
    assert 1 <= m["epochs"] <= 3
    assert [e for e, _ in ctx.epochs] == list(range(1, int(m["epochs"]) + 1))
    assert all({"map", "ndcg", "pres", "train_loss"} <= set(x) for _, x in ctx.epochs)
    fractions = [f for f, _ in ctx.reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def force_a_learned_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy's dev MAP is 1 at the start, so training always keeps the starting weights and
    the held-out queries need not be ranked. To exercise that ranking, the real training's
    outcome is relabelled as if epoch 1 had won (the weights stay what training returned)."""
    import dataclasses

    import service.ltr.task as task

    real = task.train

    def relabelled(*args: object, **kwargs: object) -> object:
        return dataclasses.replace(real(*args, **kwargs), best_epoch=1)  # type: ignore[arg-type]

    monkeypatch.setattr(task, "train", relabelled)


def test_kept_start_weights_skip_ranking_the_held_out_queries(
    ltr_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.ltr.task as task

    def fail(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the held-out queries were ranked for the starting weights")

    monkeypatch.setattr(task, "_heldout_comparison", fail)
    params = LtrParams(epochs=2, candidates=5, activate=True)
    result = train_ltr(params, setup=ltr_setup(ltr_settings))
    m = result.metrics
    assert m["best_epoch"] == 0 and m["heldout_queries"] == 2 and m["heldout_map_gain"] == 0.0
    assert not result.activated and m["activation_offered"] == 0.0
    assert "nothing to activate" in result.offer.reason
    # no change, so no new version: a copy of the starting weights is not stored
    assert result.version is None and result.offer.reason.startswith("no change")


def test_holdout_keeps_groups_whole_and_measures_the_start_weights(
    ltr_settings: Settings,
    ltr_data: dict[str, Path],
    toy_index: InvertedIndex,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    force_a_learned_epoch(monkeypatch)
    groups = ltr_data["root"] / "groups.tsv"
    groups.write_text("".join(f"{q}\t{'a' if q in ('t1', 't2', 't6') else 'b'}\n"
                              for q in TRAIN_QUERIES), encoding="utf-8")  # fmt: skip
    result = train_ltr(LtrParams(epochs=1, candidates=5, holdout=0.3, groups=groups),
                       setup=ltr_setup(ltr_settings))  # fmt: skip
    kept = set(result.train.queries)
    held = set(TRAIN_QUERIES) - kept
    assert held in ({"t1", "t2", "t6"}, {"t3", "t4", "t5"})  # one whole group
    m = result.metrics
    assert m["heldout_queries"] == 3 and m["train_queries"] == 3
    # the job's figure for the start weights equals a separate ranking of the held-out queries
    from service.mt.bundle import load_bundle

    bundle = load_bundle(ltr_settings.model_bundles[0], state_root=ltr_settings.weights_state_dir)
    start = start_weights(bundle.active_weights().weights, 1.0)
    sel = select_queries(ltr_data["queries"], ltr_data["qrels"], toy_index)
    sel.queries = {q: t for q, t in sel.queries.items() if q in held}
    sel.qrels = {q: r for q, r in sel.qrels.items() if q in held}
    dev = DevSet.build(Decoding(bundle, toy_index, start, pop_limit=50, lex=False), sel)
    expected, _ = dev.evaluate(start)
    assert m["heldout_map_default"] == pytest.approx(expected["map"])
    # a groups file that misses a query, or too few groups, is refused with the reason
    groups.write_text("t1\ta\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="no group for 5 training queries"):
        train_ltr(LtrParams(epochs=1, holdout=0.3, groups=groups), setup=ltr_setup(ltr_settings))
    groups.write_text("".join(f"{q}\tone\n" for q in TRAIN_QUERIES), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"at least 2 groups.*holdout to 0"):
        train_ltr(LtrParams(epochs=1, holdout=0.3, groups=groups), setup=ltr_setup(ltr_settings))


@pytest.mark.parametrize("gain", [-0.01, 0.0, 0.02])
def test_activation_is_offered_only_for_a_held_out_gain(
    ltr_settings: Settings, monkeypatch: pytest.MonkeyPatch, gain: float
) -> None:
    # The toy cannot make learning gain or lose on purpose, so the held-out comparison is
    # replaced (only it) by one that reports ``gain``; everything else runs for real.
    import service.ltr.task as task
    from service.errors import ConflictError
    from service.mt.bundle import weights_store
    from service.retrieval.versions import activate_version

    real = task.compare_runs

    def reporting(*args: object, **kwargs: object) -> dict[str, float]:
        out = dict(real(*args, **kwargs))  # type: ignore[arg-type]
        out["map_gain"] = gain
        return out

    monkeypatch.setattr(task, "compare_runs", reporting)
    force_a_learned_epoch(monkeypatch)
    store = weights_store(ltr_settings.model_bundles[0], ltr_settings.weights_state_dir)
    before = store.active_version()
    params = LtrParams(epochs=1, candidates=5, activate=True)
    result = train_ltr(params, setup=ltr_setup(ltr_settings))
    out = result.to_json()
    assert out["activation"]["offered"] is (gain > 0) and out["activated"] is (gain > 0)
    assert result.metrics["activation_offered"] == float(gain > 0)
    assert f"{gain:+.4f}" in out["activation"]["reason"]
    if gain > 0:
        assert store.active_version() == result.version
        return
    assert "not offered" in out["activation"]["reason"]
    assert store.active_version() == before  # stored, not activated
    from service.mt.bundle import load_bundle

    bundle = load_bundle(ltr_settings.model_bundles[0], state_root=ltr_settings.weights_state_dir)
    with pytest.raises(ConflictError, match=r"not offered for activation.*keeps serving"):
        activate_version(bundle, result.version)
    assert store.active_version() == before
    activate_version(bundle, result.version, force=True)
    assert store.active_version() == result.version


@pytest.mark.parametrize("objective", ["listnet", "listmle", "listmle-te", "perceptron"])
def test_every_objective_trains(
    ltr_settings: Settings, objective: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    force_a_learned_epoch(monkeypatch)  # the toy keeps its start weights: no version otherwise
    out = train_ltr(
        LtrParams(objective=objective, epochs=1, candidates=5, freeze_smt=True, lex=True),
        setup=ltr_setup(ltr_settings),
    ).to_json()
    assert out["version"].startswith(f"ltr-{objective}-")
    assert out["metrics"]["epochs"] == 1


def test_freeze_smt_moves_only_ir_and_lex(ltr_settings: Settings) -> None:
    from service.mt.bundle import weights_store

    active = (
        weights_store(ltr_settings.model_bundles[0], ltr_settings.weights_state_dir)
        .active()
        .weights
    )
    result = train_ltr(
        LtrParams(epochs=2, patience=5, candidates=5, freeze_smt=True, lex=True),
        setup=ltr_setup(ltr_settings),
    )
    learned = result.outcome.history  # at least one epoch ran
    assert learned
    weights = result.outcome.epoch_weights or [result.outcome.weights]
    for w in weights:
        for name, value in active.items():
            assert w[name] == value, name


def test_per_term_ir_weights_are_learned_unless_turned_off(
    toy_bundle: ModelBundle,
    toy_index: InvertedIndex,
    ltr_data: dict[str, Path],
    ltr_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    force_a_learned_epoch(monkeypatch)
    # Hieber & Riezler 2015, §3: a weight per English term (ir:<t>, added to v), learned with the
    # rest
    (spec,), start = make_specs(toy_bundle, toy_index, ltr_data, 1, freeze_smt=True)
    shard = Shard(spec, toy_bundle, toy_index)
    shard.build()
    assert any(is_ir_term_feature(n) for n in shard.space.names)
    moved: dict[bool, set[str]] = {}
    for ir_terms in (True, False):
        shard.configure("hinge", freeze_smt=True, lex=False, ir_terms=ir_terms)
        w = shard.epoch(start).weights
        w = shard.epoch(w).weights
        moved[ir_terms] = {n for n, x in w.items() if is_ir_term_feature(n) and x != 0.0}
        # v is the default weight of the terms: fixed when they learn their own
        # (Hieber & Riezler 2015, §3)
        assert (w[IR_FEATURE] == start[IR_FEATURE]) == ir_terms
    assert moved[True] and not moved[False]
    # a stored version leaves out the per-term weights that stayed 0 and records the option
    from service.mt.bundle import weights_store

    store = weights_store(ltr_settings.model_bundles[0], ltr_settings.weights_state_dir)
    for ir_terms in (True, False):
        result = train_ltr(LtrParams(epochs=1, candidates=5, freeze_smt=True, ir_terms=ir_terms),
                           setup=ltr_setup(ltr_settings))  # fmt: skip
        saved = store.load(result.version)
        assert f"ir_terms={ir_terms}" in saved.source
        assert all(x != 0.0 for n, x in saved.weights.items() if is_ir_term_feature(n))


def test_cancellation_writes_nothing(ltr_settings: Settings) -> None:
    from service.mt.bundle import weights_store

    store = weights_store(ltr_settings.model_bundles[0], ltr_settings.weights_state_dir)
    before = store.versions()
    active = store.active_version()
    for cancel_after in (1, 4):
        with pytest.raises(JobCancelled):
            train_ltr(
                LtrParams(epochs=3, candidates=5, activate=True),
                Recorder(cancel_after=cancel_after),
                setup=ltr_setup(ltr_settings),
            )
    assert store.versions() == before
    assert store.active_version() == active


def test_bad_qrels_give_a_clear_error(ltr_settings: Settings, ltr_data: dict[str, Path]) -> None:
    bad = ltr_data["root"] / "bad.txt"
    bad.write_text("t1 0 d1 3\nt2 0 d3\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad.txt:2"):
        train_ltr(LtrParams(qrels=bad, epochs=1), setup=ltr_setup(ltr_settings))
    other = write_qrels(ltr_data["root"] / "other.txt", DEV_QRELS)  # qrels of other queries
    with pytest.raises(InvalidInputError, match=r"no usable query.*other\.txt"):
        train_ltr(LtrParams(qrels=other, epochs=1), setup=ltr_setup(ltr_settings))
    missing = ltr_data["root"] / "missing.txt"
    with pytest.raises(MissingResourceError, match=r"missing\.txt"):
        train_ltr(LtrParams(qrels=missing, epochs=1), setup=ltr_setup(ltr_settings))


def test_the_ltr_job_rejects_bad_params(ltr_settings: Settings) -> None:
    with pytest.raises(InvalidInputError, match="objective"):
        ltr({"objective": "svm"}, Recorder(), ltr_settings)
    with pytest.raises(InvalidInputError, match="epochs"):
        ltr({"epochs": 0}, Recorder(), ltr_settings)
    with pytest.raises(InvalidInputError, match="rho"):
        ltr({"rho": 1.5}, Recorder(), ltr_settings)
    assert LtrParams(objective="perceptron", rate=0.2).objective_options() == {
        "rate": 0.2,
        "tau": 1.0,
    }
    assert LtrParams(objective="listnet", rho=0.9).objective_options() == {"rho": 0.9, "eps": 1e-6}


def test_the_webs_path_policy_and_the_defaults(ltr_settings: Settings, tmp_path: Path) -> None:
    """Over HTTP (:func:`service.api.admin.job_params`) data files lie under the data
    directory and the model is a configured one; otherwise the paths are filled in from the
    setup."""
    rel = Path("clir/lohelp-de/queries.train.tsv")
    ok = job_params(LtrParams(queries=rel), ltr_settings)
    assert ok.queries == (ltr_settings.data_dir / rel).resolve()
    outside = tmp_path / "outside.tsv"
    outside.write_text("q\tx\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="under the data directory"):
        job_params(LtrParams(queries=outside), ltr_settings)
    with pytest.raises(InvalidInputError, match="under the data directory"):
        job_params(LtrParams(queries=Path("../outside.tsv")), ltr_settings)
    with pytest.raises(InvalidInputError, match="not one of the configured"):
        job_params(LtrParams(model=tmp_path), ltr_settings)
    assert LtrParams(queries=outside).resolved(ltr_setup(ltr_settings)).queries == outside
    resolved = LtrParams().resolved(ltr_setup(ltr_settings))
    assert resolved.lang == "de" and resolved.backend == "inline"
    assert resolved.model == ltr_settings.model_bundles[0].resolve()
    with pytest.raises(InvalidInputError, match="not 'zh'"):
        LtrParams(lang="zh", model=resolved.model).resolved(ltr_setup(ltr_settings))


def test_clir_train_ltr(
    ltr_settings: Settings,
    ltr_data: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    force_a_learned_epoch(monkeypatch)
    import json

    from service.cli import main

    args = ["train-ltr", "--model", str(ltr_settings.model_bundles[0]),
            "--index", str(ltr_settings.doc_indexes[0])]  # fmt: skip
    for name in ("queries", "qrels", "dev_queries", "dev_qrels"):
        args += ["--" + name.replace("_", "-"), str(ltr_data[name])]
    code = main([*args, "--epochs", "2", "--candidates", "5", "--objective", "perceptron",
                 "--rate", "0.05", "--no-ir-terms"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    payload = json.loads(out)
    assert payload["version"].startswith("ltr-perceptron-") and payload["activated"] is False
    from service.mt.bundle import load_bundle

    bundle = load_bundle(ltr_settings.model_bundles[0], state_root=ltr_settings.weights_state_dir)
    stored = bundle.weights_store.load(payload["version"])
    assert "rate=0.05 tau=1" in stored.source and "ir_terms=False" in stored.source
    m = payload["metrics"]
    assert m["train_queries"] + m["heldout_queries"] == len(TRAIN_QUERIES)
    assert payload["activation"]["offered"] == bool(m["activation_offered"])
    assert "epoch 1:" in err
    assert main([*args, "--epochs", "0"]) == 1
    assert "epochs" in capsys.readouterr().err


def test_selection_split_keeps_order_qrels_and_counts() -> None:
    from service.ltr.examples import Selection

    sel = Selection(
        queries={"b": "x", "a": "y", "c": "z"},
        qrels={"b": {"d1": 1}, "a": {"d2": 2}, "c": {}},
        no_relevant_in_index=4,
    )
    first, rest = sel.split(2)
    assert list(first.queries) == ["b", "a"] and first.qrels == {"b": {"d1": 1}, "a": {"d2": 2}}
    assert list(rest.queries) == ["c"] and rest.qrels == {"c": {}}
    assert first.no_relevant_in_index == rest.no_relevant_in_index == 4
    assert list(sel.queries) == ["b", "a", "c"]  # the original is untouched


def test_dev_set_subset_keeps_only_those_queries_and_their_qrels(
    toy_bundle: ModelBundle, toy_index: InvertedIndex, ltr_data: dict[str, Path]
) -> None:
    start = start_weights(toy_bundle.active_weights().weights, 1.0)
    sel = select_queries(ltr_data["queries"], ltr_data["qrels"], toy_index)
    dev = DevSet.build(Decoding(toy_bundle, toy_index, start, pop_limit=50, lex=False), sel)
    part = dev.subset(["t2", "t5"])
    assert [q for q, _ in part.queries] == ["t2", "t5"] and set(part.qrels) == {"t2", "t5"}
    assert len(dev.queries) == len(TRAIN_QUERIES)  # the original is untouched
    # its rankings are the full set's rankings of those queries
    full, sub = dev.run(start), part.run(start)
    assert sub == {q: full[q] for q in ("t2", "t5")}

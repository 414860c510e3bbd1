"""Offline training of a model bundle: ``clir train-model``.

Stages, each resumable (:mod:`service.mt.training.stages`) in the work directory ``<out>.work/``:

1. ``clean``   normalise, tokenise and filter the parallel corpus (:mod:`service.text.clean`);
2. ``align``   eflomal in both directions, symmetrised with grow-diag-final-and;
3. ``grammar`` lexical table, Hiero rule extraction (Chiang 2007 §3.2) and rule features,
               pruned to ``rule_table_limit`` target sides per source side, stored binary;
4. ``lm``      4-gram interpolated modified Kneser-Ney LM on the English text (ARPA), and its
               hash table for compiled code (:mod:`service.mt.lm.cache`, verified, cached);
5. ``bundle``  default weights, the manifest, and an atomic swap of ``<out>``.

A stage reruns only if its inputs or settings changed; a bundle whose manifest records the
same build key is up to date and nothing runs. The new bundle is assembled beside the target
and renamed into place, so an interrupted run never leaves a bundle that looks complete.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from service import __version__
from service.core.arraydir import sha256_file
from service.core.extras import import_extra
from service.data import read_parallel
from service.data.io import atomic_write, iter_lines
from service.errors import ConfigurationError, DataFormatError, InvalidInputError
from service.mt.bundle import (
    BUNDLE_FORMAT,
    DEFAULT_WEIGHTS,
    GRAMMAR_DIR,
    LEXICAL_FILE,
    LM_FILE,
    MANIFEST,
    WEIGHTS_DIR,
)
from service.mt.grammar import write_encoded
from service.mt.lm import load_lm_table
from service.mt.rules import DECODER_FEATURES, RULE_FEATURES
from service.mt.training.align import EFLOMAL_FEATURE, Alignments, align_corpus, symmetrize
from service.mt.training.domain import (
    DEFAULT_PRIOR,
    check_prefixes,
    check_prior,
    domain_flags,
    in_domain_counts,
)
from service.mt.training.extract import (
    AlignedPair,
    ExtractionConfig,
    default_shards,
    encode_corpus,
    extract_rules,
)
from service.mt.training.lexical_counts import lexical_table_from_corpus
from service.mt.training.lm_estimate import train_lm
from service.mt.training.rule_features import RULE_TABLE_LIMIT, estimate_features
from service.mt.training.stages import StageRunner, peak_rss_mb, stage_key
from service.mt.weights import WeightsStore
from service.text import preprocess
from service.text.clean import CorpusCleaner

Log = Callable[[str], None]


@dataclass(frozen=True)
class TrainConfig:
    """Everything that changes the bundle's numbers (recorded in the manifest)."""

    src: str
    tgt: str = "en"
    max_tokens: int = 80
    max_ratio: float = 9.0
    symmetrization: str = "grow-diag-final-and"
    max_initial_source: int = 10
    max_rule_symbols: int = 5
    tight_hierarchical: bool = True
    tight_target: bool = False  # no unaligned English word at a rule's phrase edge
    min_hierarchical_count: int = 2
    rule_table_limit: int = RULE_TABLE_LIMIT
    lm_order: int = 4
    lm_discount_fallback: bool = False  # lmplz's --discount_fallback (0.5, 1, 1.5) for tiny text
    limit: int | None = None  # use only the first N parallel pairs (demo bundles)
    lm_limit: int | None = None  # use only the first N LM lines
    # origins (the parallel file's first column) of in-domain pairs, by prefix: their own
    # translation probabilities become two more rule features (service.mt.training.domain)
    in_domain: tuple[str, ...] = ()
    domain_prior: float = DEFAULT_PRIOR  # τ of the in-domain MAP estimate

    def __post_init__(self) -> None:
        if self.in_domain:
            check_prefixes(self.in_domain)
        check_prior(self.domain_prior)


def _versions() -> dict[str, str]:
    out = {"service": __version__}
    for pkg in ("kenlm", "eflomal", "sacremoses", "jieba", "numpy"):
        out[pkg] = "absent"
        # the kenlm module comes from the ufal.kenlm wheel (before, from the kenlm sdist)
        for dist in ("ufal.kenlm", "kenlm") if pkg == "kenlm" else (pkg,):
            with suppress(metadata.PackageNotFoundError):
                out[pkg] = metadata.version(dist)
                break
    return out


def _write_lines(path: Path, lines: Iterator[str]) -> int:
    n = 0
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
            n += 1
    return n


def _read_token_lines(path: Path) -> Iterator[tuple[str, ...]]:
    for _, line in iter_lines(path):
        yield tuple(line.split(" ")) if line else ()


def bar_through(bar: Any, items: Iterator[Any]) -> Iterator[Any]:
    for item in items:
        bar.update()
        yield item


def _limited(it: Iterator[Any], limit: int | None) -> Iterator[Any]:
    for k, x in enumerate(it):
        if limit is not None and k >= limit:
            return
        yield x


def _bar(desc: str, total: int | None = None, unit: str = " lines") -> Any:
    """A progress bar on stderr (off when stderr is not a terminal, e.g. in CI logs)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not sys.stderr.isatty())


@dataclass(frozen=True)
class _Build:
    """One bundle build: its inputs, settings and the paths its stages share."""

    parallel: Path
    lm_text: Path
    config: TrainConfig
    work: Path  # <out>.work: the stages' outputs, kept for resuming
    say: Log

    @property
    def bundle(self) -> Path:  # the new bundle, assembled here before the swap
        return self.work / "bundle"

    @property
    def src_file(self) -> Path:
        return self.work / "corpus.src"

    @property
    def tgt_file(self) -> Path:
        return self.work / "corpus.tgt"

    @property
    def align_file(self) -> Path:
        return self.work / "alignments.npz"

    @property
    def origin_file(self) -> Path:
        return self.work / "corpus.origin"

    def token_pairs(self) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
        """The cleaned corpus, pair by pair."""
        return zip(_read_token_lines(self.src_file), _read_token_lines(self.tgt_file), strict=True)


def train_model(
    parallel: Path,
    lm_text: Path,
    out: Path,
    config: TrainConfig,
    *,
    log: Log | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Build (or confirm up to date) the bundle at ``out``; returns its manifest."""
    say: Log = log or (lambda msg: print(msg, file=sys.stderr))
    for path, what in ((parallel, "parallel corpus"), (lm_text, "LM text")):
        if not path.is_file():
            raise ConfigurationError(f"{what} {path} does not exist")
    if config.src == config.tgt:
        raise ConfigurationError("source and target language must differ")
    say(f"checksumming {parallel} and {lm_text}")
    data = {
        "parallel": {"path": str(parallel), "sha256": sha256_file(parallel)},
        "lm_text": {"path": str(lm_text), "sha256": sha256_file(lm_text)},
    }
    build_key = stage_key(data=data, config=asdict(config), format=BUNDLE_FORMAT)
    existing = _up_to_date(out / MANIFEST, build_key) if not force else None
    if existing is not None:
        say(f"{out} is up to date")
        return existing
    import_extra("eflomal", "train", EFLOMAL_FEATURE)  # fail now, not after cleaning
    build = _Build(parallel, lm_text, config, out.with_name(out.name + ".work"), say)
    build.bundle.mkdir(parents=True, exist_ok=True)
    runner = StageRunner(build.work, log=say)
    started = time.perf_counter()
    keys = _stage_keys(data, config)
    counts = {
        "clean": runner.run("clean", keys["clean"], lambda: _clean(build))["result"],
        "align": runner.run("align", keys["align"], lambda: _align(build))["result"],
        **(
            {"origins": runner.run("origins", keys["origins"], lambda: _origins(build))["result"]}
            if config.in_domain
            else {}
        ),
        "grammar": runner.run("grammar", keys["grammar"], lambda: _grammar(build))["result"],
        "lm": runner.run("lm", keys["lm"], lambda: _lm(build))["result"],
    }
    # the LM as arrays for the compiled decoder, cached in lm.table/ beside the ARPA file and
    # checked against KenLM; publishing hard-links it with the ARPA, so it stays current
    load_lm_table(build.bundle / LM_FILE, log=say)
    _default_weights(build.bundle)
    timings = {
        **runner.timings,
        "total_seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
    manifest = _manifest(config, build_key, data, counts, timings)
    _publish(build.bundle, out, manifest)
    say(f"bundle written to {out}")
    return manifest


def _stage_keys(data: dict[str, Any], config: TrainConfig) -> dict[str, str]:
    """Each stage's key: its inputs and the settings that change its output."""
    clean_key = stage_key(
        parallel=data["parallel"]["sha256"],
        src=config.src,
        tgt=config.tgt,
        max_tokens=config.max_tokens,
        max_ratio=config.max_ratio,
        limit=config.limit,
    )
    align_key = stage_key(clean=clean_key, method=config.symmetrization)
    origins_key = stage_key(clean=clean_key)
    # settings added later enter the key only when on, so the grammar stage of a bundle built
    # before them stays up to date
    later: dict[str, Any] = {}
    if config.in_domain:
        later.update(in_domain=list(config.in_domain), domain_prior=config.domain_prior)
    if config.tight_target:
        later.update(tight_target=True)
    grammar_key = stage_key(
        **later,
        align=align_key,
        max_initial_source=config.max_initial_source,
        max_rule_symbols=config.max_rule_symbols,
        tight=config.tight_hierarchical,
        min_count=config.min_hierarchical_count,
        limit=config.rule_table_limit,
    )
    lm_key = stage_key(
        lm_text=data["lm_text"]["sha256"],
        order=config.lm_order,
        limit=config.lm_limit,
        tokenizer="preprocess-en",
        fallback=config.lm_discount_fallback,
    )
    return {
        "clean": clean_key,
        "align": align_key,
        "origins": origins_key,
        "grammar": grammar_key,
        "lm": lm_key,
    }


def _manifest(
    config: TrainConfig,
    build_key: str,
    data: dict[str, Any],
    counts: dict[str, Any],
    timings: dict[str, Any],
) -> dict[str, Any]:
    """The bundle's manifest."""
    return {
        "format": BUNDLE_FORMAT,
        "src": config.src,
        "tgt": config.tgt,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "build_key": build_key,
        "feature_names": [
            *counts["grammar"].get("feature_names", RULE_FEATURES),
            *DECODER_FEATURES,
        ],
        "data": data,
        "settings": asdict(config),
        "counts": {
            "pairs": counts["clean"].get("pairs"),
            "cleaning": counts["clean"].get("report"),
            "alignment": counts["align"],
            "grammar": counts["grammar"],
            "lm": counts["lm"],
        },
        "files": {
            "grammar": GRAMMAR_DIR,
            "lexical": LEXICAL_FILE,
            "lm": LM_FILE,
            "weights": WEIGHTS_DIR,
        },
        "versions": _versions(),
        "timings": timings,
    }


def _up_to_date(manifest_path: Path, build_key: str) -> dict[str, Any] | None:
    """The manifest at ``manifest_path`` if it records ``build_key`` (the bundle is current)."""
    if not manifest_path.exists():
        return None
    try:
        existing: dict[str, Any] = json.loads(manifest_path.read_text())
    except json.JSONDecodeError:
        return None
    return existing if existing.get("build_key") == build_key else None


# --- the stages ---------------------------------------------------------------------------


def _clean(build: _Build) -> dict[str, Any]:
    """1. Normalise, tokenise and filter the parallel corpus into corpus.src/.tgt."""
    config = build.config
    cleaner = CorpusCleaner(
        config.src, config.tgt, max_tokens=config.max_tokens, max_ratio=config.max_ratio
    )
    pairs = _limited(read_parallel(build.parallel, on_error="skip"), config.limit)
    with _bar("clean", unit=" pairs") as bar:
        kept = []
        for pair in cleaner.clean(pairs):
            kept.append(pair)
            bar.update()
    if not kept:
        raise InvalidInputError(f"{build.parallel}: no usable sentence pair after cleaning")
    _write_lines(build.src_file, (" ".join(p.source) for p in kept))
    _write_lines(build.tgt_file, (" ".join(p.target) for p in kept))
    build.say(str(cleaner.report))
    return {"report": cleaner.report.to_dict(), "pairs": len(kept)}


def _align(build: _Build) -> dict[str, Any]:
    """2. eflomal in both directions, symmetrised."""
    fwd, rev = align_corpus(build.token_pairs(), workdir=build.work)
    sym = symmetrize(fwd, rev, build.config.symmetrization)
    sym.save(build.align_file)
    return {"sentences": len(sym), "links": len(sym.links)}


def _origins(build: _Build) -> dict[str, Any]:
    """2b. The origin of every cleaned pair (the cleaning again, keeping the first column),
    for the in-domain features; checked against the cleaned corpus."""
    config = build.config
    cleaner = CorpusCleaner(
        config.src, config.tgt, max_tokens=config.max_tokens, max_ratio=config.max_ratio
    )
    pairs = _limited(read_parallel(build.parallel, on_error="skip"), config.limit)
    n = _write_lines(build.origin_file, (p.origin for p in cleaner.clean(pairs)))
    expected = sum(1 for _ in _read_token_lines(build.src_file))
    if n != expected:
        raise DataFormatError(
            build.parallel,
            None,
            f"cleaning again kept {n} pairs, the cleaned corpus has {expected}; the file "
            "changed during the build — build again with --force",
        )
    return {"pairs": n}


def _grammar(build: _Build) -> dict[str, Any]:
    """3. The lexical table, the extracted rules and their features, stored binary."""
    config = build.config
    flags = None
    if config.in_domain:  # before the long extraction: a prefix that matches nothing fails now
        origins = build.origin_file.read_text(encoding="utf-8").splitlines()
        flags = domain_flags(origins, config.in_domain)
        build.say(f"in-domain pairs ({', '.join(config.in_domain)}): {flags.sum()} of {len(flags)}")
        if not flags.any():
            raise ConfigurationError(
                f"no sentence pair is in the domain: no origin of {build.parallel} starts with "
                f"{' or '.join(config.in_domain)}"
            )
    alignments = Alignments.load(build.align_file)
    aligned_pairs = (
        AlignedPair(s, t, [(int(i), int(j)) for i, j in alignments[k]])
        for k, (s, t) in enumerate(build.token_pairs())
    )
    corpus = encode_corpus(aligned_pairs)
    lexical = lexical_table_from_corpus(corpus)
    lexical.save(build.bundle / LEXICAL_FILE)
    ext = ExtractionConfig(
        max_initial_source=config.max_initial_source,
        max_rule_symbols=config.max_rule_symbols,
        tight_hierarchical=config.tight_hierarchical,
        tight_target=config.tight_target,
        min_hierarchical_count=config.min_hierarchical_count,
    )
    passes = default_shards(corpus) + 1  # the extraction's passes over the corpus
    with _bar("extract rules", total=passes * len(corpus), unit=" sentences") as bar:
        done = 0

        def progress(n: int) -> None:
            nonlocal done
            bar.update(n - done)
            done = n

        counts = extract_rules(corpus, ext, progress=progress)
    domain = None if flags is None else in_domain_counts(corpus, flags, ext)
    del corpus  # free each large intermediate as soon as the next one exists
    extracted = len(counts)
    table = estimate_features(
        counts, lexical, limit=config.rule_table_limit, domain=domain, prior=config.domain_prior
    )
    del domain
    names = list(table.feature_names)
    del counts
    kept = len(table)
    encoded = table.to_encoded()
    del table
    write_encoded(encoded, build.bundle / GRAMMAR_DIR)
    return {
        "rules_extracted": extracted,
        "rules": kept,
        "lexical_entries": len(lexical),
        "feature_names": names,
        **({"in_domain_pairs": int(flags.sum())} if flags is not None else {}),
    }


def _lm(build: _Build) -> dict[str, Any]:
    """4. The n-gram LM of the English text (ARPA)."""
    config = build.config
    text = build.work / "lm.txt"
    with _bar("tokenise LM text") as bar:
        lines = (
            " ".join(preprocess(line, config.tgt))
            for _, line in _limited(iter_lines(build.lm_text), config.lm_limit)
        )
        n = _write_lines(text, (ln for ln in bar_through(bar, lines) if ln))
    fallback = (0.5, 1.0, 1.5) if config.lm_discount_fallback else None
    arpa = build.bundle / LM_FILE
    model = train_lm(text, arpa, config.lm_order, tokenize=str.split, discount_fallback=fallback)
    text.unlink()
    return {"lines": n, "ngrams": model.counts(), "words": model.words}


def _default_weights(bundle: Path) -> None:
    """5. The untuned default weights, active unless a version already is."""
    store = WeightsStore(bundle / WEIGHTS_DIR)
    if "default" not in store.versions():
        store.save(DEFAULT_WEIGHTS, version="default", source="untuned defaults")
    try:
        store.active()
    except Exception:
        store.activate("default")


def _publish(bundle: Path, out: Path, manifest: dict[str, Any]) -> None:
    """Hard-link the bundle's files into ``<out>.partial``, add the manifest, swap it in."""
    partial = out.with_name(out.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    for src in bundle.rglob("*"):
        dst = partial / src.relative_to(bundle)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    # weights are mutable after publishing (new versions, activation): copy, don't link
    weights = partial / WEIGHTS_DIR
    if weights.exists():
        shutil.rmtree(weights)
        shutil.copytree(bundle / WEIGHTS_DIR, weights)
    with atomic_write(partial / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")
    old = out.with_name(out.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        _keep_weights(out, partial)
        out.rename(old)
    partial.rename(out)
    if old.exists():
        shutil.rmtree(old)


def _keep_weights(current: Path, new: Path) -> None:
    """Carry weight versions of the bundle being replaced over to the new one."""
    src = current / WEIGHTS_DIR
    if not src.is_dir():
        return
    for file in src.glob("*.json"):
        target = new / WEIGHTS_DIR / file.name
        if not target.exists():
            shutil.copy2(file, target)

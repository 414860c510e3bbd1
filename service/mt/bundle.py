"""Model bundles: what ``clir train-model`` writes and the decoder loads.

A bundle ``models/<src>-<tgt>/`` holds

* ``manifest.json``: languages, feature names, data checksums, settings, counts, component
  versions, per-stage timings — written last, so a directory without it is not a bundle;
* ``grammar/``: the binary Hiero grammar (:mod:`service.mt.grammar`);
* ``lexical.npz``: the lexical translation table w(e|f), w(f|e) (PSQ and translation retrieval
  read it);
* ``lm.arpa``: the 4-gram modified Kneser-Ney language model, loaded with KenLM;
* ``weights/<version>.json`` and ``weights/ACTIVE``: the weights it ships; versions written
  later and the active pointer live in a state directory outside the bundle
  (:mod:`service.mt.weights`).

:func:`load_bundle` validates the manifest and every component and raises a domain error
naming the broken file; a half-written bundle is never loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.errors import DataFormatError, MissingResourceError
from service.mt.decoder import Decoder, DecoderConfig, decoder_class
from service.mt.grammar import Grammar, load_grammar
from service.mt.lexical import LexicalTable
from service.mt.lm import KenLM, LanguageModel
from service.mt.rules import (
    ARITY,
    GLUE,
    LANGUAGE_MODEL,
    LM_OOV,
    LOG_COUNT,
    LOG_LEX_E_GIVEN_F,
    LOG_LEX_F_GIVEN_E,
    LOG_P_E_GIVEN_F,
    LOG_P_F_GIVEN_E,
    PASS_THROUGH,
    RULE_PENALTY,
    SINGLETON,
    WORD_PENALTY,
)
from service.mt.weights import (
    DEFAULT_STATE_DIR,
    WeightsStore,
    WeightsVersion,
    bundle_state_dir,
)
from service.text.compounds import COMPOUND_RULES, CompoundSplitter
from service.text.questions import QUESTION_LANGS, QuestionRewriter

if TYPE_CHECKING:
    from service.mt.lm import LmTable

MANIFEST = "manifest.json"
BUNDLE_FORMAT = 1
GRAMMAR_DIR = "grammar"
LEXICAL_FILE = "lexical.npz"
LM_FILE = "lm.arpa"
WEIGHTS_DIR = "weights"

# Untuned starting weights (natural-log features): the usual Hiero proportions, with a word
# bonus that offsets the LM's preference for short strings. Tuning replaces them.
DEFAULT_WEIGHTS: dict[str, float] = {
    LANGUAGE_MODEL: 0.5,
    LM_OOV: -1.0,
    LOG_P_E_GIVEN_F: 0.2,
    LOG_P_F_GIVEN_E: 0.2,
    LOG_LEX_E_GIVEN_F: 0.2,
    LOG_LEX_F_GIVEN_E: 0.2,
    LOG_COUNT: 0.0,
    SINGLETON: 0.0,
    ARITY: 0.0,
    WORD_PENALTY: 1.0,
    RULE_PENALTY: -0.2,
    GLUE: 0.0,
    PASS_THROUGH: -1.0,
}


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The validated manifest of the bundle at ``path``."""
    root = Path(path)
    file = root / MANIFEST
    if not root.is_dir():
        raise MissingResourceError(
            f"{root}: no model bundle there (build it with clir train-model)"
        )
    if not file.exists():
        raise MissingResourceError(
            f"{file}: missing — the bundle is incomplete (an interrupted build?); rebuild it"
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFormatError(file, None, f"corrupted manifest: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise DataFormatError(file, None, f"not a bundle manifest of format {BUNDLE_FORMAT}")
    for key in ("src", "tgt", "feature_names", "files"):
        if key not in data:
            raise DataFormatError(file, None, f"manifest lacks {key!r}")
    return data


@dataclass
class ModelBundle:
    """A loaded bundle: grammar (memory-mapped), LM, lexical table (lazy) and weights."""

    path: Path
    manifest: dict[str, Any]
    grammar: Grammar
    lm: LanguageModel
    weights_store: WeightsStore
    _decoders: dict[tuple[str, DecoderConfig], Decoder] = field(default_factory=dict, repr=False)

    @property
    def src(self) -> str:
        return str(self.manifest["src"])

    @property
    def tgt(self) -> str:
        return str(self.manifest["tgt"])

    @property
    def name(self) -> str:
        return self.path.name

    @cached_property
    def lexical(self) -> LexicalTable:
        return LexicalTable.load(self.path / LEXICAL_FILE)

    @cached_property
    def compound_splitter(self) -> CompoundSplitter | None:
        """How query words the grammar does not know are split into words it knows
        (Koehn & Knight 2003, §4; :mod:`service.text.compounds`), or None for a source
        language without a rule: parts are counted in the lexical table, and words the
        English language model knows stay whole (they pass through and match as they are)."""
        rule = COMPOUND_RULES.get(self.src)
        if rule is None:
            return None
        lm = self.lm
        return CompoundSplitter(
            self.grammar.knows_source, self.source_count, lambda w: not lm.is_oov(w), rule
        )

    @cached_property
    def question_rewriter(self) -> QuestionRewriter | None:
        """How search rewrites a how-to question as the instruction that answers it
        (:mod:`service.text.questions`), or None for a source language without a rule; a
        verb's infinitive must be a source word of the grammar, counted in the lexical
        table."""
        if self.src not in QUESTION_LANGS:
            return None
        return QuestionRewriter(self.source_count)

    def source_count(self, word: str) -> int:
        """How often the training corpus links the source word ``word`` (the lexical table,
        loaded when a word first needs it), or 0 when the grammar cannot translate it."""
        return self.lexical.source_count(word) if self.grammar.knows_source(word) else 0

    @cached_property
    def lm_table(self) -> LmTable:
        """The LM as arrays for compiled code, memory-mapped from its cache beside the ARPA."""
        from service.mt.lm import load_lm_table  # numba is imported only when needed

        path = getattr(self.lm, "path", None)  # the file the LM itself was loaded from
        if path is None:
            path = self.path / self.manifest.get("files", {}).get("lm", LM_FILE)
        return load_lm_table(path)

    def active_weights(self) -> WeightsVersion:
        return self.weights_store.active()

    def make_decoder(
        self, weights: Mapping[str, float], config: DecoderConfig | None = None
    ) -> Decoder:
        """A new decoder for any weight vector (tuning's changing weights); ``config.engine``
        names its class in :data:`service.mt.decoder.DECODERS`: the compiled kernel or the
        Python reference (same forests). The LM table is loaded only for an engine that
        reads it."""
        config = config or DecoderConfig()
        cls = decoder_class(config.engine)
        table = self.lm_table if cls.wants_lm_table(config) else None
        return cls(self.grammar, self.lm, weights, config, table)

    def decoder(
        self, config: DecoderConfig | None = None, weights: WeightsVersion | None = None
    ) -> Decoder:
        """A decoder for ``weights`` (default: the active version), cached per version."""
        config = config or DecoderConfig()
        weights = weights or self.active_weights()
        key = (weights.version, config)
        dec = self._decoders.get(key)
        if dec is None:
            dec = self.make_decoder(weights.weights, config)
            dec.splitter = self.compound_splitter
            dec.questions = self.question_rewriter
            if len(self._decoders) > 16:
                self._decoders.clear()
            self._decoders[key] = dec
        return dec


def weights_store(path: str | Path, state_root: str | Path | None = None) -> WeightsStore:
    """The weights of the bundle at ``path``, new versions and the active pointer kept in its
    directory under ``state_root`` (default :data:`~service.mt.weights.DEFAULT_STATE_DIR`,
    relative to the working directory; the service passes its setting ``weights_state_dir``)."""
    if state_root is None:
        state_root = DEFAULT_STATE_DIR
    return WeightsStore(Path(path) / WEIGHTS_DIR, bundle_state_dir(path, state_root))


def load_bundle(
    path: str | Path, *, verify: bool = False, state_root: str | Path | None = None
) -> ModelBundle:
    """Load and validate the bundle at ``path`` (``state_root``: see :func:`weights_store`)."""
    root = Path(path)
    manifest = read_manifest(root)
    files = manifest["files"]
    grammar = load_grammar(root / files.get("grammar", GRAMMAR_DIR), verify=verify)
    lm_path = root / files.get("lm", LM_FILE)
    if not lm_path.exists():
        raise MissingResourceError(f"{lm_path}: the bundle's language model is missing")
    lm = KenLM(lm_path)
    store = weights_store(root, state_root)
    store.active()  # refuse a bundle without a loadable active weights version
    return ModelBundle(root, manifest, grammar, lm, store)
